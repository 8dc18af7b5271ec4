//===- ToolkitLibraries.h - which NVRTC and cuBLASLt to load ----*- C++ -*-===//
//
// A CUDA toolkit library of a newer major version than the driver supports
// loads fine but fails later: NVRTC 13's kernels do not load on a CUDA 12
// driver, cuBLASLt 13 does not start on one. So the versioned names are
// tried in the order the driver can run them: the majors it supports,
// newest first, then the newer ones as a last resort.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CUDA_TOOLKITLIBRARIES_H
#define MOEC_RUNTIME_CUDA_TOOLKITLIBRARIES_H

#include <string>
#include <vector>

namespace moec::detail::cuda {

/// The toolkit majors moec can use, newest first.
inline constexpr int kToolkitMajors[] = {13, 12};

/// The CUDA major version the driver library supports (cuDriverGetVersion,
/// which needs no cuInit), or 0 when it cannot be loaded or asked.
int driverCudaMajor(const std::string &driverLibrary);

/// driverCudaMajor of $MOEC_CUDA_DRIVER_LIBRARY, else of libcuda.so.1.
int installedDriverCudaMajor();

/// The names to dlopen for `stem` ("libnvrtc.so"). With a driver: for each
/// major of kToolkitMajors that it runs, newest first, then the newer
/// majors, oldest first (a last resort: the load fails later, saying why),
/// each first on the loader's path and then in /usr/local/cuda/lib64; the
/// unversioned names last when `unversioned`. Without one (`driverMajor`
/// 0): every name on the loader's path, newest first, then the same in
/// /usr/local/cuda/lib64.
std::vector<std::string> toolkitLibraryCandidates(const std::string &stem,
                                                  int driverMajor,
                                                  bool unversioned);

/// What to do when the NVRTC in use is newer than the CUDA `driverMajor`
/// the driver runs: "install NVRTC of CUDA 12 (or set ...), or a newer
/// driver".
std::string nvrtcForDriverAdvice(int driverMajor);

} // namespace moec::detail::cuda

#endif // MOEC_RUNTIME_CUDA_TOOLKITLIBRARIES_H
