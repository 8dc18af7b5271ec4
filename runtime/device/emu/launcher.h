//===- launcher.h - emu prelude: the launcher -------------------*- C++ -*-===//
//
// One part of the emu prelude (see prelude.h): runtime/CMakeLists.txt
// joins the parts, in the order it lists them, into the one header that
// kernels are built with.
//
//===----------------------------------------------------------------------===//

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
