//===- EmuCompiler.h - generated CUDA built for the host --------*- C++ -*-===//
//
// The emu device runs the CUDA translation units moec generates on the CPU:
// EmuModule::load compiles one with the host C++ compiler against the SIMT
// prelude (runtime/device/emu/*.h, joined and embedded in the runtime),
// caches the shared object on disk and dlopens it; EmuModule::launch runs a
// kernel of it through the moec_emu_launch_<kernel> entry the prelude
// exports.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_EMU_EMUCOMPILER_H
#define MOEC_RUNTIME_EMU_EMUCOMPILER_H

#include <array>
#include "KernelParams.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace moec::emu {

using detail::KernelParams;
using detail::kMaxKernelBuffers;
using detail::kMaxKernelScalars;

/// How a translation unit is built.
struct EmuOptions {
  /// Build with -DMOEC_EMU_CHECK: bounds-checked global pointers, tracked
  /// shared memory, strict shuffle masks. Slower.
  bool check = false;
  /// With `check`, track shared memory too. Tracked arrays are objects: a
  /// kernel that passes one to a template deducing T from a T* parameter
  /// (rather than moec::sptr<T>) only builds without tracking
  /// (-DMOEC_EMU_UNTRACKED_SHARED).
  bool trackShared = true;
  /// The compiler; empty: $MOEC_EMU_CXX, else "c++" (looked up in PATH).
  std::string compiler;
  /// The cache directory; empty: $MOEC_CACHE_DIR/emu, else
  /// $XDG_CACHE_HOME/moec/emu, else ~/.cache/moec/emu.
  std::string cacheDir;
  /// Replaces -O1 (e.g. "-O0", with "-g" among extraFlags, for stepping
  /// through kernels in gdb with their variables).
  std::string optimization = "-O1";
  /// Appended to the command line (e.g. "-fsanitize=address"), before the
  /// words of $MOEC_EMU_CXXFLAGS, which come last.
  std::vector<std::string> extraFlags;
};

/// The shape of one launch.
struct EmuLaunchConfig {
  std::array<unsigned, 3> grid = {1, 1, 1};
  std::array<unsigned, 3> block = {1, 1, 1};
  /// Dynamic shared memory per block (MOEC_DYNAMIC_SHARED).
  uint64_t sharedBytes = 0;
  /// Byte size of each buffer in KernelParams order (check mode bounds
  /// checks); missing or 0: unknown.
  std::vector<uint64_t> bufferBytes;
  /// Host threads running blocks in parallel; results do not depend on it.
  unsigned hostThreads = 1;
  /// Fiber stack per CUDA thread; 0: 64 KiB.
  uint64_t stackBytes = 0;
};

/// A compiled and loaded translation unit. Copies share the loaded library,
/// which is unloaded with the last copy. launch() may be called from
/// several threads at once.
class EmuModule {
public:
  /// Compiles `source` (a whole translation unit: device library and
  /// kernels) or reuses the cached shared object built from the same
  /// prelude, source, compiler and flags, and loads it. `name` names the
  /// cached files. Throws moec::Error with the compiler's log and the path
  /// of the saved source when compiling fails.
  static EmuModule load(const std::string &source, const std::string &name,
                        const EmuOptions &options = {});

  /// Runs `kernel` over the grid and returns when every block has finished.
  /// Throws moec::Error naming the kernel, block and thread when the kernel
  /// fails (a barrier some threads never reach, an incomplete warp
  /// collective, a check-mode violation) or the launch shape is invalid.
  void launch(const std::string &kernel, const EmuLaunchConfig &config,
              const KernelParams &params) const;

  /// Whether the module exports a launcher for `kernel`.
  bool hasKernel(const std::string &kernel) const;
  /// True when load() reused a cached shared object without compiling.
  bool fromCache() const;
  /// The shared object and the source it was built from.
  const std::string &libraryPath() const;
  const std::string &sourcePath() const;

private:
  struct Impl;
  explicit EmuModule(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl;
};

/// The SIMT prelude compiled into every emu kernel (runtime/device/emu).
const std::string &emuPrelude();

/// The directory EmuOptions{} caches shared objects in.
std::string defaultEmuCacheDir();

} // namespace moec::emu

#endif // MOEC_RUNTIME_EMU_EMUCOMPILER_H
