//===- Cuda.h - the generated CUDA code of a bundle -------------*- C++ -*-===//
//
// Tools around a bundle's generated kernels that need no GPU: the whole CUDA
// translation unit, its PTX, and ahead-of-time compilation into the kernel
// cache ($MOEC_CACHE_DIR, else $XDG_CACHE_HOME/moec, else ~/.cache/moec)
// with ptxas's resource report for every kernel. NVRTC is loaded at first
// use; without it these throw moec::Error saying what to install.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_CUDA_H
#define MOEC_CUDA_H

#include "moec/Bundle.h"

#include <cstddef>
#include <string>
#include <thread>
#include <vector>

namespace moec {

/// What ptxas reports for one kernel; -1 where it says nothing.
struct KernelResources {
  int registers = -1;
  int sharedBytes = -1;
  int spillStoreBytes = -1;
  int spillLoadBytes = -1;
  int stackBytes = -1;
};

/// The instructions of a kernel's PTX by kind: static counts (each
/// instruction in the code once, the functions it calls included), not how
/// often they run. They show whether a kernel takes the hardware paths it
/// is meant to: tensor cores, asynchronous copies, 16-byte accesses.
struct InstructionMix {
  int64_t instructions = 0;
  /// mma.sync and wgmma.mma_async (tensor cores).
  int64_t mma = 0;
  int64_t ldmatrix = 0;
  /// cp.async copies (their commits and waits are not counted).
  int64_t cpAsync = 0;
  /// ld.global / st.global, and those of them that move 16 bytes at once.
  int64_t globalLoads = 0, globalLoads16 = 0;
  int64_t globalStores = 0, globalStores16 = 0;
  /// ld.shared and st.shared, and those of them that move 16 bytes at once.
  int64_t sharedAccesses = 0, sharedAccesses16 = 0;
  /// Block-wide barriers (bar.sync, barrier.sync, bar.arrive).
  int64_t barriers = 0;
  int64_t calls = 0;
  /// Instructions on double-precision values.
  int64_t f64 = 0;
};

/// The instruction mix of a PTX module.
InstructionMix instructionMix(const std::string &ptx);

/// What compiling one kernel gave.
struct PrecompiledKernel {
  std::string name;
  bool cacheHit = false;
  /// Time to compile it, or to fetch it from the cache.
  double seconds = 0;
  KernelResources usage;
  size_t cubinBytes = 0;
  /// Counted in the kernel's PTX when precompileKernels was asked to.
  InstructionMix mix;
};

/// The device library followed by every kernel of the bundle: one CUDA C++
/// translation unit that nvcc or NVRTC compiles as it is. Throws when the
/// bundle has no kernels or was generated against another device library.
std::string cudaTranslationUnit(const Bundle &bundle);

/// The translation unit compiled by NVRTC to one PTX module for `arch`
/// ("sm_80", "sm_90"), with the options the cuda device uses.
std::string cudaPtx(const Bundle &bundle, const std::string &arch);

/// Compiles every kernel of the bundle for `arch` into the kernel cache,
/// `jobs` at a time (0: one per hardware thread); results in kernel-name
/// order. A kernel already cached is fetched, not compiled. With `mix`
/// each kernel's PTX is kept too and its instruction mix counted.
std::vector<PrecompiledKernel> precompileKernels(const Bundle &bundle,
                                                 const std::string &arch,
                                                 unsigned jobs = 0,
                                                 bool mix = false);

/// Loads NVRTC on a thread of its own while the caller goes on (reading a
/// bundle), so that the first kernel-cache lookup, whose keys name NVRTC's
/// version, does not wait the tens of milliseconds loading takes. Joins
/// when destroyed. A missing NVRTC is reported by whatever needs it, as
/// without the preload.
class NvrtcPreload {
public:
  NvrtcPreload();
  ~NvrtcPreload();
  NvrtcPreload(const NvrtcPreload &) = delete;
  NvrtcPreload &operator=(const NvrtcPreload &) = delete;

private:
  std::thread loader;
};

/// The tile family of a GPU architecture: "sm_80" for sm_80 up to sm_89
/// (Ampere, Ada), "sm_90" for sm_90 and newer (Hopper). Throws moec::Error
/// for a name that is not sm_XY[a-z] or is older than sm_80.
std::string tileFamily(const std::string &arch);

/// What this machine offers the cuda device. Every part that is missing
/// says why in its `...Problem` field; probing never throws.
struct CudaEnvironment {
  /// The NVIDIA kernel module's version ("580.159.04"), when readable.
  std::string driverVersion;
  /// The newest CUDA version the driver supports ("13.0").
  std::string driverCudaVersion;
  std::string driverLibrary;
  std::string driverProblem;
  struct Gpu {
    std::string name;
    /// "sm_90".
    std::string arch;
    int multiprocessors = 0;
    size_t memoryBytes = 0;
  };
  std::vector<Gpu> gpus;
  /// Why the driver, though loaded, offers no usable GPU.
  std::string gpuProblem;
  std::string nvrtcVersion;
  std::string nvrtcLibrary;
  /// The architectures NVRTC compiles for ("sm_75", "sm_80", ...).
  std::vector<std::string> nvrtcArchs;
  std::string nvrtcProblem;
  /// cuBLASLt, which computes the dense GEMMs the plan gives it; without it
  /// moec's own kernels do (not a readiness problem).
  std::string cublasLtVersion;
  std::string cublasLtLibrary;
  std::string cublasLtProblem;
};

CudaEnvironment probeCudaEnvironment();

/// Whether the cuda device can run here, in the order it is checked.
enum class CudaReadiness {
  Ready,
  NoDriver,
  NoGpu,
  NoNvrtc,
  UnsupportedGpu,
  /// NVRTC of a newer CUDA major than the driver: its kernels do not load.
  NvrtcNewerThanDriver,
};

/// Whether GPU 0 of `env` can run moec's kernels; `why` says what is
/// missing (empty when ready).
CudaReadiness cudaReadiness(const CudaEnvironment &env, std::string &why);

/// The directory compiled kernels are cached in.
std::string kernelCacheDirectory();

} // namespace moec

#endif // MOEC_CUDA_H
