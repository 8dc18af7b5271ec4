//===- prelude.h - the SIMT prelude of the emu device -----------*- C++ -*-===//
//
// The emu device runs the CUDA source moec generates on the CPU:
//
//   c++ -std=c++17 -O1 -g -fPIC -shared -fvisibility=hidden -pthread
//       -DMOEC_EMU [-DMOEC_EMU_CHECK] -include prelude.h -x c++ kernel.cu
//       -o kernel.so -lboost_context
//
// This header makes the CUDA subset of compiler/CODEGEN.md compile with the
// host compiler and behave as on a GPU. Every thread of a block is a fiber
// (Boost.Context); __syncthreads() and the warp collectives suspend it until
// the threads they wait for arrive, so barriers are real and a block whose
// threads disagree is reported instead of hanging. Blocks run one after the
// other on a host thread, or on several host threads in parallel.
//
// With MOEC_EMU_CHECK, moec::gptr<T> is a bounds-checked pointer, shared
// memory is tracked per byte (out-of-bounds accesses and reads of bytes no
// thread of the block has written are reported) and shuffles that read a
// lane outside their mask are errors. Tracked shared arrays are objects, so
// code that hands one to a template deducing T from a T* parameter does not
// compile: such parameters should be moec::sptr<T> (T* on the GPU), or the
// tracking can be left out with MOEC_EMU_UNTRACKED_SHARED.
//
// It is self-contained: each kernel .so carries its own copy, compiled with
// hidden visibility, and exports only moec_emu_launch_<kernel> (see
// MOEC_EMU_EXPORT_KERNEL), so the .so needs nothing from the moec runtime.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_EMU_PRELUDE_H
#define MOEC_EMU_PRELUDE_H

#include <boost/context/fiber.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <sys/mman.h>
#include <thread>
#include <type_traits>
#include <unistd.h>
#include <utility>
#include <vector>

// Under AddressSanitizer every fiber switch is announced, so that ASan
// knows which stack is live (exceptions unwind fiber stacks).
#if defined(__SANITIZE_ADDRESS__)
#define MOEC_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MOEC_EMU_ASAN 1
#endif
#endif
#ifdef MOEC_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

// The emu device passes the kernel ABI's buffer count, so that this file
// and the device library share one number.
#ifndef MOEC_EMU_MAX_BUFFERS
#error "build with -DMOEC_EMU_MAX_BUFFERS=<the kernel ABI's buffer count>"
#endif

#if defined(MOEC_EMU_CHECK) && !defined(MOEC_EMU_UNTRACKED_SHARED)
#define MOEC_EMU_TRACK_SHARED 1
#endif

//===----------------------------------------------------------------------===//
// The launcher ABI (plain C, shared with runtime/lib/emu/EmuCompiler.h)
//===----------------------------------------------------------------------===//

/// The value of moec_emu_launch::version this prelude accepts.
#define MOEC_EMU_ABI_VERSION 1u

extern "C" {
/// One launch of one kernel; the host fills it, the .so reads it.
typedef struct moec_emu_launch {
  unsigned version;     ///< MOEC_EMU_ABI_VERSION
  unsigned flags;       ///< reserved, 0
  unsigned grid[3];     ///< gridDim
  unsigned block[3];    ///< blockDim
  unsigned hostThreads; ///< host threads running blocks; 0 or 1: sequential
  unsigned reserved;    ///< 0
  unsigned long long sharedBytes; ///< dynamic shared memory per block
  unsigned long long stackBytes;  ///< fiber stack per thread; 0: 64 KiB
  /// Byte size of each buffer of KernelParams (0: unknown, not checked).
  unsigned long long bufferBytes[MOEC_EMU_MAX_BUFFERS];
} moec_emu_launch;
}
static_assert(offsetof(moec_emu_launch, sharedBytes) == 40 &&
                  offsetof(moec_emu_launch, bufferBytes) == 56 &&
                  sizeof(moec_emu_launch) == 56 + 8 * MOEC_EMU_MAX_BUFFERS,
              "the launcher ABI is fixed (EmuCompiler.cpp mirrors it)");

//===----------------------------------------------------------------------===//
// Qualifiers and built-in types
//===----------------------------------------------------------------------===//

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// __restrict__ is a GNU C++ keyword already. __shared__ stays undefined on
// purpose: the device library uses MOEC_SHARED so that emu can track it.

struct uint3 {
  unsigned x, y, z;
};

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x = 1, unsigned y = 1, unsigned z = 1)
      : x(x), y(y), z(z) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

struct __align__(8) float2 {
  float x, y;
};
struct float3 {
  float x, y, z;
};
struct __align__(16) float4 {
  float x, y, z, w;
};
struct __align__(8) int2 {
  int x, y;
};
struct int3 {
  int x, y, z;
};
struct __align__(16) int4 {
  int x, y, z, w;
};
struct __align__(8) uint2 {
  unsigned x, y;
};
struct __align__(16) uint4 {
  unsigned x, y, z, w;
};
struct __align__(16) double2 {
  double x, y;
};

inline float2 make_float2(float x, float y) { return {x, y}; }
inline float3 make_float3(float x, float y, float z) { return {x, y, z}; }
inline float4 make_float4(float x, float y, float z, float w) {
  return {x, y, z, w};
}
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int3 make_int3(int x, int y, int z) { return {x, y, z}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) {
  return {x, y, z};
}
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  return {x, y, z, w};
}
inline double2 make_double2(double x, double y) { return {x, y}; }

constexpr int warpSize = 32;

//===----------------------------------------------------------------------===//
// Execution state: launch, block, thread
//===----------------------------------------------------------------------===//

namespace moec_emu {
namespace detail {

constexpr unsigned kWarpSize = 32;
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned long long kMaxSharedBytes = 227ull * 1024; // sm_90 opt-in
constexpr unsigned kMaxBuffers = MOEC_EMU_MAX_BUFFERS;
constexpr size_t kDefaultStackBytes = 64 * 1024;
constexpr unsigned kMaxHostThreads = 256;

/// Thrown through kernel frames to stop a thread of a failed block.
struct AbortBlock {};

/// Index operands of the pointer classes: any integer type, so that they
/// beat the built-in operators reached through the pointer conversions.
template <typename I>
using EnableIfIndex = std::enable_if_t<std::is_integral<I>::value, int>;

/// Why a thread is not running.
enum class Wait : unsigned char { Ready, Barrier, Warp, ActiveMask, Done };

/// What a warp collective does; lanes of one collective must agree on it.
enum Op : unsigned {
  OpSync = 1,
  OpShfl,
  OpBallot,
  OpAny,
  OpAll,
  OpReduceAdd,
  OpReduceMin,
  OpReduceMax,
  OpReduceAnd,
  OpReduceOr,
  OpReduceXor,
  OpMmaBf16,
  OpMmaTf32,
};

/// A lane's part in a warp collective; lives until the collective completes.
struct LaneSlot {
  unsigned op;           // Op | shuffle mode << 8 | operand bytes << 16
  uint64_t value;        // operand (shuffle value, predicate, reduce operand)
  int src;               // shuffles: the lane read after PTX clamping
  uint64_t result;       // filled in by the lane that completes the collective
  const char *what;      // the intrinsic's name, for messages
  const uint32_t *a, *b; // mma fragments
  const float *c;
  float *d;
};

/// One CUDA thread: a fiber plus the state the scheduler keeps for it.
struct Thread {
  uint3 idx;
  unsigned linear, warp, lane;
  Wait wait;
  bool started;
  boost::context::fiber fiber; // resumed by the scheduler
  boost::context::fiber sink;  // resumed by the thread to yield
  const void *stackBottom;     // for AddressSanitizer
  size_t stackBytes;
  void *fakeStack;
  const char *barrierFile;
  int barrierLine, barrierKind, barrierPred, barrierResult;
  LaneSlot slot;
};

/// A warp collective some lanes have reached and others not yet.
struct Group {
  unsigned mask, arrived, op;
  const char *what;
};

/// The collectives pending in one warp and the lanes that have exited.
struct WarpState {
  std::vector<Group> groups;
  unsigned exited;
};

/// A buffer of the launch as the bounds checks see it.
struct BufferInfo {
  const unsigned char *base;
  unsigned long long bytes;
  int index;
};

/// A shared-memory array or the dynamic shared memory, tracked per byte in
/// check mode.
struct SharedRegion {
  unsigned char *data;
  uint64_t *written;
  size_t bytes;
  unsigned long long serial; // the block it was reset for
  bool escaped;              // a raw pointer to it was taken: stop checking
  const char *name;          // null: the dynamic shared memory
};

class StackPool;

/// What every block of a launch shares.
struct Launch {
  const char *kernel;
  void (*invoke)(void (*fn)(), const void *params);
  void (*fn)();
  const void *params;
  dim3 grid, block;
  unsigned nThreads;
  unsigned long long nBlocks;
  size_t sharedBytes, stackBytes;
  BufferInfo buffers[kMaxBuffers];
  std::atomic<unsigned long long> nextBlock{0};
  std::atomic<unsigned long long> stopAt{~0ull};
  std::mutex errorMutex;
  unsigned long long errorBlock = ~0ull;
  std::string error;
};

struct Block;

/// The host thread's view: which block runs on it and which fiber is on.
struct Tls {
  Thread *thread;
  Block *block;
  unsigned long long serial; // counts blocks run by this host thread
};
inline thread_local Tls tls;

/// Formats like snprintf into a std::string.
inline std::string vformat(const char *fmt, va_list args) {
  char small[512];
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(small, sizeof small, fmt, copy);
  va_end(copy);
  if (n < 0)
    return fmt;
  if (static_cast<size_t>(n) < sizeof small)
    return std::string(small, static_cast<size_t>(n));
  std::string big(static_cast<size_t>(n) + 1, '\0');
  std::vsnprintf(&big[0], big.size(), fmt, args);
  big.resize(static_cast<size_t>(n));
  return big;
}

inline std::string format(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
inline std::string format(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string s = vformat(fmt, args);
  va_end(args);
  return s;
}

inline std::string describe(const uint3 &v) {
  return format("(%u,%u,%u)", v.x, v.y, v.z);
}

/// Stops the calling CUDA thread with an error for its block (the first
/// error of a block wins). Outside a launch it prints and aborts.
[[noreturn]] inline void fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

} // namespace detail
} // namespace moec_emu

//===----------------------------------------------------------------------===//
// Built-in variables (per fiber)
//===----------------------------------------------------------------------===//

namespace moec_emu {
namespace detail {
inline const uint3 &currentThreadIdx() { return tls.thread->idx; }
inline const uint3 &currentBlockIdx();
inline const dim3 &currentBlockDim();
inline const dim3 &currentGridDim();
} // namespace detail
} // namespace moec_emu

#define threadIdx (::moec_emu::detail::currentThreadIdx())
#define blockIdx (::moec_emu::detail::currentBlockIdx())
#define blockDim (::moec_emu::detail::currentBlockDim())
#define gridDim (::moec_emu::detail::currentGridDim())

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

//===----------------------------------------------------------------------===//
// A block and its scheduler
//===----------------------------------------------------------------------===//

/// One thread block being run by one host thread. The scheduler resumes
/// ready fibers in FIFO order until every thread has exited or waits; then
/// it resolves __activemask(), reports collectives that cannot complete and
/// releases or rejects the barrier. Scheduling is deterministic.
struct Block {
  Launch *launch;
  uint3 idx;
  dim3 dim, grid;
  unsigned nThreads;
  unsigned long long linear;
  StackPool stacks; // outlives the fibers, which return their stacks to it
  std::vector<Thread> threads;
  std::vector<unsigned> ready; // ring buffer of thread indices
  unsigned readyHead = 0, readyCount = 0;
  std::vector<WarpState> warps;
  unsigned live = 0;
  bool failed = false, aborting = false;
  std::string error;
  std::vector<unsigned char> dynamicStorage;
  std::vector<uint64_t> dynamicWritten;
  SharedRegion dynamic;
  const void *hostStackBottom = nullptr; // for AddressSanitizer
  size_t hostStackBytes = 0;

  Block(Launch &launch)
      : launch(&launch), dim(launch.block), grid(launch.grid),
        nThreads(launch.nThreads), stacks(launch.stackBytes, launch.nThreads),
        threads(launch.nThreads), ready(launch.nThreads),
        warps((launch.nThreads + kWarpSize - 1) / kWarpSize),
        dynamicStorage(launch.sharedBytes + 128),
        dynamicWritten((launch.sharedBytes + 63) / 64) {
    for (unsigned i = 0; i < nThreads; ++i) {
      Thread &t = threads[i];
      t.linear = i;
      t.idx = uint3{i % dim.x, (i / dim.x) % dim.y, i / (dim.x * dim.y)};
      t.warp = i / kWarpSize;
      t.lane = i % kWarpSize;
    }
    uintptr_t base = reinterpret_cast<uintptr_t>(dynamicStorage.data());
    dynamic = SharedRegion{
        reinterpret_cast<unsigned char *>((base + 127) & ~uintptr_t(127)),
        dynamicWritten.data(),
        launch.sharedBytes,
        0,
        false,
        nullptr};
  }

  void push(unsigned i) {
    ready[(readyHead + readyCount) % nThreads] = i;
    ++readyCount;
  }
  unsigned pop() {
    unsigned i = ready[readyHead];
    readyHead = (readyHead + 1) % nThreads;
    --readyCount;
    return i;
  }
  Thread &laneThread(unsigned warp, unsigned lane) {
    return threads[warp * kWarpSize + lane];
  }
  /// Lanes of `warp` that exist (the last warp may be partial).
  unsigned existingLanes(unsigned warp) const {
    unsigned n = std::min(kWarpSize, nThreads - warp * kWarpSize);
    return n == 32 ? ~0u : (1u << n) - 1;
  }

  std::string where(const Thread *t) const {
    std::string s =
        format("%s: block %s", launch->kernel, describe(idx).c_str());
    if (t)
      s += format(", thread %s", describe(t->idx).c_str());
    return s;
  }
  /// Records the block's first error; the scheduler stops the block.
  void setError(const Thread *t, const std::string &message) {
    if (failed)
      return;
    failed = true;
    error = where(t) + ": " + message;
  }

  void run(unsigned long long blockLinear);
  void resume(Thread &t);
  bool resolveStall();
  std::string doing(const Thread &t) const;
  void abortAll();
};

inline const uint3 &currentBlockIdx() { return tls.block->idx; }
inline const dim3 &currentBlockDim() { return tls.block->dim; }
inline const dim3 &currentGridDim() { return tls.block->grid; }

[[noreturn]] inline void fail(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string message = vformat(fmt, args);
  va_end(args);
  if (!tls.block || !tls.thread) {
    std::fprintf(stderr, "moec emu: %s\n", message.c_str());
    std::abort();
  }
  tls.block->setError(tls.thread, message);
  throw AbortBlock{};
}

#ifdef MOEC_EMU_ASAN
inline void startSwitch(void **fakeStack, const void *bottom, size_t bytes) {
  __sanitizer_start_switch_fiber(fakeStack, bottom, bytes);
}
inline void finishSwitch(void *fakeStack, const void **bottom, size_t *bytes) {
  __sanitizer_finish_switch_fiber(fakeStack, bottom, bytes);
}
#else
inline void startSwitch(void **, const void *, size_t) {}
inline void finishSwitch(void *, const void **, size_t *) {}
#endif

/// Suspends the calling thread until the scheduler resumes it.
inline void suspend(Thread &t, Wait wait) {
  t.wait = wait;
  Block &b = *tls.block;
  startSwitch(&t.fakeStack, b.hostStackBottom, b.hostStackBytes);
  t.sink = std::move(t.sink).resume();
  finishSwitch(t.fakeStack, &b.hostStackBottom, &b.hostStackBytes);
  if (b.aborting)
    throw AbortBlock{};
}

inline boost::context::fiber threadMain(Thread &t,
                                        boost::context::fiber &&sink) {
  t.sink = std::move(sink);
  Block &b = *tls.block;
  finishSwitch(nullptr, &b.hostStackBottom, &b.hostStackBytes);
  if (!b.aborting) {
    try {
      b.launch->invoke(b.launch->fn, b.launch->params);
    } catch (const AbortBlock &) {
    } catch (const boost::context::detail::forced_unwind &) {
      throw;
    } catch (const std::exception &e) {
      b.setError(&t, format("uncaught exception: %s", e.what()));
    } catch (...) {
      b.setError(&t, "uncaught exception");
    }
  }
  t.wait = Wait::Done;
  --b.live;
  b.warps[t.warp].exited |= 1u << t.lane;
  startSwitch(nullptr, b.hostStackBottom, b.hostStackBytes);
  return std::move(t.sink);
}

inline void Block::resume(Thread &t) {
  tls.thread = &t;
  if (!t.started) {
    t.started = true;
    Thread *self = &t;
    t.fiber =
        boost::context::fiber(std::allocator_arg, PooledStack{&stacks, &t},
                              [self](boost::context::fiber &&sink) {
                                return threadMain(*self, std::move(sink));
                              });
  }
  t.wait = Wait::Ready;
  void *fakeStack = nullptr;
  startSwitch(&fakeStack, t.stackBottom, t.stackBytes);
  t.fiber = std::move(t.fiber).resume();
  finishSwitch(fakeStack, nullptr, nullptr);
  tls.thread = nullptr;
}

inline void Block::run(unsigned long long blockLinear) {
  linear = blockLinear;
  idx = uint3{static_cast<unsigned>(blockLinear % grid.x),
              static_cast<unsigned>((blockLinear / grid.x) % grid.y),
              static_cast<unsigned>(blockLinear / (1ull * grid.x * grid.y))};
  failed = aborting = false;
  error.clear();
  live = nThreads;
  readyHead = readyCount = 0;
  for (WarpState &w : warps) {
    w.groups.clear();
    w.exited = 0;
  }
  dynamic.serial = ++tls.serial;
  dynamic.escaped = false;
  // Shared memory starts with garbage on a GPU; here with a fixed pattern
  // (NaN as float, -1 as int) so that results never depend on earlier
  // blocks.
  if (dynamic.bytes) {
    std::memset(dynamic.data, 0xff, dynamic.bytes);
    std::memset(dynamic.written, 0, dynamicWritten.size() * sizeof(uint64_t));
  }
  for (unsigned i = 0; i < nThreads; ++i) {
    threads[i].wait = Wait::Ready;
    threads[i].started = false;
    push(i);
  }
  for (;;) {
    while (readyCount && !failed)
      resume(threads[pop()]);
    if (failed || live == 0 || !resolveStall())
      break;
  }
  if (failed)
    abortAll();
}

/// Resumes every suspended thread of a failed block so that it unwinds.
inline void Block::abortAll() {
  aborting = true;
  for (Thread &t : threads)
    if (t.started && t.fiber)
      resume(t);
}

inline std::string Block::doing(const Thread &t) const {
  switch (t.wait) {
  case Wait::Done:
    return "has exited";
  case Wait::Barrier:
    return format("waits at __syncthreads() (%s:%d)", t.barrierFile,
                  t.barrierLine);
  case Wait::Warp:
    return format("waits in %s", t.slot.what);
  case Wait::ActiveMask:
    return "waits in __activemask()";
  case Wait::Ready:
    break;
  }
  return "is runnable";
}

inline bool Block::resolveStall() {
  // __activemask(): the lanes of a warp waiting there converge.
  bool released = false;
  for (unsigned w = 0; w < warps.size(); ++w) {
    unsigned mask = 0;
    for (unsigned l = 0; l < kWarpSize && w * kWarpSize + l < nThreads; ++l)
      if (laneThread(w, l).wait == Wait::ActiveMask)
        mask |= 1u << l;
    for (unsigned l = 0; l < kWarpSize; ++l) {
      if (mask >> l & 1) {
        laneThread(w, l).slot.result = mask;
        laneThread(w, l).wait = Wait::Ready;
        push(w * kWarpSize + l);
        released = true;
      }
    }
  }
  if (released)
    return true;

  // A warp collective still waiting now can never complete.
  for (unsigned w = 0; w < warps.size(); ++w) {
    for (const Group &g : warps[w].groups) {
      unsigned missing = g.mask & ~g.arrived;
      unsigned lane = static_cast<unsigned>(__builtin_ctz(missing));
      unsigned first = static_cast<unsigned>(__builtin_ctz(g.arrived));
      setError(&laneThread(w, first),
               format("%s with mask 0x%08x never completes: lane %u (thread "
                      "%s) %s; every lane in the mask must call it",
                      g.what, g.mask, lane,
                      describe(laneThread(w, lane).idx).c_str(),
                      doing(laneThread(w, lane)).c_str()));
      return false;
    }
  }

  // __syncthreads(): every thread of the block waits at the same one.
  const Thread *first = nullptr;
  const Thread *exited = nullptr;
  unsigned waiting = 0;
  for (const Thread &t : threads) {
    if (t.wait == Wait::Barrier) {
      ++waiting;
      if (!first)
        first = &t;
    } else if (t.wait == Wait::Done && !exited) {
      exited = &t;
    }
  }
  if (!first) {
    setError(nullptr, "internal error: the block stalled with no waiting "
                      "thread");
    return false;
  }
  if (exited) {
    setError(first,
             format("waits at __syncthreads() (%s:%d) but thread %s has "
                    "exited (%u of %u threads wait); every thread of a block "
                    "must reach each barrier",
                    first->barrierFile, first->barrierLine,
                    describe(exited->idx).c_str(), waiting, nThreads));
    return false;
  }
  int count = 0;
  for (const Thread &t : threads) {
    if (t.barrierLine != first->barrierLine ||
        t.barrierKind != first->barrierKind ||
        (t.barrierFile != first->barrierFile &&
         std::strcmp(t.barrierFile, first->barrierFile) != 0)) {
      setError(first,
               format("waits at the barrier at %s:%d while thread %s "
                      "waits at the one at %s:%d; the threads of a "
                      "block must reach the same barrier",
                      first->barrierFile, first->barrierLine,
                      describe(t.idx).c_str(), t.barrierFile, t.barrierLine));
      return false;
    }
    count += t.barrierPred;
  }
  // Kinds: 0 plain, 1 count, 2 and, 3 or.
  int result = first->barrierKind == 1   ? count
               : first->barrierKind == 2 ? count == static_cast<int>(nThreads)
               : first->barrierKind == 3 ? count != 0
                                         : 0;
  for (unsigned i = 0; i < nThreads; ++i) {
    threads[i].barrierResult = result;
    threads[i].wait = Wait::Ready;
    push(i);
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Barriers and warp collectives (called on the fibers)
//===----------------------------------------------------------------------===//

inline int syncThreads(const char *file, int line, int kind, int predicate) {
  Thread &t = *tls.thread;
  t.barrierFile = file;
  t.barrierLine = line;
  t.barrierKind = kind;
  t.barrierPred = predicate != 0;
  suspend(t, Wait::Barrier);
  return t.barrierResult;
}

#ifdef MOEC_EMU_CHECK
constexpr bool kCheck = true;
#else
constexpr bool kCheck = false;
#endif

inline unsigned opKind(unsigned op) { return op & 0xff; }

inline float bitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline uint32_t floatToBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

/// D = C + A * B for one m16n8k16 bf16 or m16n8k8 tf32 tile with the PTX
/// fragment layouts (see runtime/device/mma.cuh), summing in increasing k
/// order in fp32.
inline void completeMma(Block &b, unsigned warp, bool bf16) {
  const int kDepth = bf16 ? 16 : 8;
  float A[16][16], B[16][8], C[16][8];
  auto lo = [](uint32_t r) { return bitsToFloat(r << 16); };
  auto hi = [](uint32_t r) { return bitsToFloat(r & 0xffff0000u); };
  auto tf32 = [](uint32_t r) { return bitsToFloat(r & 0xffffe000u); };
  for (unsigned lane = 0; lane < kWarpSize; ++lane) {
    const LaneSlot &s = b.laneThread(warp, lane).slot;
    int g = static_cast<int>(lane / 4), t = static_cast<int>(lane % 4);
    if (bf16) {
      A[g][2 * t] = lo(s.a[0]);
      A[g][2 * t + 1] = hi(s.a[0]);
      A[g + 8][2 * t] = lo(s.a[1]);
      A[g + 8][2 * t + 1] = hi(s.a[1]);
      A[g][2 * t + 8] = lo(s.a[2]);
      A[g][2 * t + 9] = hi(s.a[2]);
      A[g + 8][2 * t + 8] = lo(s.a[3]);
      A[g + 8][2 * t + 9] = hi(s.a[3]);
      B[2 * t][g] = lo(s.b[0]);
      B[2 * t + 1][g] = hi(s.b[0]);
      B[2 * t + 8][g] = lo(s.b[1]);
      B[2 * t + 9][g] = hi(s.b[1]);
    } else {
      A[g][t] = tf32(s.a[0]);
      A[g + 8][t] = tf32(s.a[1]);
      A[g][t + 4] = tf32(s.a[2]);
      A[g + 8][t + 4] = tf32(s.a[3]);
      B[t][g] = tf32(s.b[0]);
      B[t + 4][g] = tf32(s.b[1]);
    }
    C[g][2 * t] = s.c[0];
    C[g][2 * t + 1] = s.c[1];
    C[g + 8][2 * t] = s.c[2];
    C[g + 8][2 * t + 1] = s.c[3];
  }
  float D[16][8];
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 8; ++j) {
      float acc = C[i][j];
      for (int k = 0; k < kDepth; ++k) {
        // bf16 and tf32 products are exact in fp32: no rounding here.
        float product = A[i][k] * B[k][j];
        acc = acc + product;
      }
      D[i][j] = acc;
    }
  }
  for (unsigned lane = 0; lane < kWarpSize; ++lane) {
    float *d = b.laneThread(warp, lane).slot.d;
    int g = static_cast<int>(lane / 4), t = static_cast<int>(lane % 4);
    d[0] = D[g][2 * t];
    d[1] = D[g][2 * t + 1];
    d[2] = D[g + 8][2 * t];
    d[3] = D[g + 8][2 * t + 1];
  }
}

/// Computes the results of a collective all of whose lanes have arrived.
inline void complete(Block &b, unsigned warp, const Group &g) {
  unsigned mask = g.mask;
  switch (opKind(g.op)) {
  case OpSync:
    return;
  case OpShfl:
    for (unsigned l = 0; l < kWarpSize; ++l) {
      if (!(mask >> l & 1))
        continue;
      LaneSlot &s = b.laneThread(warp, l).slot;
      unsigned src = static_cast<unsigned>(s.src);
      if (mask >> src & 1) {
        s.result = b.laneThread(warp, src).slot.value;
      } else {
        if (kCheck)
          fail("%s with mask 0x%08x: lane %u reads lane %u, which is not in "
               "the mask (its value is undefined on a GPU)",
               g.what, mask, l, src);
        s.result = s.value;
      }
    }
    return;
  case OpMmaBf16:
  case OpMmaTf32:
    completeMma(b, warp, opKind(g.op) == OpMmaBf16);
    return;
  default:
    break;
  }
  // Votes and reductions.
  unsigned votes = 0;
  bool first = true;
  uint32_t acc = 0;
  bool isSigned = (g.op >> 8 & 0xff) != 0;
  for (unsigned l = 0; l < kWarpSize; ++l) {
    if (!(mask >> l & 1))
      continue;
    uint64_t v = b.laneThread(warp, l).slot.value;
    if (v)
      votes |= 1u << l;
    uint32_t x = static_cast<uint32_t>(v);
    if (first) {
      acc = x;
      first = false;
      continue;
    }
    switch (opKind(g.op)) {
    case OpReduceAdd:
      acc += x;
      break;
    case OpReduceMin:
      acc = isSigned ? static_cast<uint32_t>(std::min(static_cast<int32_t>(acc),
                                                      static_cast<int32_t>(x)))
                     : std::min(acc, x);
      break;
    case OpReduceMax:
      acc = isSigned ? static_cast<uint32_t>(std::max(static_cast<int32_t>(acc),
                                                      static_cast<int32_t>(x)))
                     : std::max(acc, x);
      break;
    case OpReduceAnd:
      acc &= x;
      break;
    case OpReduceOr:
      acc |= x;
      break;
    case OpReduceXor:
      acc ^= x;
      break;
    default:
      break;
    }
  }
  uint64_t result;
  switch (opKind(g.op)) {
  case OpBallot:
    result = votes;
    break;
  case OpAny:
    result = votes != 0;
    break;
  case OpAll:
    result = votes == mask;
    break;
  default:
    result = acc;
    break;
  }
  for (unsigned l = 0; l < kWarpSize; ++l)
    if (mask >> l & 1)
      b.laneThread(warp, l).slot.result = result;
}

/// Joins the calling lane to the collective of its warp with this mask;
/// returns when every lane of the mask has arrived (the last one to arrive
/// computes the results for all). Lanes that meet with the same mask must
/// call the same operation (shfl.sync and friends need the same qualifiers;
/// __syncwarp calls at different sites do meet, as on sm_70+).
inline void collective(unsigned mask, unsigned op, const char *what) {
  Thread &t = *tls.thread;
  Block &b = *tls.block;
  t.slot.op = op;
  t.slot.what = what;
  if (!(mask >> t.lane & 1))
    fail("%s with mask 0x%08x: the calling lane %u is not in the mask", what,
         mask, t.lane);
  unsigned absent = mask & ~b.existingLanes(t.warp);
  if (absent)
    fail("%s with mask 0x%08x: lane %d is not part of the block (%u "
         "threads); every lane in the mask must call it",
         what, mask, __builtin_ctz(absent), b.nThreads);
  WarpState &warp = b.warps[t.warp];
  if (unsigned exited = mask & warp.exited) {
    unsigned l = static_cast<unsigned>(__builtin_ctz(exited));
    fail("%s with mask 0x%08x: lane %u (thread %s) has exited; every lane "
         "in the mask must call it",
         what, mask, l, describe(b.laneThread(t.warp, l).idx).c_str());
  }
  // Collectives with other masks may be pending (divergent code); lanes
  // they share with this one arrive here after those complete, and what
  // never completes is reported when the block stalls.
  std::vector<Group> &groups = warp.groups;
  Group *group = nullptr;
  for (Group &g : groups)
    if (g.mask == mask)
      group = &g;
  if (!group) {
    groups.push_back(Group{mask, 0, op, what});
    group = &groups.back();
  } else if (group->op != op) {
    fail("%s while lane %d waits in %s with the same mask 0x%08x; the lanes "
         "of a collective must call the same operation on the same type",
         what, __builtin_ctz(group->arrived), group->what, mask);
  }
  group->arrived |= 1u << t.lane;
  if (group->arrived != mask) {
    suspend(t, Wait::Warp);
    return;
  }
  Group done = *group;
  groups.erase(groups.begin() + (group - groups.data()));
  complete(b, t.warp, done);
  for (unsigned l = 0; l < kWarpSize; ++l) {
    if ((mask >> l & 1) && l != t.lane) {
      b.laneThread(t.warp, l).wait = Wait::Ready;
      b.push(t.warp * kWarpSize + l);
    }
  }
}

/// Shuffle modes, as in PTX shfl.sync.
enum ShflMode : unsigned { ShflIdx, ShflUp, ShflDown, ShflXor };

template <typename T>
inline T shuffle(unsigned mask, T var, unsigned mode, int b, int width,
                 const char *what) {
  static_assert(sizeof(T) <= 8, "shuffles move at most 64 bits");
  Thread &t = *tls.thread;
  if (kCheck && (width < 1 || width > 32 || (width & (width - 1))))
    fail("%s: width %d is not a power of two in [1, 32]", what, width);
  // PTX: c = ((32 - width) << 8) | (up ? 0 : 0x1f).
  int lane = static_cast<int>(t.lane);
  int bval = b & 31;
  int segmask = (32 - width) & 31;
  int cval = mode == ShflUp ? 0 : 0x1f;
  int maxLane = (lane & segmask) | (cval & ~segmask);
  int minLane = lane & segmask;
  int j;
  bool inRange;
  switch (mode) {
  case ShflUp:
    j = lane - bval;
    inRange = j >= maxLane;
    break;
  case ShflDown:
    j = lane + bval;
    inRange = j <= maxLane;
    break;
  case ShflXor:
    j = lane ^ bval;
    inRange = j <= maxLane;
    break;
  default:
    j = minLane | (bval & ~segmask & 31);
    inRange = j <= maxLane;
    break;
  }
  if (!inRange)
    j = lane;
  uint64_t bits = 0;
  std::memcpy(&bits, &var, sizeof(T));
  t.slot.value = bits;
  t.slot.src = j;
  collective(mask, OpShfl | mode << 8 | sizeof(T) << 16, what);
  T result;
  bits = t.slot.result;
  std::memcpy(&result, &bits, sizeof(T));
  return result;
}

inline uint32_t vote(unsigned mask, int predicate, unsigned op,
                     const char *what) {
  Thread &t = *tls.thread;
  t.slot.value = predicate != 0;
  collective(mask, op, what);
  return static_cast<uint32_t>(t.slot.result);
}

inline uint32_t reduce(unsigned mask, uint32_t value, unsigned op,
                       bool isSigned, const char *what) {
  Thread &t = *tls.thread;
  t.slot.value = value;
  collective(mask, op | (isSigned ? 1u << 8 : 0u), what);
  return static_cast<uint32_t>(t.slot.result);
}

inline void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                const float (&c)[4], unsigned op, const char *what) {
  Thread &t = *tls.thread;
  t.slot.a = a;
  t.slot.b = b;
  t.slot.c = c;
  t.slot.d = d;
  collective(~0u, op, what);
}

inline unsigned activeMask() {
  Thread &t = *tls.thread;
  suspend(t, Wait::ActiveMask);
  return static_cast<unsigned>(t.slot.result);
}

} // namespace detail

/// Warp-collective m16n8k16 bf16 mma with the PTX fragment layout.
inline void mmaM16N8K16Bf16(float (&d)[4], const uint32_t (&a)[4],
                            const uint32_t (&b)[2], const float (&c)[4]) {
  detail::mma(d, a, b, c, detail::OpMmaBf16, "mma.m16n8k16.bf16");
}

/// Warp-collective m16n8k8 tf32 mma with the PTX fragment layout.
inline void mmaM16N8K8Tf32(float (&d)[4], const uint32_t (&a)[4],
                           const uint32_t (&b)[2], const float (&c)[4]) {
  detail::mma(d, a, b, c, detail::OpMmaTf32, "mma.m16n8k8.tf32");
}

} // namespace moec_emu

//===----------------------------------------------------------------------===//
// CUDA synchronization and warp intrinsics
//===----------------------------------------------------------------------===//

#define __syncthreads()                                                        \
  ::moec_emu::detail::syncThreads(__FILE__, __LINE__, 0, 0)
#define __syncthreads_count(p)                                                 \
  ::moec_emu::detail::syncThreads(__FILE__, __LINE__, 1, (p))
#define __syncthreads_and(p)                                                   \
  ::moec_emu::detail::syncThreads(__FILE__, __LINE__, 2, (p))
#define __syncthreads_or(p)                                                    \
  ::moec_emu::detail::syncThreads(__FILE__, __LINE__, 3, (p))

inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::moec_emu::detail::collective(mask, ::moec_emu::detail::OpSync,
                                 "__syncwarp");
}
inline unsigned __activemask() { return ::moec_emu::detail::activeMask(); }
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return ::moec_emu::detail::vote(mask, predicate, ::moec_emu::detail::OpBallot,
                                  "__ballot_sync");
}
inline int __any_sync(unsigned mask, int predicate) {
  return static_cast<int>(::moec_emu::detail::vote(
      mask, predicate, ::moec_emu::detail::OpAny, "__any_sync"));
}
inline int __all_sync(unsigned mask, int predicate) {
  return static_cast<int>(::moec_emu::detail::vote(
      mask, predicate, ::moec_emu::detail::OpAll, "__all_sync"));
}

#define MOEC_EMU_REDUCE_SYNC(name, op)                                         \
  inline unsigned name(unsigned mask, unsigned value) {                        \
    return ::moec_emu::detail::reduce(mask, value, ::moec_emu::detail::op,     \
                                      false, #name);                           \
  }                                                                            \
  inline int name(unsigned mask, int value) {                                  \
    return static_cast<int>(                                                   \
        ::moec_emu::detail::reduce(mask, static_cast<uint32_t>(value),         \
                                   ::moec_emu::detail::op, true, #name));      \
  }
MOEC_EMU_REDUCE_SYNC(__reduce_add_sync, OpReduceAdd)
MOEC_EMU_REDUCE_SYNC(__reduce_min_sync, OpReduceMin)
MOEC_EMU_REDUCE_SYNC(__reduce_max_sync, OpReduceMax)
#undef MOEC_EMU_REDUCE_SYNC
inline unsigned __reduce_and_sync(unsigned mask, unsigned value) {
  return ::moec_emu::detail::reduce(
      mask, value, ::moec_emu::detail::OpReduceAnd, false, "__reduce_and_sync");
}
inline unsigned __reduce_or_sync(unsigned mask, unsigned value) {
  return ::moec_emu::detail::reduce(mask, value, ::moec_emu::detail::OpReduceOr,
                                    false, "__reduce_or_sync");
}
inline unsigned __reduce_xor_sync(unsigned mask, unsigned value) {
  return ::moec_emu::detail::reduce(
      mask, value, ::moec_emu::detail::OpReduceXor, false, "__reduce_xor_sync");
}

// The shuffles, for every type CUDA has them for (long and unsigned long
// too: they are int64_t and uint64_t on the host).
#define MOEC_EMU_SHUFFLES(T)                                                   \
  inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32) {    \
    return ::moec_emu::detail::shuffle<T>(mask, var,                           \
                                          ::moec_emu::detail::ShflIdx,         \
                                          srcLane, width, "__shfl_sync");      \
  }                                                                            \
  inline T __shfl_up_sync(unsigned mask, T var, unsigned delta,                \
                          int width = 32) {                                    \
    return ::moec_emu::detail::shuffle<T>(                                     \
        mask, var, ::moec_emu::detail::ShflUp, static_cast<int>(delta), width, \
        "__shfl_up_sync");                                                     \
  }                                                                            \
  inline T __shfl_down_sync(unsigned mask, T var, unsigned delta,              \
                            int width = 32) {                                  \
    return ::moec_emu::detail::shuffle<T>(                                     \
        mask, var, ::moec_emu::detail::ShflDown, static_cast<int>(delta),      \
        width, "__shfl_down_sync");                                            \
  }                                                                            \
  inline T __shfl_xor_sync(unsigned mask, T var, int laneMask,                 \
                           int width = 32) {                                   \
    return ::moec_emu::detail::shuffle<T>(mask, var,                           \
                                          ::moec_emu::detail::ShflXor,         \
                                          laneMask, width, "__shfl_xor_sync"); \
  }
MOEC_EMU_SHUFFLES(int)
MOEC_EMU_SHUFFLES(unsigned)
MOEC_EMU_SHUFFLES(long)
MOEC_EMU_SHUFFLES(unsigned long)
MOEC_EMU_SHUFFLES(long long)
MOEC_EMU_SHUFFLES(unsigned long long)
MOEC_EMU_SHUFFLES(float)
MOEC_EMU_SHUFFLES(double)
#undef MOEC_EMU_SHUFFLES

/// Memory fences: blocks on other host threads see earlier writes first.
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/// A device-side trap stops the launch with an error.
#define __trap()                                                               \
  ::moec_emu::detail::fail("__trap() called at %s:%d", __FILE__, __LINE__)

//===----------------------------------------------------------------------===//
// Shared memory
//===----------------------------------------------------------------------===//

namespace moec_emu {
namespace detail {

/// The dynamic shared memory of the running block.
inline SharedRegion &dynamicRegion() { return tls.block->dynamic; }

} // namespace detail
} // namespace moec_emu

#ifndef MOEC_EMU_TRACK_SHARED

namespace moec_emu {
namespace detail {
/// Fills a static shared array with the garbage pattern when the first
/// thread of a new block reaches its declaration, so that what a kernel
/// reads before writing never depends on earlier blocks or launches.
inline bool freshen(void *data, size_t bytes, unsigned long long &serial) {
  if (serial != tls.serial) {
    serial = tls.serial;
    std::memset(data, 0xff, bytes);
  }
  return true;
}
} // namespace detail
} // namespace moec_emu

// All fibers of a block run on one host thread, so a thread_local array is
// the block's own.
#define MOEC_SHARED(type, name, count)                                         \
  alignas(16) static thread_local type name[count];                            \
  static thread_local unsigned long long moec_shared_serial_##name;            \
  [[maybe_unused]] const bool moec_shared_fresh_##name =                       \
      ::moec_emu::detail::freshen(name, sizeof(name),                          \
                                  moec_shared_serial_##name)
#define MOEC_DYNAMIC_SHARED(type, name)                                        \
  type *name =                                                                 \
      reinterpret_cast<type *>(::moec_emu::detail::dynamicRegion().data)

#else // MOEC_EMU_TRACK_SHARED

namespace moec_emu {

template <typename T> class SharedPtr;
template <typename T> class SharedRef;

namespace detail {

inline std::string regionName(const SharedRegion &r) {
  return r.name ? format("shared array '%s'", r.name)
                : std::string("dynamic shared memory");
}

/// Forgets what an earlier block wrote to `r` (contents become garbage).
inline void refresh(SharedRegion &r) {
  if (r.serial == tls.serial)
    return;
  r.serial = tls.serial;
  r.escaped = false;
  std::memset(r.written, 0, (r.bytes + 63) / 64 * sizeof(uint64_t));
  std::memset(r.data, 0xff, r.bytes);
}

/// Checks one access of `size` bytes at byte `offset` of `r`; a read also
/// needs every byte written by some thread of the block since it started.
inline void sharedAccess(SharedRegion *r, ptrdiff_t offset, size_t size,
                         size_t align, bool read, bool write) {
  if (!r)
    fail("access through a null shared-memory pointer");
  refresh(*r);
  if (offset < 0 || static_cast<size_t>(offset) + size > r->bytes)
    fail("out-of-bounds access to %s: byte offset %td, %zu bytes, but it has "
         "%zu bytes",
         regionName(*r).c_str(), offset, size, r->bytes);
  if (static_cast<size_t>(offset) % align)
    fail("misaligned access to %s: byte offset %td for a %zu-byte aligned "
         "type",
         regionName(*r).c_str(), offset, align);
  if (r->escaped)
    return;
  size_t begin = static_cast<size_t>(offset), end = begin + size;
  if (read)
    for (size_t i = begin; i < end; ++i)
      if (!(r->written[i / 64] >> (i % 64) & 1))
        fail("read of uninitialized shared memory: %s, byte offset %zu "
             "(element at byte %td, %zu bytes) has not been written by any "
             "thread of this block",
             regionName(*r).c_str(), i, offset, size);
  if (write)
    for (size_t i = begin; i < end; ++i)
      r->written[i / 64] |= uint64_t(1) << (i % 64);
}

/// Per-field proxies for CUDA vector types (s[i].x = ...); none by default.
template <typename T> struct SharedFields {
  SharedFields(SharedRegion *, ptrdiff_t) {}
};

/// The value of an operand of a compound assignment (a proxy is loaded).
template <typename U> const U &operandValue(const U &u) { return u; }
template <typename U> std::remove_cv_t<U> operandValue(const SharedRef<U> &r) {
  return r.load();
}

} // namespace detail

/// A reference to an element of tracked shared memory. Every member works
/// only on a temporary (s[i] = v, float x = s[i], s[i] += v): a named proxy
/// (`auto v = s[i];`) would alias the memory instead of copying, so it does
/// not compile; spell the element type instead.
template <typename T> class SharedRef : public detail::SharedFields<T> {
  using V = std::remove_cv_t<T>;

public:
  SharedRef(detail::SharedRegion *r, ptrdiff_t offset)
      : detail::SharedFields<T>(r, offset), r(r), offset(offset) {}

  V load() const {
    detail::sharedAccess(r, offset, sizeof(V), alignof(V), true, false);
    V v;
    std::memcpy(static_cast<void *>(&v), r->data + offset, sizeof(V));
    return v;
  }
  void store(const V &v) const {
    static_assert(!std::is_const<T>::value, "store through a const element");
    detail::sharedAccess(r, offset, sizeof(V), alignof(V), false, true);
    std::memcpy(static_cast<void *>(r->data + offset), &v, sizeof(V));
  }

  operator V() const && { return load(); }
  /// Class elements (a bf16) convert on to what they convert to.
  template <typename U, std::enable_if_t<std::is_class<V>::value &&
                                             std::is_arithmetic<U>::value &&
                                             std::is_convertible<V, U>::value,
                                         int> = 0>
  operator U() const && {
    return static_cast<U>(load());
  }

  V operator=(const V &v) && {
    store(v);
    return v;
  }
  V operator=(const SharedRef &other) && {
    V v = other.load();
    store(v);
    return v;
  }
  template <typename U> V operator=(const SharedRef<U> &other) && {
    V v = static_cast<V>(other.load());
    store(v);
    return v;
  }

#define MOEC_EMU_COMPOUND(op)                                                  \
  template <typename U> V operator op(const U &u) && {                         \
    V v = load();                                                              \
    v op detail::operandValue(u);                                              \
    store(v);                                                                  \
    return v;                                                                  \
  }
  MOEC_EMU_COMPOUND(+=)
  MOEC_EMU_COMPOUND(-=)
  MOEC_EMU_COMPOUND(*=)
  MOEC_EMU_COMPOUND(/=)
  MOEC_EMU_COMPOUND(%=)
  MOEC_EMU_COMPOUND(&=)
  MOEC_EMU_COMPOUND(|=)
  MOEC_EMU_COMPOUND(^=)
  MOEC_EMU_COMPOUND(<<=)
  MOEC_EMU_COMPOUND(>>=)
#undef MOEC_EMU_COMPOUND

  V operator++() && {
    V v = load();
    ++v;
    store(v);
    return v;
  }
  V operator--() && {
    V v = load();
    --v;
    store(v);
    return v;
  }
  V operator++(int) && {
    V v = load();
    V next = v;
    ++next;
    store(next);
    return v;
  }
  V operator--(int) && {
    V v = load();
    V next = v;
    --next;
    store(next);
    return v;
  }

  SharedPtr<T> operator&() const { return SharedPtr<T>(r, offset); }

private:
  template <typename U> friend class SharedRef;
  detail::SharedRegion *r;
  ptrdiff_t offset;
};

/// A pointer into tracked shared memory (moec::sptr<T> in check mode):
/// checked on every access. Turning it into a raw pointer (passing it where
/// a T* is expected) stops checking its array for the rest of the block,
/// since writes through a raw pointer cannot be seen.
template <typename T> class SharedPtr {
public:
  SharedPtr() = default;
  SharedPtr(std::nullptr_t) {}
  SharedPtr(detail::SharedRegion *r, ptrdiff_t offset) : r(r), offset(offset) {}
  template <typename U, std::enable_if_t<std::is_convertible<U *, T *>::value &&
                                             sizeof(U) == sizeof(T),
                                         int> = 0>
  SharedPtr(const SharedPtr<U> &other) : r(other.r), offset(other.offset) {}

  SharedRef<T> operator*() const { return SharedRef<T>(r, offset); }
  template <typename I, detail::EnableIfIndex<I> = 0>
  SharedRef<T> operator[](I i) const {
    return SharedRef<T>(r, offset + static_cast<ptrdiff_t>(i) *
                                        static_cast<ptrdiff_t>(sizeof(T)));
  }
  T *operator->() const { return escape(); }
  operator T *() const { return escape(); }
  explicit operator bool() const { return r != nullptr; }

  template <typename I, detail::EnableIfIndex<I> = 0>
  SharedPtr operator+(I i) const {
    return SharedPtr(r, offset + static_cast<ptrdiff_t>(i) *
                                     static_cast<ptrdiff_t>(sizeof(T)));
  }
  template <typename I, detail::EnableIfIndex<I> = 0>
  friend SharedPtr operator+(I i, const SharedPtr &p) {
    return p + i;
  }
  template <typename I, detail::EnableIfIndex<I> = 0>
  SharedPtr operator-(I i) const {
    return *this + (-static_cast<ptrdiff_t>(i));
  }
  ptrdiff_t operator-(const SharedPtr &other) const {
    return (offset - other.offset) / static_cast<ptrdiff_t>(sizeof(T));
  }
  template <typename I, detail::EnableIfIndex<I> = 0>
  SharedPtr &operator+=(I i) {
    return *this = *this + i;
  }
  template <typename I, detail::EnableIfIndex<I> = 0>
  SharedPtr &operator-=(I i) {
    return *this = *this - i;
  }
  SharedPtr &operator++() { return *this += 1; }
  SharedPtr &operator--() { return *this -= 1; }
  SharedPtr operator++(int) {
    SharedPtr old = *this;
    *this += 1;
    return old;
  }
  SharedPtr operator--(int) {
    SharedPtr old = *this;
    *this -= 1;
    return old;
  }
  bool operator==(const SharedPtr &o) const {
    return r == o.r && offset == o.offset;
  }
  bool operator!=(const SharedPtr &o) const { return !(*this == o); }
  bool operator<(const SharedPtr &o) const { return offset < o.offset; }
  bool operator<=(const SharedPtr &o) const { return offset <= o.offset; }
  bool operator>(const SharedPtr &o) const { return offset > o.offset; }
  bool operator>=(const SharedPtr &o) const { return offset >= o.offset; }

  /// The checked element address for atomics (they read and write).
  T *atomicTarget() const {
    detail::sharedAccess(r, offset, sizeof(T), alignof(T), true, true);
    return reinterpret_cast<T *>(r->data + offset);
  }

private:
  template <typename U> friend class SharedPtr;
  T *escape() const {
    if (!r)
      return nullptr;
    detail::refresh(*r);
    r->escaped = true;
    return reinterpret_cast<T *>(r->data + offset);
  }
  detail::SharedRegion *r = nullptr;
  ptrdiff_t offset = 0;
};

namespace detail {

/// Field proxies of CUDA vector types.
#define MOEC_EMU_FIELDS2(V, E)                                                 \
  template <> struct SharedFields<V> {                                         \
    SharedRef<E> x, y;                                                         \
    SharedFields(SharedRegion *r, ptrdiff_t o)                                 \
        : x(r, o), y(r, o + ptrdiff_t(sizeof(E))) {}                           \
  };
#define MOEC_EMU_FIELDS4(V, E)                                                 \
  template <> struct SharedFields<V> {                                         \
    SharedRef<E> x, y, z, w;                                                   \
    SharedFields(SharedRegion *r, ptrdiff_t o)                                 \
        : x(r, o), y(r, o + ptrdiff_t(sizeof(E))),                             \
          z(r, o + 2 * ptrdiff_t(sizeof(E))),                                  \
          w(r, o + 3 * ptrdiff_t(sizeof(E))) {}                                \
  };
MOEC_EMU_FIELDS2(float2, float)
MOEC_EMU_FIELDS4(float4, float)
MOEC_EMU_FIELDS2(int2, int)
MOEC_EMU_FIELDS4(int4, int)
MOEC_EMU_FIELDS2(uint2, unsigned)
MOEC_EMU_FIELDS4(uint4, unsigned)
MOEC_EMU_FIELDS2(double2, double)
#undef MOEC_EMU_FIELDS2
#undef MOEC_EMU_FIELDS4

/// A static shared array (MOEC_SHARED) with its written bits. It is a
/// SharedPtr to its own storage, so it converts to moec::sptr<T> even where
/// T is deduced; it resets itself the first time a new block touches it.
template <typename T, size_t N, typename Tag>
class SharedArray : public SharedPtr<T> {
  static_assert(std::is_trivially_copyable<T>::value,
                "shared-memory elements must be trivially copyable");
  static constexpr size_t kBytes = N * sizeof(T);

public:
  SharedArray()
      : SharedPtr<T>(&region, 0), region{storage, written, kBytes,
                                         0,       false,   Tag::str()} {}
  SharedArray(const SharedArray &) = delete;
  SharedArray &operator=(const SharedArray &) = delete;

private:
  SharedRegion region;
  uint64_t written[(kBytes + 63) / 64];
  alignas(16) unsigned char storage[kBytes];
};

} // namespace detail
} // namespace moec_emu

#define MOEC_SHARED(type, name, count)                                         \
  struct moec_shared_tag_##name {                                              \
    static constexpr const char *str() { return #name; }                       \
  };                                                                           \
  static thread_local ::moec_emu::detail::SharedArray<type, (count),           \
                                                      moec_shared_tag_##name>  \
      name
#define MOEC_DYNAMIC_SHARED(type, name)                                        \
  ::moec_emu::SharedPtr<type> name(&::moec_emu::detail::dynamicRegion(), 0)

#endif // MOEC_EMU_TRACK_SHARED

namespace moec {
/// A pointer to shared memory, for device functions that take a shared
/// array: T* on the GPU and in emu, a checked pointer when emu tracks
/// shared memory.
#ifdef MOEC_EMU_TRACK_SHARED
template <typename T> using sptr = ::moec_emu::SharedPtr<T>;
#else
template <typename T> using sptr = T *;
#endif
} // namespace moec

//===----------------------------------------------------------------------===//
// Global memory: moec::gptr and bufferArg
//===----------------------------------------------------------------------===//

namespace moec {

#ifndef MOEC_EMU_CHECK

/// A pointer to global memory.
template <typename T> using gptr = T *;

/// Buffer `i` of the launch as a typed pointer.
template <typename T, typename Params>
inline gptr<T> bufferArg(const Params &p, int i) {
  return static_cast<T *>(p.buffers[i]);
}

#else // MOEC_EMU_CHECK

/// A pointer to global memory that knows the buffer it points into and
/// checks every access against it (null, bounds, alignment). Arithmetic is
/// unchecked, as pointers one past the end are common. Built from a raw
/// pointer it checks nothing but null; it converts to a raw pointer.
template <typename T> class gptr {
public:
  gptr() = default;
  gptr(T *p) : p(p) {}
  gptr(T *p, const ::moec_emu::detail::BufferInfo *buffer)
      : p(p), buffer(buffer) {}
  template <typename U,
            std::enable_if_t<std::is_convertible<U *, T *>::value, int> = 0>
  gptr(const gptr<U> &other) : p(other.p), buffer(other.buffer) {}

  operator T *() const { return p; }
  T &operator*() const { return *check(0); }
  T *operator->() const { return check(0); }
  template <typename I, ::moec_emu::detail::EnableIfIndex<I> = 0>
  T &operator[](I i) const {
    return *check(static_cast<ptrdiff_t>(i));
  }

  template <typename I, ::moec_emu::detail::EnableIfIndex<I> = 0>
  gptr operator+(I i) const {
    return gptr(p + i, buffer);
  }
  template <typename I, ::moec_emu::detail::EnableIfIndex<I> = 0>
  friend gptr operator+(I i, const gptr &g) {
    return g + i;
  }
  template <typename I, ::moec_emu::detail::EnableIfIndex<I> = 0>
  gptr operator-(I i) const {
    return gptr(p - i, buffer);
  }
  ptrdiff_t operator-(const gptr &other) const { return p - other.p; }
  template <typename I, ::moec_emu::detail::EnableIfIndex<I> = 0>
  gptr &operator+=(I i) {
    p += i;
    return *this;
  }
  template <typename I, ::moec_emu::detail::EnableIfIndex<I> = 0>
  gptr &operator-=(I i) {
    p -= i;
    return *this;
  }
  gptr &operator++() {
    ++p;
    return *this;
  }
  gptr &operator--() {
    --p;
    return *this;
  }
  gptr operator++(int) {
    gptr old = *this;
    ++p;
    return old;
  }
  gptr operator--(int) {
    gptr old = *this;
    --p;
    return old;
  }
  bool operator==(const gptr &o) const { return p == o.p; }
  bool operator!=(const gptr &o) const { return p != o.p; }
  bool operator<(const gptr &o) const { return p < o.p; }
  bool operator<=(const gptr &o) const { return p <= o.p; }
  bool operator>(const gptr &o) const { return p > o.p; }
  bool operator>=(const gptr &o) const { return p >= o.p; }
  bool operator==(std::nullptr_t) const { return p == nullptr; }
  bool operator!=(std::nullptr_t) const { return p != nullptr; }

  /// The address of element `i` after checking an access to it.
  T *check(ptrdiff_t i) const;

private:
  template <typename U> friend class gptr;
  T *p = nullptr;
  const ::moec_emu::detail::BufferInfo *buffer = nullptr;
};

#endif // MOEC_EMU_CHECK

} // namespace moec

#ifdef MOEC_EMU_CHECK
namespace moec_emu {
namespace detail {

template <typename T> const char *typeName() {
  if (std::is_same<std::remove_cv_t<T>, float>::value)
    return "float";
  if (std::is_same<std::remove_cv_t<T>, double>::value)
    return "double";
  if (std::is_same<std::remove_cv_t<T>, int>::value)
    return "int";
  if (std::is_same<std::remove_cv_t<T>, unsigned>::value)
    return "unsigned";
  return "element";
}

} // namespace detail
} // namespace moec_emu

template <typename T> T *moec::gptr<T>::check(ptrdiff_t i) const {
  using namespace ::moec_emu::detail;
  T *q = p + i;
  if (!p) {
    if (buffer)
      fail("access to buffer %d, which is null (the launch passes no buffer "
           "there)",
           buffer->index);
    fail("access through a null global pointer");
  }
  if (buffer && buffer->bytes) {
    ptrdiff_t offset =
        reinterpret_cast<const unsigned char *>(q) - buffer->base;
    if (offset < 0 ||
        static_cast<unsigned long long>(offset) + sizeof(T) > buffer->bytes)
      fail("out-of-bounds access to buffer %d: byte offset %td (%zu-byte %s "
           "at index %td from the buffer start), but the buffer has %llu "
           "bytes",
           buffer->index, offset, sizeof(T), typeName<T>(),
           offset / static_cast<ptrdiff_t>(sizeof(T)), buffer->bytes);
  }
  if (reinterpret_cast<uintptr_t>(q) % alignof(T))
    fail("misaligned access to global memory%s: address %p for a %zu-byte "
         "aligned type",
         buffer ? format(" (buffer %d)", buffer->index).c_str() : "",
         static_cast<const void *>(q), alignof(T));
  return q;
}

namespace moec {

/// Buffer `i` of the launch as a bounds-checked pointer.
template <typename T, typename Params>
inline gptr<T> bufferArg(const Params &p, int i) {
  using namespace ::moec_emu::detail;
  if (i < 0 || i >= static_cast<int>(kMaxBuffers))
    fail("bufferArg(%d): there are %u buffer slots", i, kMaxBuffers);
  return gptr<T>(static_cast<T *>(p.buffers[i]),
                 &tls.block->launch->buffers[i]);
}

} // namespace moec
#endif // MOEC_EMU_CHECK

//===----------------------------------------------------------------------===//
// Atomics and __ldg
//===----------------------------------------------------------------------===//

// Blocks may run on parallel host threads, so these are real atomics.
#define MOEC_EMU_ATOMIC(T, name, builtin)                                      \
  inline T name(T *address, T value) {                                         \
    return builtin(address, value, __ATOMIC_SEQ_CST);                          \
  }
#define MOEC_EMU_ATOMIC_INT(T)                                                 \
  MOEC_EMU_ATOMIC(T, atomicAdd, __atomic_fetch_add)                            \
  MOEC_EMU_ATOMIC(T, atomicSub, __atomic_fetch_sub)                            \
  MOEC_EMU_ATOMIC(T, atomicAnd, __atomic_fetch_and)                            \
  MOEC_EMU_ATOMIC(T, atomicOr, __atomic_fetch_or)                              \
  MOEC_EMU_ATOMIC(T, atomicXor, __atomic_fetch_xor)                            \
  MOEC_EMU_ATOMIC(T, atomicExch, __atomic_exchange_n)                          \
  inline T atomicMax(T *address, T value) {                                    \
    T old = __atomic_load_n(address, __ATOMIC_SEQ_CST);                        \
    while (old < value &&                                                      \
           !__atomic_compare_exchange_n(address, &old, value, false,           \
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) { \
    }                                                                          \
    return old;                                                                \
  }                                                                            \
  inline T atomicMin(T *address, T value) {                                    \
    T old = __atomic_load_n(address, __ATOMIC_SEQ_CST);                        \
    while (old > value &&                                                      \
           !__atomic_compare_exchange_n(address, &old, value, false,           \
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) { \
    }                                                                          \
    return old;                                                                \
  }                                                                            \
  inline T atomicCAS(T *address, T compare, T value) {                         \
    __atomic_compare_exchange_n(address, &compare, value, false,               \
                                __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);           \
    return compare;                                                            \
  }
MOEC_EMU_ATOMIC_INT(int)
MOEC_EMU_ATOMIC_INT(unsigned)
MOEC_EMU_ATOMIC_INT(long)
MOEC_EMU_ATOMIC_INT(unsigned long)
MOEC_EMU_ATOMIC_INT(long long)
MOEC_EMU_ATOMIC_INT(unsigned long long)
#undef MOEC_EMU_ATOMIC_INT
#undef MOEC_EMU_ATOMIC

namespace moec_emu {
namespace detail {
/// Applies `f` to a float or double with a compare-and-swap loop on its bits.
template <typename F, typename Bits, typename Fn>
inline F atomicFloat(F *address, Fn f) {
  static_assert(sizeof(F) == sizeof(Bits), "bits of the same size");
  Bits *bits = reinterpret_cast<Bits *>(address);
  Bits old = __atomic_load_n(bits, __ATOMIC_SEQ_CST);
  for (;;) {
    F oldValue, newValue;
    std::memcpy(&oldValue, &old, sizeof(F));
    newValue = f(oldValue);
    Bits desired;
    std::memcpy(&desired, &newValue, sizeof(F));
    if (__atomic_compare_exchange_n(bits, &old, desired, false,
                                    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
      return oldValue;
  }
}
} // namespace detail
} // namespace moec_emu

inline float atomicAdd(float *address, float value) {
  return ::moec_emu::detail::atomicFloat<float, uint32_t>(
      address, [value](float old) { return old + value; });
}
inline double atomicAdd(double *address, double value) {
  return ::moec_emu::detail::atomicFloat<double, uint64_t>(
      address, [value](double old) { return old + value; });
}
inline float atomicExch(float *address, float value) {
  return ::moec_emu::detail::atomicFloat<float, uint32_t>(
      address, [value](float) { return value; });
}
inline unsigned atomicInc(unsigned *address, unsigned limit) {
  unsigned old = __atomic_load_n(address, __ATOMIC_SEQ_CST);
  while (!__atomic_compare_exchange_n(address, &old,
                                      old >= limit ? 0u : old + 1u, false,
                                      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}
inline unsigned atomicDec(unsigned *address, unsigned limit) {
  unsigned old = __atomic_load_n(address, __ATOMIC_SEQ_CST);
  while (!__atomic_compare_exchange_n(
      address, &old, (old == 0 || old > limit) ? limit : old - 1u, false,
      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}

/// Read-only cached load: a plain load on the host.
template <typename T> inline T __ldg(const T *address) { return *address; }

// Checked forms: the atomics on a checked pointer check the element (an
// atomic reads it, so shared memory must have been written) and then run
// the plain atomic on it.
#define MOEC_EMU_CHECKED_ATOMICS(Ptr, target)                                  \
  MOEC_EMU_CHECKED_ATOMIC(atomicAdd, Ptr, target)                              \
  MOEC_EMU_CHECKED_ATOMIC(atomicSub, Ptr, target)                              \
  MOEC_EMU_CHECKED_ATOMIC(atomicAnd, Ptr, target)                              \
  MOEC_EMU_CHECKED_ATOMIC(atomicOr, Ptr, target)                               \
  MOEC_EMU_CHECKED_ATOMIC(atomicXor, Ptr, target)                              \
  MOEC_EMU_CHECKED_ATOMIC(atomicExch, Ptr, target)                             \
  MOEC_EMU_CHECKED_ATOMIC(atomicMax, Ptr, target)                              \
  MOEC_EMU_CHECKED_ATOMIC(atomicMin, Ptr, target)                              \
  MOEC_EMU_CHECKED_ATOMIC(atomicInc, Ptr, target)                              \
  MOEC_EMU_CHECKED_ATOMIC(atomicDec, Ptr, target)                              \
  template <typename T, typename U, typename W>                                \
  inline auto atomicCAS(Ptr<T> address, U compare, W value)                    \
      ->decltype(atomicCAS(static_cast<T *>(nullptr), compare, value)) {       \
    return atomicCAS(address.target, compare, value);                          \
  }
#define MOEC_EMU_CHECKED_ATOMIC(name, Ptr, target)                             \
  template <typename T, typename U>                                            \
  inline auto name(Ptr<T> address, U value)                                    \
      ->decltype(name(static_cast<T *>(nullptr), value)) {                     \
    return name(address.target, value);                                        \
  }
#ifdef MOEC_EMU_CHECK
MOEC_EMU_CHECKED_ATOMICS(::moec::gptr, check(0))
template <typename T>
inline std::remove_cv_t<T> __ldg(::moec::gptr<T> address) {
  return *address;
}
#endif
#ifdef MOEC_EMU_TRACK_SHARED
MOEC_EMU_CHECKED_ATOMICS(::moec_emu::SharedPtr, atomicTarget())
#endif
#undef MOEC_EMU_CHECKED_ATOMIC
#undef MOEC_EMU_CHECKED_ATOMICS

//===----------------------------------------------------------------------===//
// Math (CUDA names on <cmath>)
//===----------------------------------------------------------------------===//

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline double __drcp_rn(double x) { return 1.0 / x; }
inline float __fdividef(float a, float b) { return a / b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / std::sqrt(x); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __fma_rn(double a, double b, double c) {
  return std::fma(a, b, c);
}
inline double __dsqrt_rn(double x) { return std::sqrt(x); }
inline float __saturatef(float x) {
  return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; // NaN -> 0
}
inline int __float2int_rn(float x) {
  return static_cast<int>(std::nearbyint(x));
}
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }

inline unsigned __float_as_uint(float x) {
  return ::moec_emu::detail::floatToBits(x);
}
inline float __uint_as_float(unsigned x) {
  return ::moec_emu::detail::bitsToFloat(x);
}
inline int __float_as_int(float x) {
  return static_cast<int>(::moec_emu::detail::floatToBits(x));
}
inline float __int_as_float(int x) {
  return ::moec_emu::detail::bitsToFloat(static_cast<uint32_t>(x));
}
inline long long __double_as_longlong(double x) {
  long long bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}
inline double __longlong_as_double(long long x) {
  double d;
  std::memcpy(&d, &x, sizeof d);
  return d;
}

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) {
  return x ? __builtin_clz(static_cast<unsigned>(x)) : 32;
}
inline int __clzll(long long x) {
  return x ? __builtin_clzll(static_cast<unsigned long long>(x)) : 64;
}
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  x = ((x >> 8) & 0x00ff00ffu) | ((x & 0x00ff00ffu) << 8);
  return (x >> 16) | (x << 16);
}

// CUDA's min/max overloads for equal argument types.
#define MOEC_EMU_MINMAX(T)                                                     \
  inline T min(T a, T b) { return b < a ? b : a; }                             \
  inline T max(T a, T b) { return a < b ? b : a; }
MOEC_EMU_MINMAX(int)
MOEC_EMU_MINMAX(unsigned)
MOEC_EMU_MINMAX(long)
MOEC_EMU_MINMAX(unsigned long)
MOEC_EMU_MINMAX(long long)
MOEC_EMU_MINMAX(unsigned long long)
#undef MOEC_EMU_MINMAX
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

// glibc declares __expf and friends as libm-internal names it does not
// export, so the fast CUDA intrinsics are macros onto the exact functions.
#define __expf(x) ::expf(x)
#define __exp10f(x) ::exp10f(x)
#define __logf(x) ::logf(x)
#define __log2f(x) ::log2f(x)
#define __log10f(x) ::log10f(x)
#define __powf(x, y) ::powf((x), (y))
#define __sinf(x) ::sinf(x)
#define __cosf(x) ::cosf(x)
#define __tanf(x) ::tanf(x)

//===----------------------------------------------------------------------===//
// The launcher
//===----------------------------------------------------------------------===//

namespace moec_emu {
namespace detail {

template <typename Params>
inline void invokeKernel(void (*fn)(), const void *params) {
  reinterpret_cast<void (*)(Params)>(fn)(*static_cast<const Params *>(params));
}

/// Runs blocks in increasing linear order until none is left or a block
/// before the next one has failed.
inline void runBlocks(Launch &launch) {
  try {
    Block block(launch);
    tls.block = &block;
    tls.thread = nullptr;
    for (;;) {
      unsigned long long next = launch.nextBlock.fetch_add(1);
      if (next >= launch.nBlocks || next >= launch.stopAt.load())
        break;
      block.run(next);
      if (block.failed) {
        std::lock_guard<std::mutex> lock(launch.errorMutex);
        // The lowest failing block reports, as in a sequential run.
        if (next < launch.errorBlock) {
          launch.errorBlock = next;
          launch.error = block.error;
        }
        unsigned long long stop = launch.stopAt.load();
        while (next < stop &&
               !launch.stopAt.compare_exchange_weak(stop, next)) {
        }
        break;
      }
    }
  } catch (const std::exception &e) {
    std::lock_guard<std::mutex> lock(launch.errorMutex);
    if (launch.error.empty())
      launch.error = format("%s: %s", launch.kernel, e.what());
    launch.errorBlock = 0;
    launch.stopAt.store(0);
  }
  tls.block = nullptr;
  tls.thread = nullptr;
}

inline void copyMessage(const std::string &message, char *error,
                        unsigned long errorBytes) {
  if (!error || errorBytes == 0)
    return;
  size_t n = std::min<size_t>(message.size(), errorBytes - 1);
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

/// Checks the launch shape; an empty string when it is valid.
inline std::string validate(const moec_emu_launch &c) {
  if (c.version != MOEC_EMU_ABI_VERSION)
    return format("launcher ABI version %u, but this kernel was built for "
                  "version %u; rebuild it",
                  c.version, MOEC_EMU_ABI_VERSION);
  if (c.flags != 0 || c.reserved != 0)
    return format("unknown launch flags 0x%x", c.flags | c.reserved);
  for (int i = 0; i < 3; ++i)
    if (c.grid[i] == 0 || c.block[i] == 0)
      return format("grid (%u,%u,%u) and block (%u,%u,%u) must be positive",
                    c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1],
                    c.block[2]);
  if (c.grid[1] > 65535 || c.grid[2] > 65535 || c.grid[0] > 0x7fffffffu)
    return format("grid (%u,%u,%u) is over CUDA's limits (2^31-1, 65535, "
                  "65535)",
                  c.grid[0], c.grid[1], c.grid[2]);
  unsigned long long threads = 1ull * c.block[0] * c.block[1] * c.block[2];
  if (c.block[0] > 1024 || c.block[1] > 1024 || c.block[2] > 64 ||
      threads > kMaxThreadsPerBlock)
    return format("block (%u,%u,%u) has %llu threads; CUDA allows at most "
                  "1024 (and 1024, 1024, 64 per dimension)",
                  c.block[0], c.block[1], c.block[2], threads);
  if (c.sharedBytes > kMaxSharedBytes)
    return format("%llu bytes of dynamic shared memory is over the %llu a "
                  "block may have",
                  c.sharedBytes, kMaxSharedBytes);
  if (c.stackBytes && (c.stackBytes < 16384 || c.stackBytes > (64u << 20)))
    return format("a fiber stack of %llu bytes is outside [16 KiB, 64 MiB]",
                  c.stackBytes);
  return std::string();
}

/// The body of every moec_emu_launch_<kernel>: no exception leaves it.
template <typename Params>
inline int launch(const char *kernel, void (*fn)(Params),
                  const moec_emu_launch *config, const Params *params,
                  char *error, unsigned long errorBytes) noexcept {
  static_assert(sizeof(static_cast<moec_emu_launch *>(nullptr)->bufferBytes) /
                        sizeof(unsigned long long) ==
                    kMaxBuffers,
                "moec_emu_launch::bufferBytes has one entry per buffer");
  try {
    if (!config || !params) {
      copyMessage(format("%s: null launch configuration or parameters", kernel),
                  error, errorBytes);
      return 1;
    }
    std::string invalid = validate(*config);
    if (!invalid.empty()) {
      copyMessage(format("%s: %s", kernel, invalid.c_str()), error, errorBytes);
      return 1;
    }
    Launch launch;
    launch.kernel = kernel;
    launch.invoke = &invokeKernel<Params>;
    launch.fn = reinterpret_cast<void (*)()>(fn);
    launch.params = params;
    launch.grid = dim3(config->grid[0], config->grid[1], config->grid[2]);
    launch.block = dim3(config->block[0], config->block[1], config->block[2]);
    launch.nThreads = config->block[0] * config->block[1] * config->block[2];
    launch.nBlocks = 1ull * config->grid[0] * config->grid[1] * config->grid[2];
    launch.sharedBytes = static_cast<size_t>(config->sharedBytes);
    size_t page = GlobalStacks::pageBytes();
    size_t stack = config->stackBytes ? static_cast<size_t>(config->stackBytes)
                                      : kDefaultStackBytes;
    launch.stackBytes = (stack + page - 1) / page * page;
    for (unsigned i = 0; i < kMaxBuffers; ++i)
      launch.buffers[i] =
          BufferInfo{static_cast<const unsigned char *>(params->buffers[i]),
                     config->bufferBytes[i], static_cast<int>(i)};
    unsigned long long workers = std::min<unsigned long long>(
        {std::max(config->hostThreads, 1u), launch.nBlocks, kMaxHostThreads});
    std::vector<std::thread> helpers;
    try {
      for (unsigned long long i = 1; i < workers; ++i)
        helpers.emplace_back([&launch] { runBlocks(launch); });
    } catch (const std::exception &) {
      // Fewer host threads than asked for give the same results.
    }
    runBlocks(launch);
    for (std::thread &helper : helpers)
      helper.join();
    if (launch.errorBlock != ~0ull || !launch.error.empty()) {
      copyMessage(launch.error, error, errorBytes);
      return 1;
    }
    return 0;
  } catch (const std::exception &e) {
    copyMessage(format("%s: %s", kernel, e.what()), error, errorBytes);
  } catch (...) {
    copyMessage(format("%s: unknown failure", kernel), error, errorBytes);
  }
  return 1;
}

} // namespace detail
} // namespace moec_emu

/// Placed after each kernel: exports `int moec_emu_launch_<name>(config,
/// params, error, errorBytes)`, which runs the grid and returns 0, or
/// non-zero with a message in `error`.
#define MOEC_EMU_EXPORT_KERNEL(name)                                           \
  extern "C"                                                                   \
      __attribute__((visibility("default"))) int moec_emu_launch_##name(       \
          const moec_emu_launch *config, const ::moec::KernelParams *params,   \
          char *error, unsigned long errorBytes) {                             \
    return ::moec_emu::detail::launch(#name, &name, config, params, error,     \
                                      errorBytes);                             \
  }

#endif // MOEC_EMU_PRELUDE_H
