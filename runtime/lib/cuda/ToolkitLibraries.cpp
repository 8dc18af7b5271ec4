//===- ToolkitLibraries.cpp - which NVRTC and cuBLASLt to load ------------===//

#include "ToolkitLibraries.h"

#include <cstdlib>
#include <dlfcn.h>
#include <iterator>

namespace moec::detail::cuda {

int driverCudaMajor(const std::string &driverLibrary) {
  void *handle = ::dlopen(driverLibrary.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    return 0;
  using GetVersion = int (*)(int *);
  auto getVersion =
      reinterpret_cast<GetVersion>(::dlsym(handle, "cuDriverGetVersion"));
  int version = 0;
  if (!getVersion || getVersion(&version) != 0)
    version = 0;
  // The driver stays loaded, as CudaDriver keeps it: unloading libcuda is
  // not something it is known to survive.
  return version / 1000;
}

int installedDriverCudaMajor() {
  const char *override = std::getenv("MOEC_CUDA_DRIVER_LIBRARY");
  return driverCudaMajor(override && *override ? override : "libcuda.so.1");
}

std::vector<std::string> toolkitLibraryCandidates(const std::string &stem,
                                                  int driverMajor,
                                                  bool unversioned) {
  std::vector<int> majors;
  for (int major : kToolkitMajors)
    if (driverMajor == 0 || major <= driverMajor)
      majors.push_back(major);
  // The last resort: the newer majors, the one nearest the driver first.
  for (auto it = std::rbegin(kToolkitMajors); it != std::rend(kToolkitMajors);
       ++it)
    if (driverMajor != 0 && *it > driverMajor)
      majors.push_back(*it);
  std::vector<std::string> names;
  auto add = [&](const std::string &name) {
    names.push_back(name);
    names.push_back("/usr/local/cuda/lib64/" + name);
  };
  for (int major : majors)
    add(stem + "." + std::to_string(major));
  if (unversioned)
    add(stem);
  return names;
}

} // namespace moec::detail::cuda
