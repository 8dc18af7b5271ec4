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
#include <functional>
#include <mutex>
#include <string_view>
#include <thread>

namespace moec::detail::cuda {

namespace {

/// NVRTC programs per worker thread when compiling a batch of kernels:
/// fewer programs pay NVRTC's fixed cost (about 0.11 s of CPU a program)
/// less often, more keep the workers evenly loaded when some kernels take
/// much longer than others. With the multi-tensor kernels rolled into loops
/// no kernel dominates: on 2 cores the 12-block d 512 model compiles in
/// 2.75-2.8 s with 2, 2.8-2.95 s with 4 (bench/RESULTS.md).
constexpr size_t kProgramsPerJob = 2;

/// Runs work(i) for i in [0, count) on `jobs` threads (0: one per hardware
/// thread). The first failure stops the rest and is rethrown.
void parallelFor(size_t count, unsigned jobs,
                 const std::function<void(size_t)> &work) {
  std::atomic<size_t> next{0};
  std::mutex failureMutex;
  std::exception_ptr failure;
  auto worker = [&] {
    for (size_t i = next++; i < count; i = next++) {
      try {
        work(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failureMutex);
        if (!failure)
          failure = std::current_exception();
        next = count;
      }
    }
  };
  std::vector<std::thread> threads;
  for (size_t j = 1; j < std::min<size_t>(jobs, count); ++j)
    threads.emplace_back(worker);
  worker();
  for (std::thread &thread : threads)
    thread.join();
  if (failure)
    std::rethrow_exception(failure);
}

} // namespace

unsigned compileJobs(unsigned jobs) {
  return jobs ? jobs : std::max(1u, std::thread::hardware_concurrency());
}

// For spreading kernels evenly over NVRTC programs (round robin left one
// worker idle for a second of a 12-block model's 5): beyond the NVRTC
// front end's share, which every program pays once, a kernel that calls a
// tensor-core GEMM tile takes NVVM and ptxas about three times as long as
// a row or elementwise kernel, a tensor-core attention tile eight times, a
// CUDA-core GEMM tile two and a half and a CUDA-core attention tile five
// (measured when `moec precompile --mix -v --jobs 1` still compiled each
// kernel as an NVRTC program of its own, the front end's 0.045 s taken
// off: the 12-block d 512 model's tensor-core GEMM kernels 0.10-0.15 s,
// its attention kernels 0.25-0.37 s, the others 0.04 s on average; in f32
// its CUDA-core GEMM kernels about 0.09 s and its attention kernels
// 0.15-0.18 s).
double compileWeight(const std::string &source) {
  static constexpr std::pair<std::string_view, double> kTiles[] = {
      {"moec::gemmTileBf16Async<", 2},   {"moec::gemmTileBf16<", 2},
      {"moec::gemmTileTf32<", 2},        {"moec::gemmTile3xTf32<", 2},
      {"moec::attentionForwardMma<", 7}, {"moec::attentionGradQMma<", 7},
      {"moec::attentionGradKVMma<", 7},  {"moec::gemmTile<", 1.5},
      {"moec::attentionForward<", 4},    {"moec::attentionGradQ<", 4},
      {"moec::attentionGradKV<", 4}};
  double weight = 1;
  for (auto [call, extra] : kTiles)
    for (size_t at = source.find(call); at != std::string::npos;
         at = source.find(call, at + call.size()))
      weight += extra;
  return weight;
}

// Longest first: the last kernels placed are the lightest, so they even
// out what the heavy ones left uneven.
std::vector<std::vector<size_t>>
balancedBatches(const std::vector<double> &weights, size_t programs) {
  std::vector<size_t> order(weights.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return weights[a] > weights[b]; });
  std::vector<std::vector<size_t>> batches(programs);
  std::vector<double> load(programs, 0);
  for (size_t i : order) {
    size_t lightest = std::min_element(load.begin(), load.end()) - load.begin();
    batches[lightest].push_back(i);
    load[lightest] += weights[i];
  }
  return batches;
}

std::vector<CompiledKernel>
fetchOrCompile(const std::vector<const KernelDesc *> &kernels,
               const std::string &arch, unsigned jobs, bool wantPtx) {
  std::vector<CompiledKernel> results(kernels.size());
  if (kernels.empty())
    return results;
  // Load NVRTC once, up front, so that its absence is one clear error.
  Nvrtc::get();
  jobs = compileJobs(jobs);
  KernelCache &cache = KernelCache::global();

  // Hash every kernel once and take what the cache has.
  std::vector<KernelRequest> requests(kernels.size());
  std::vector<char> found(kernels.size(), 0);
  parallelFor(kernels.size(), jobs, [&](size_t i) {
    const KernelDesc &kernel = *kernels[i];
    requests[i] = KernelCache::requestAfterLibrary(
        kernelTextAfterLibrary(kernel), kernel.name, arch);
    if (std::optional<CompiledKernel> hit =
            cache.find(requests[i], arch, wantPtx)) {
      results[i] = std::move(*hit);
      found[i] = 1;
    }
  });

  // The rest in a few NVRTC programs of about equal compile time (with
  // PTX too: each kernel gets its own part of its program's module).
  std::vector<size_t> missing;
  std::vector<double> weights;
  for (size_t i = 0; i < kernels.size(); ++i)
    if (!found[i]) {
      missing.push_back(i);
      weights.push_back(compileWeight(kernels[i]->source));
    }
  size_t programs = std::min(missing.size(), jobs * kProgramsPerJob);
  std::vector<std::vector<size_t>> batches = balancedBatches(weights, programs);
  for (std::vector<size_t> &batch : batches)
    for (size_t &m : batch)
      m = missing[m];
  parallelFor(programs, jobs, [&](size_t p) {
    const std::vector<size_t> &batch = batches[p];
    std::vector<const KernelRequest *> batchRequests;
    for (size_t i : batch)
      batchRequests.push_back(&requests[i]);
    auto unitOf = [&](const std::vector<size_t> &indices) {
      std::string unit(deviceLibrarySource());
      for (size_t at : indices)
        unit += kernelTextAfterLibrary(*kernels[batch[at]]);
      return unit;
    };
    std::vector<CompiledKernel> compiled;
    try {
      compiled = cache.compileTogether(batchRequests, arch, wantPtx, unitOf);
    } catch (const Error &) {
      if (batch.size() == 1)
        throw;
      // Find the kernel at fault: alone, it fails with its own unit saved.
      for (size_t at = 0; at < batch.size(); ++at)
        compiled.push_back(cache.compile(batchRequests[at]->translationUnit(),
                                         batchRequests[at]->name, arch,
                                         wantPtx));
    }
    for (size_t at = 0; at < batch.size(); ++at)
      results[batch[at]] = std::move(compiled[at]);
  });
  return results;
}

std::vector<PrecompiledKernel>
compileKernels(const std::vector<const KernelDesc *> &kernels,
               const std::string &arch, unsigned jobs, bool mix) {
  std::vector<CompiledKernel> compiled =
      fetchOrCompile(kernels, arch, jobs, mix);
  std::vector<PrecompiledKernel> results(compiled.size());
  parallelFor(compiled.size(), compileJobs(jobs), [&](size_t i) {
    const CompiledKernel &k = compiled[i];
    results[i] = {
        kernels[i]->name, k.cacheHit,
        k.seconds,        k.usage,
        k.cubin->size(),  mix ? instructionMix(k.ptx) : InstructionMix()};
  });
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
  // Says how to compile it, for those who take the file elsewhere.
  std::string unit = fmt::format(
      "// Generated by moec from {}: the device library, then the model's "
      "kernels.\n// CUDA C++17 for sm_80 or newer: nvcc -std=c++17 "
      "-arch=sm_80 (or NVRTC with --std=c++17, as moec's cuda device "
      "does).\n",
      data.origin);
  unit += deviceLibrarySource();
  for (const auto &[name, kernel] : data.kernels)
    unit += detail::kernelTextAfterLibrary(kernel);
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

NvrtcPreload::NvrtcPreload()
    : loader([] {
        try {
          detail::cuda::Nvrtc::get();
        } catch (const Error &) {
          // Whatever needs NVRTC loads it again and reports why it cannot.
        }
      }) {}

NvrtcPreload::~NvrtcPreload() { loader.join(); }

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
