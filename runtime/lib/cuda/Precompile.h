//===- Precompile.h - compile a bundle's kernels ahead of time --*- C++ -*-===//
//
// `moec precompile` fills the kernel cache for a GPU architecture before a
// run (or on a machine without a GPU), and reports what ptxas made of each
// kernel.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CUDA_PRECOMPILE_H
#define MOEC_RUNTIME_CUDA_PRECOMPILE_H

#include "BundleData.h"
#include "Nvrtc.h"
#include "PtxasLog.h"
#include "moec/Bundle.h"

#include <cstddef>
#include <string>
#include <vector>

namespace moec::detail::cuda {

using PrecompiledKernel = moec::PrecompiledKernel;

/// `jobs`, or one per hardware thread when 0.
unsigned compileJobs(unsigned jobs);

/// A kernel's compile time relative to a row or elementwise kernel's, from
/// its source: more for each tensor-core or CUDA-core tile it calls.
double compileWeight(const std::string &source);

/// Indices of `weights` in `programs` batches of about equal total weight:
/// heaviest first, each into the lightest batch so far.
std::vector<std::vector<size_t>>
balancedBatches(const std::vector<double> &weights, size_t programs);

/// `kernels` compiled for `arch`, from the process-wide kernel cache where
/// it has them; the others are compiled `jobs` NVRTC programs at a time (0:
/// one per hardware thread), several kernels per program, or one per
/// program with `wantPtx`. Results in the order given; the first failure
/// stops the others and is rethrown.
std::vector<CompiledKernel>
fetchOrCompile(const std::vector<const KernelDesc *> &kernels,
               const std::string &arch, unsigned jobs = 0,
               bool wantPtx = false);

/// fetchOrCompile, summarised; with `mix` each kernel's instruction mix is
/// counted in its PTX.
std::vector<PrecompiledKernel>
compileKernels(const std::vector<const KernelDesc *> &kernels,
               const std::string &arch, unsigned jobs = 0, bool mix = false);

/// Compiles every kernel of `bundle` for `arch` ("sm_80", "sm_90") through
/// the process-wide kernel cache, `jobs` at a time (0: one per hardware
/// thread), and returns the results in kernel-name order; empty when the
/// bundle has no CUDA kernels. Throws moec::Error when the bundle was
/// generated against another device library, when NVRTC is unavailable, or
/// when a kernel does not compile (with NVRTC's log). With `mix` the PTX is
/// kept and each kernel's instruction mix counted.
std::vector<PrecompiledKernel> precompileBundle(const Bundle &bundle,
                                                const std::string &arch,
                                                unsigned jobs = 0,
                                                bool mix = false);

} // namespace moec::detail::cuda

#endif // MOEC_RUNTIME_CUDA_PRECOMPILE_H
