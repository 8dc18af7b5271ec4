//===- Nvrtc.h - CUDA C++ to CUBIN at run time ------------------*- C++ -*-===//
//
// NVRTC, loaded with dlopen at first use so that moec builds and runs on
// machines without the CUDA toolkit. It needs no GPU: kernels compile for
// any architecture NVRTC knows, which is how moec tests its generated code
// on machines without one.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CUDA_NVRTC_H
#define MOEC_RUNTIME_CUDA_NVRTC_H

#include "PtxasLog.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace moec::detail::cuda {

/// A CUBIN image, shared by every kernel compiled in the same NVRTC
/// program (see Nvrtc::compileTogether).
using Cubin = std::shared_ptr<const std::string>;

/// One kernel compiled for one architecture.
struct CompiledKernel {
  std::string name;
  /// "sm_80", "sm_90".
  std::string arch;
  /// The module holding the kernel, possibly with others; never null.
  Cubin cubin;
  /// Empty unless PTX was asked for; the kernel's own part of the module
  /// (entryPtx in PtxEntry.h).
  std::string ptx;
  /// NVRTC's log, with ptxas's resource report (for the whole module).
  std::string log;
  ResourceUsage usage;
  /// Whether it came from the kernel cache rather than from NVRTC.
  bool cacheHit = false;
  /// Time to compile (the kernel's share of its program's), or to fetch
  /// from the cache.
  double seconds = 0;
};

/// The number of an architecture name: "sm_90" -> 90, "sm_90a" -> 90. Throws
/// moec::Error unless `arch` is "sm_" followed by digits and at most one
/// lowercase letter.
int archNumber(const std::string &arch);

/// NVRTC's entry points, resolved with dlsym (Nvrtc.cpp).
struct NvrtcApi;

/// The NVRTC library. Thread-safe: NVRTC compiles distinct programs
/// concurrently.
class Nvrtc {
public:
  /// NVRTC, loaded at first use from $MOEC_NVRTC_LIBRARY if set, else the
  /// first of libnvrtc.so.13, .12 (those the driver runs first: see
  /// ToolkitLibraries.h) and libnvrtc.so on the library path or in
  /// /usr/local/cuda/lib64. Throws moec::Error saying what was
  /// tried when none loads; a later call tries again.
  static const Nvrtc &get();
  /// Loads NVRTC as get() does, but a new instance every time (for tests).
  static std::unique_ptr<Nvrtc> load();
  ~Nvrtc();

  /// (major, minor), e.g. (13, 0).
  std::pair<int, int> version() const;
  /// Identifies this NVRTC build in cache keys: the version and the size
  /// of the library file, which differs between patch releases.
  const std::string &identity() const { return identityText; }
  /// The file NVRTC was loaded from.
  const std::string &library() const { return libraryPath; }
  /// The architectures NVRTC compiles for (75, 80, 90, ...).
  const std::vector<int> &supportedArchs() const { return archs; }

  /// The options compile() passes for `arch`, in order (part of cache keys),
  /// ending with optionsFromEnvironment().
  std::vector<std::string> options(const std::string &arch) const;

  /// The words of $MOEC_NVRTC_OPTIONS, split at white space: options added
  /// after moec's own, e.g. "--Ofast-compile=min" to trade kernel speed for
  /// compile time. Kernels compiled with them are cached apart.
  static std::vector<std::string> optionsFromEnvironment();

  /// Compiles one translation unit, whose kernel is the `extern "C"`
  /// function `name`, to CUBIN for exactly `arch` ("sm_80", "sm_90"), and to
  /// PTX too when `wantPtx`. The program is called "<name>.cu". On failure
  /// throws moec::Error with NVRTC's log and the path where the whole
  /// translation unit was saved: `failedDir`/<name>.cu, where an empty
  /// `failedDir` means kernelCacheDirectory("cuda")/failed.
  CompiledKernel compile(const std::string &source, const std::string &name,
                         const std::string &arch, bool wantPtx,
                         const std::string &failedDir = "") const;

  /// compile() for a translation unit defining the kernels `names`, as one
  /// NVRTC program: NVRTC's fixed cost per program (tens of milliseconds,
  /// as much as a small kernel's own) is paid once. The results share one
  /// CUBIN; each kernel's seconds are an equal share of the program's. A
  /// failed program is saved as `failedDir`/<first name>.cu.
  std::vector<CompiledKernel>
  compileTogether(const std::string &source,
                  const std::vector<std::string> &names,
                  const std::string &arch, bool wantPtx,
                  const std::string &failedDir = "") const;

private:
  Nvrtc(std::unique_ptr<NvrtcApi> api, std::string libraryPath);

  std::unique_ptr<NvrtcApi> api;
  std::string libraryPath;
  std::string identityText;
  int major = 0, minor = 0;
  std::vector<int> archs;
};

} // namespace moec::detail::cuda

#endif // MOEC_RUNTIME_CUDA_NVRTC_H
