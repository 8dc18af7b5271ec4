//===- CudaDriver.cpp - the CUDA driver API through dlopen ----------------===//
//
// Entry points are looked up with cuGetProcAddress_v2 (CUDA 12+) at the ABI
// of CUDA 12.0, which the signatures in CudaDriver.h follow; drivers without
// it fall back to dlsym of the versioned export names from cuda.h.
//
//===----------------------------------------------------------------------===//

#include "CudaDriver.h"
#include "moec/Error.h"

#include <cstdlib>
#include <dlfcn.h>
#include <fmt/format.h>
#include <mutex>

namespace moec::detail::cuda {

namespace {

constexpr const char *kDefaultLibrary = "libcuda.so.1";
constexpr const char *kAlternatives = "use --device cpu or --device emu";
/// The CUDA version whose function signatures CudaDriver.h declares.
constexpr int kAbiVersion = 12000;

using GetProcAddress = CUresult (*)(const char *, void **, int,
                                    unsigned long long, int *);

/// Finds entry points in an opened driver library.
class Resolver {
public:
  Resolver(void *handle, const std::string &path) : handle(handle), path(path) {
    getProc = reinterpret_cast<GetProcAddress>(
        ::dlsym(handle, "cuGetProcAddress_v2"));
  }

  template <typename Fn>
  void bind(Fn &fn, const char *base, const char *exported) {
    fn = reinterpret_cast<Fn>(find(base, exported));
  }

private:
  void *find(const char *base, const char *exported) {
    if (getProc) {
      void *fn = nullptr;
      int status = -1;
      // CU_GET_PROC_ADDRESS_DEFAULT = 0, CU_GET_PROC_ADDRESS_SUCCESS = 0.
      if (getProc(base, &fn, kAbiVersion, 0, &status) == CUDA_SUCCESS &&
          status == 0 && fn)
        return fn;
    }
    if (void *fn = ::dlsym(handle, exported))
      return fn;
    throw Error(fmt::format("'{}' is not a usable CUDA driver: it has no {} "
                            "(moec needs the driver API of CUDA 12 or newer); "
                            "install a current NVIDIA driver, or {}",
                            path, exported, kAlternatives));
  }

  void *handle;
  const std::string &path;
  GetProcAddress getProc = nullptr;
};

} // namespace

// The library stays loaded: buffers and modules may be released late.
CudaDriver::~CudaDriver() = default;

std::unique_ptr<CudaDriver> CudaDriver::open(const std::string &library) {
  const char *override = std::getenv("MOEC_CUDA_DRIVER_LIBRARY");
  bool overridden = override && *override && library == override;
  void *handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *error = ::dlerror();
    std::string why = error ? error : "cannot be loaded";
    if (overridden)
      throw Error(fmt::format("the CUDA driver named by "
                              "$MOEC_CUDA_DRIVER_LIBRARY ('{}') could not be "
                              "loaded: {}; unset it to use libcuda.so.1, or {}",
                              library, why, kAlternatives));
    throw Error(fmt::format("no CUDA driver ({}) could be loaded: {}; install "
                            "the NVIDIA driver to run on a GPU, or {}",
                            library, why, kAlternatives));
  }
  std::unique_ptr<CudaDriver> driver(new CudaDriver());
  driver->handle = handle;
  driver->libraryPath = library;
  try {
    Resolver r(handle, library);
    CudaDriver &d = *driver;
    r.bind(d.cuGetErrorName, "cuGetErrorName", "cuGetErrorName");
    r.bind(d.cuGetErrorString, "cuGetErrorString", "cuGetErrorString");
    r.bind(d.cuInit, "cuInit", "cuInit");
    r.bind(d.cuDriverGetVersion, "cuDriverGetVersion", "cuDriverGetVersion");
    r.bind(d.cuDeviceGetCount, "cuDeviceGetCount", "cuDeviceGetCount");
    r.bind(d.cuDeviceGet, "cuDeviceGet", "cuDeviceGet");
    r.bind(d.cuDeviceGetAttribute, "cuDeviceGetAttribute",
           "cuDeviceGetAttribute");
    r.bind(d.cuDeviceGetName, "cuDeviceGetName", "cuDeviceGetName");
    r.bind(d.cuDeviceTotalMem, "cuDeviceTotalMem", "cuDeviceTotalMem_v2");
    r.bind(d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain",
           "cuDevicePrimaryCtxRetain");
    r.bind(d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease",
           "cuDevicePrimaryCtxRelease_v2");
    r.bind(d.cuCtxSetCurrent, "cuCtxSetCurrent", "cuCtxSetCurrent");
    r.bind(d.cuModuleLoadData, "cuModuleLoadData", "cuModuleLoadData");
    r.bind(d.cuModuleGetFunction, "cuModuleGetFunction", "cuModuleGetFunction");
    r.bind(d.cuModuleUnload, "cuModuleUnload", "cuModuleUnload");
    r.bind(d.cuFuncGetAttribute, "cuFuncGetAttribute", "cuFuncGetAttribute");
    r.bind(d.cuFuncSetAttribute, "cuFuncSetAttribute", "cuFuncSetAttribute");
    r.bind(d.cuLaunchKernel, "cuLaunchKernel", "cuLaunchKernel");
    r.bind(d.cuMemAlloc, "cuMemAlloc", "cuMemAlloc_v2");
    r.bind(d.cuMemFree, "cuMemFree", "cuMemFree_v2");
    r.bind(d.cuMemcpyHtoD, "cuMemcpyHtoD", "cuMemcpyHtoD_v2");
    r.bind(d.cuMemcpyDtoH, "cuMemcpyDtoH", "cuMemcpyDtoH_v2");
    r.bind(d.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2");
    r.bind(d.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2");
    r.bind(d.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync", "cuMemcpyDtoDAsync_v2");
    r.bind(d.cuMemsetD8Async, "cuMemsetD8Async", "cuMemsetD8Async");
    r.bind(d.cuStreamCreate, "cuStreamCreate", "cuStreamCreate");
    r.bind(d.cuStreamSynchronize, "cuStreamSynchronize", "cuStreamSynchronize");
    r.bind(d.cuStreamDestroy, "cuStreamDestroy", "cuStreamDestroy_v2");
    r.bind(d.cuStreamBeginCapture, "cuStreamBeginCapture",
           "cuStreamBeginCapture_v2");
    r.bind(d.cuStreamEndCapture, "cuStreamEndCapture", "cuStreamEndCapture");
    r.bind(d.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags",
           "cuGraphInstantiateWithFlags");
    r.bind(d.cuGraphLaunch, "cuGraphLaunch", "cuGraphLaunch");
    r.bind(d.cuGraphExecDestroy, "cuGraphExecDestroy", "cuGraphExecDestroy");
    r.bind(d.cuGraphDestroy, "cuGraphDestroy", "cuGraphDestroy");
  } catch (...) {
    ::dlclose(handle);
    throw;
  }
  Dl_info info;
  if (::dladdr(reinterpret_cast<void *>(driver->cuInit), &info) &&
      info.dli_fname)
    driver->libraryPath = info.dli_fname;
  return driver;
}

std::string CudaDriver::errorText(CUresult result) const {
  const char *name = nullptr, *description = nullptr;
  if (cuGetErrorName(result, &name) != CUDA_SUCCESS || !name)
    name = nullptr;
  if (cuGetErrorString(result, &description) != CUDA_SUCCESS || !description)
    description = nullptr;
  std::string text = name ? name : fmt::format("CUDA error {}", result);
  if (description)
    text += fmt::format(": {}", description);
  return text;
}

void CudaDriver::check(CUresult result, const char *call) const {
  if (result != CUDA_SUCCESS)
    throw Error(fmt::format("{} failed: {}", call, errorText(result)));
}

const CudaDriver &CudaDriver::get() {
  static std::mutex mutex;
  static std::unique_ptr<CudaDriver> instance;
  std::lock_guard<std::mutex> lock(mutex);
  if (instance)
    return *instance;
  const char *override = std::getenv("MOEC_CUDA_DRIVER_LIBRARY");
  std::unique_ptr<CudaDriver> driver =
      open(override && *override ? override : kDefaultLibrary);
  CUresult result = driver->cuInit(0);
  if (result == CUDA_ERROR_NO_DEVICE)
    throw Error(fmt::format("the CUDA driver found no GPU (cuInit: {}); {}",
                            driver->errorText(result), kAlternatives));
  if (result == CUDA_ERROR_STUB_LIBRARY)
    throw Error(fmt::format("'{}' is the CUDA toolkit's stub driver, not a "
                            "real one (cuInit: {}); install the NVIDIA driver "
                            "to run on a GPU, or {}",
                            driver->library(), driver->errorText(result),
                            kAlternatives));
  if (result != CUDA_SUCCESS)
    throw Error(fmt::format("the CUDA driver '{}' failed to initialise "
                            "(cuInit: {}); {}",
                            driver->library(), driver->errorText(result),
                            kAlternatives));
  instance = std::move(driver);
  return *instance;
}

} // namespace moec::detail::cuda
