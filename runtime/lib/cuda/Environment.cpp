//===- Environment.cpp - what this machine offers the cuda device ---------===//
//
// Each part is probed on its own, so that a machine without a GPU still
// reports its NVRTC, and one without NVRTC still reports its GPUs.
//
//===----------------------------------------------------------------------===//

#include "CublasLt.h"
#include "CudaDriver.h"
#include "Nvrtc.h"
#include "ToolkitLibraries.h"
#include "moec/Cuda.h"
#include "moec/Error.h"
#include "moec/support/GpuArch.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

namespace moec {

using detail::cuda::CUDA_SUCCESS;
using detail::cuda::CudaDriver;
using detail::cuda::CUdevice;

namespace {

bool ok(int result) { return result == CUDA_SUCCESS; }

/// "580.159.04" from the kernel module's version file, or "".
std::string kernelModuleVersion() {
  std::ifstream file("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(file, line))
    return "";
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu ..."
  std::istringstream words(line);
  std::string word, previous;
  while (words >> word) {
    if (previous == "Module" && !word.empty() && std::isdigit(word[0]))
      return word;
    previous = word;
  }
  return "";
}

void probeDriver(CudaEnvironment &env) {
  const char *override = std::getenv("MOEC_CUDA_DRIVER_LIBRARY");
  try {
    std::unique_ptr<CudaDriver> opened =
        CudaDriver::open(override && *override ? override : "libcuda.so.1");
    env.driverLibrary = opened->library();
    int version = 0;
    if (opened->cuDriverGetVersion(&version) == CUDA_SUCCESS)
      env.driverCudaVersion =
          fmt::format("{}.{}", version / 1000, version % 1000 / 10);
  } catch (const Error &e) {
    env.driverProblem = e.what();
    return;
  }
  env.driverVersion = kernelModuleVersion();
  const CudaDriver *driver = nullptr;
  try {
    driver = &CudaDriver::get();
  } catch (const Error &e) {
    env.gpuProblem = e.what();
    return;
  }
  int count = 0;
  if (ok(driver->cuDeviceGetCount(&count)) && count == 0)
    env.gpuProblem = "the CUDA driver found no GPU; use --device cpu or "
                     "--device emu";
  for (int i = 0; i < count; ++i) {
    CUdevice device = 0;
    if (!ok(driver->cuDeviceGet(&device, i)))
      continue;
    CudaEnvironment::Gpu gpu;
    char name[256] = {0};
    driver->cuDeviceGetName(name, sizeof(name) - 1, device);
    gpu.name = name;
    int major = 0, minor = 0;
    driver->cuDeviceGetAttribute(
        &major, detail::cuda::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
        device);
    driver->cuDeviceGetAttribute(
        &minor, detail::cuda::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
        device);
    gpu.arch = fmt::format("sm_{}{}", major, minor);
    driver->cuDeviceGetAttribute(
        &gpu.multiprocessors,
        detail::cuda::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
    size_t bytes = 0;
    if (ok(driver->cuDeviceTotalMem(&bytes, device)))
      gpu.memoryBytes = bytes;
    env.gpus.push_back(gpu);
  }
}

void probeNvrtc(CudaEnvironment &env) {
  try {
    const detail::cuda::Nvrtc &nvrtc = detail::cuda::Nvrtc::get();
    auto [major, minor] = nvrtc.version();
    env.nvrtcVersion = fmt::format("{}.{}", major, minor);
    env.nvrtcLibrary = nvrtc.library();
    for (int arch : nvrtc.supportedArchs())
      env.nvrtcArchs.push_back(fmt::format("sm_{}", arch));
  } catch (const Error &e) {
    env.nvrtcProblem = e.what();
  }
}

void probeCublasLt(CudaEnvironment &env) {
  std::string why;
  const detail::cuda::CublasLt *lib = detail::cuda::CublasLt::get(&why);
  if (!lib) {
    env.cublasLtProblem = why;
    return;
  }
  // cublasLtGetVersion: major * 10000 + minor * 100 + patch.
  size_t v = lib->cublasLtGetVersion();
  env.cublasLtVersion = fmt::format("{}.{}.{}", v / 10000, v / 100 % 100,
                                    v % 100);
  env.cublasLtLibrary = lib->library();
}

} // namespace

CudaEnvironment probeCudaEnvironment() {
  CudaEnvironment env;
  probeDriver(env);
  probeNvrtc(env);
  probeCublasLt(env);
  return env;
}

CudaReadiness cudaReadiness(const CudaEnvironment &env, std::string &why) {
  if (!env.driverProblem.empty()) {
    why = env.driverProblem;
    return CudaReadiness::NoDriver;
  }
  if (!env.gpuProblem.empty() || env.gpus.empty()) {
    why = env.gpuProblem.empty() ? "the CUDA driver found no GPU"
                                 : env.gpuProblem;
    return CudaReadiness::NoGpu;
  }
  if (!env.nvrtcProblem.empty()) {
    why = env.nvrtcProblem;
    return CudaReadiness::NoNvrtc;
  }
  const CudaEnvironment::Gpu &gpu = env.gpus.front();
  std::optional<int> number = support::archNumber(gpu.arch);
  if (!number || *number < support::kOldestArch) {
    why = fmt::format("the GPU '{}' is {}; moec's kernels need sm_80 "
                      "(Ampere) or newer",
                      gpu.name, gpu.arch);
    return CudaReadiness::UnsupportedGpu;
  }
  if (!env.nvrtcArchs.empty() &&
      std::find(env.nvrtcArchs.begin(), env.nvrtcArchs.end(), gpu.arch) ==
          env.nvrtcArchs.end()) {
    why = fmt::format("NVRTC {} cannot compile for the GPU's {} (it knows "
                      "{}); install a CUDA toolkit that does",
                      env.nvrtcVersion, gpu.arch,
                      fmt::join(env.nvrtcArchs, ", "));
    return CudaReadiness::UnsupportedGpu;
  }
  int driverMajor = std::atoi(env.driverCudaVersion.c_str());
  if (driverMajor > 0 && std::atoi(env.nvrtcVersion.c_str()) > driverMajor) {
    why = fmt::format("NVRTC {} ({}) is newer than the CUDA {} the driver "
                      "supports, which cannot load the kernels it compiles; "
                      "{}",
                      env.nvrtcVersion, env.nvrtcLibrary, env.driverCudaVersion,
                      detail::cuda::nvrtcForDriverAdvice(driverMajor));
    return CudaReadiness::NvrtcNewerThanDriver;
  }
  why.clear();
  return CudaReadiness::Ready;
}

} // namespace moec
