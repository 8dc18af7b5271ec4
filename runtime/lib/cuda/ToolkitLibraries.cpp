//===- ToolkitLibraries.cpp - which NVRTC and cuBLASLt to load ------------===//

#include "ToolkitLibraries.h"

#include <cstdlib>
#include <dlfcn.h>
#include <fmt/format.h>
#include <iterator>

namespace moec::detail::cuda {

int driverCudaMajor(const std::string &driverLibrary) {
  void *handle = ::dlopen(driverLibrary.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    return 0;
  using GetVersion = int (*)(int *);
  auto getVersion =
      reinterpret_cast<GetVersion>(::dlsym(handle, "cuDriverGetVersion"));
  if (!getVersion) {
    ::dlclose(handle); // not a driver
    return 0;
  }
  int version = 0;
  if (getVersion(&version) != 0)
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
  const std::string locations[] = {"", "/usr/local/cuda/lib64/"};
  std::vector<std::string> names;
  if (driverMajor == 0) {
    // No driver to fit: the loader's path first, newest major first.
    for (const std::string &location : locations) {
      for (int major : kToolkitMajors)
        names.push_back(location + stem + "." + std::to_string(major));
      if (unversioned)
        names.push_back(location + stem);
    }
    return names;
  }
  std::vector<int> majors;
  for (int major : kToolkitMajors)
    if (major <= driverMajor)
      majors.push_back(major);
  // The last resort: the newer majors, the one nearest the driver first.
  for (auto it = std::rbegin(kToolkitMajors); it != std::rend(kToolkitMajors);
       ++it)
    if (*it > driverMajor)
      majors.push_back(*it);
  auto add = [&](const std::string &name) {
    for (const std::string &location : locations)
      names.push_back(location + name);
  };
  for (int major : majors)
    add(stem + "." + std::to_string(major));
  if (unversioned)
    add(stem);
  return names;
}

std::string nvrtcForDriverAdvice(int driverMajor) {
  return fmt::format("install NVRTC of CUDA {} (or set $MOEC_NVRTC_LIBRARY "
                     "to its libnvrtc.so), or a newer driver",
                     driverMajor);
}

} // namespace moec::detail::cuda
