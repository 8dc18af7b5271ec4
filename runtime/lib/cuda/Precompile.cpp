//===- Precompile.cpp - compile a bundle's kernels ahead of time ----------===//

#include "Precompile.h"
#include "BundleData.h"
#include "KernelCache.h"
#include "KernelCacheFiles.h"
#include "KernelSource.h"
#include "moec/Error.h"
#include "moec/support/DeviceLibrary.h"
#include "moec/support/GpuArch.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

namespace moec::detail::cuda {

std::vector<PrecompiledKernel>
compileKernels(const std::vector<const KernelDesc *> &kernels,
               const std::string &arch, unsigned jobs, bool mix) {
  std::vector<PrecompiledKernel> results(kernels.size());
  if (kernels.empty())
    return results;
  // Load NVRTC once, up front, so that its absence is one clear error.
  Nvrtc::get();

  std::atomic<size_t> next{0};
  std::mutex failureMutex;
  std::exception_ptr failure;
  auto work = [&] {
    for (size_t i = next++; i < kernels.size(); i = next++) {
      try {
        const KernelDesc &kernel = *kernels[i];
        CompiledKernel compiled = compileCached(kernelTranslationUnit(kernel),
                                                kernel.name, arch, mix);
        results[i] = {kernel.name,
                      compiled.cacheHit,
                      compiled.seconds,
                      compiled.usage,
                      compiled.cubin.size(),
                      mix ? instructionMix(compiled.ptx) : InstructionMix()};
      } catch (...) {
        std::lock_guard<std::mutex> lock(failureMutex);
        if (!failure)
          failure = std::current_exception();
        next = kernels.size();
      }
    }
  };
  if (jobs == 0)
    jobs = std::max(1u, std::thread::hardware_concurrency());
  jobs = static_cast<unsigned>(std::min<size_t>(jobs, kernels.size()));
  std::vector<std::thread> workers;
  for (unsigned j = 1; j < jobs; ++j)
    workers.emplace_back(work);
  work();
  for (std::thread &worker : workers)
    worker.join();
  if (failure)
    std::rethrow_exception(failure);
  return results;
}

std::vector<PrecompiledKernel> precompileBundle(const Bundle &bundle,
                                                const std::string &arch,
                                                unsigned jobs, bool mix) {
  const BundleData &data = bundle.internals();
  checkDeviceLibrary(data);
  archNumber(arch);
  std::vector<const KernelDesc *> kernels;
  for (const auto &[name, kernel] : data.kernels)
    kernels.push_back(&kernel);
  return compileKernels(kernels, arch, jobs, mix);
}

} // namespace moec::detail::cuda

namespace moec {

std::string cudaTranslationUnit(const Bundle &bundle) {
  const detail::BundleData &data = bundle.internals();
  if (data.kernels.empty())
    throw Error(fmt::format("{}: the bundle has no generated CUDA kernels",
                            data.origin));
  detail::checkDeviceLibrary(data);
  std::string unit(deviceLibrarySource());
  for (const auto &[name, kernel] : data.kernels) {
    unit += '\n';
    unit += kernel.source;
  }
  return unit;
}

std::string cudaPtx(const Bundle &bundle, const std::string &arch) {
  std::string unit = cudaTranslationUnit(bundle);
  std::string name =
      bundle.model().name.empty() ? "model" : bundle.model().name;
  return detail::cuda::Nvrtc::get().compile(unit, name, arch, true).ptx;
}

std::vector<PrecompiledKernel> precompileKernels(const Bundle &bundle,
                                                 const std::string &arch,
                                                 unsigned jobs, bool mix) {
  return detail::cuda::precompileBundle(bundle, arch, jobs, mix);
}

std::string tileFamily(const std::string &arch) {
  std::optional<std::string> family = support::tileFamily(arch);
  if (!family)
    throw Error(support::unsupportedArchMessage(arch));
  return *family;
}

std::string kernelCacheDirectory() {
  return detail::cuda::KernelCache::global().directory();
}

} // namespace moec
