//===- fibers.h - emu prelude: fiber stacks ---------------------*- C++ -*-===//
//
// One part of the emu prelude (see prelude.h): runtime/CMakeLists.txt
// joins the parts, in the order it lists them, into the one header that
// kernels are built with.
//
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Fiber stacks
//===----------------------------------------------------------------------===//

namespace moec_emu {
namespace detail {

/// mmap'ed stacks with a guard page below, kept for reuse by every launch of
/// this .so (a fresh mmap per thread per block would dominate small blocks).
class GlobalStacks {
public:
  ~GlobalStacks() {
    for (auto &entry : free)
      ::munmap(entry.first, entry.second + pageBytes());
  }
  static GlobalStacks &get() {
    static GlobalStacks stacks;
    return stacks;
  }
  static size_t pageBytes() {
    static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    return page;
  }
  /// A stack of `bytes` (the mapping starts with the guard page).
  void *take(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (size_t i = free.size(); i-- > 0;) {
        if (free[i].second == bytes) {
          void *base = free[i].first;
          free[i] = free.back();
          free.pop_back();
          return base;
        }
      }
    }
    size_t page = pageBytes();
    void *base = ::mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
      throw std::bad_alloc();
    ::mprotect(base, page, PROT_NONE);
    return base;
  }
  void give(const std::vector<void *> &bases, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex);
    for (void *base : bases)
      free.emplace_back(base, bytes);
  }

private:
  std::mutex mutex;
  std::vector<std::pair<void *, size_t>> free;
};

/// The stacks of one worker: taken from GlobalStacks once, then recycled
/// between the blocks the worker runs without locking.
class StackPool {
public:
  /// A pool for at most `count` live fibers (deallocate cannot allocate).
  StackPool(size_t bytes, size_t count) : bytes(bytes) { free.reserve(count); }
  ~StackPool() { GlobalStacks::get().give(free, bytes); }
  StackPool(const StackPool &) = delete;
  StackPool &operator=(const StackPool &) = delete;

  boost::context::stack_context allocate() {
    void *base;
    if (!free.empty()) {
      base = free.back();
      free.pop_back();
    } else {
      base = GlobalStacks::get().take(bytes);
    }
    boost::context::stack_context sctx;
    sctx.size = bytes;
    sctx.sp = static_cast<char *>(base) + GlobalStacks::pageBytes() + bytes;
    return sctx;
  }
  void deallocate(boost::context::stack_context &sctx) noexcept {
    free.push_back(static_cast<char *>(sctx.sp) - sctx.size -
                   GlobalStacks::pageBytes());
  }

private:
  size_t bytes;
  std::vector<void *> free;
};

/// The stack allocator Boost.Context is handed for each fiber.
struct PooledStack {
  StackPool *pool;
  Thread *thread;
  boost::context::stack_context allocate() {
    boost::context::stack_context sctx = pool->allocate();
    thread->stackBottom = static_cast<char *>(sctx.sp) - sctx.size;
    thread->stackBytes = sctx.size;
    return sctx;
  }
  void deallocate(boost::context::stack_context &sctx) noexcept {
    pool->deallocate(sctx);
  }
};
