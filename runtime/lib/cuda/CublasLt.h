//===- CublasLt.h - dense GEMMs through cuBLASLt ----------------*- C++ -*-===//
//
// The plan sends a dense GEMM that fuses nothing to cuBLASLt (a launch's
// GemmDesc). Like the driver, the library is opened with dlopen at first
// use, so moec builds and runs without it: when it is missing the launch's
// own kernel computes the GEMM. The types below mirror cublasLt.h (CUDA 12
// and 13) for exactly what moec uses.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CUDA_CUBLASLT_H
#define MOEC_RUNTIME_CUDA_CUBLASLT_H

#include "BundleData.h"
#include "CudaDriver.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace moec::detail::cuda {

using cublasStatus = int;
using cublasLtHandle = struct CublasLtContext *;
using cublasLtMatmulDesc = struct CublasLtMatmulDescOpaque *;
using cublasLtMatrixLayout = struct CublasLtMatrixLayoutOpaque *;
using cublasLtMatmulPreference = struct CublasLtMatmulPreferenceOpaque *;

struct cublasLtMatmulAlgo {
  uint64_t data[8];
};

struct cublasLtMatmulHeuristicResult {
  cublasLtMatmulAlgo algo;
  size_t workspaceSize;
  cublasStatus state;
  float wavesCount;
  int reserved[4];
};

/// The cuBLASLt entry points moec uses, each named after its function.
class CublasLt {
public:
  /// The library, loaded at first use from $MOEC_CUBLASLT_LIBRARY if set,
  /// else libcublasLt.so.13 or .12 (those the driver runs first: see
  /// ToolkitLibraries.h) on the library path or in /usr/local/cuda/lib64;
  /// null when $MOEC_CUBLASLT is 0 or none loads
  /// (`why` then says which). Thread-safe; a failure is remembered.
  static const CublasLt *get(std::string *why = nullptr);
  /// Opens `library` and resolves every entry point; throws moec::Error
  /// when it cannot be opened or lacks a function. For get() and tests.
  static std::unique_ptr<CublasLt> open(const std::string &library);
  ~CublasLt();

  const std::string &library() const { return libraryPath; }
  /// "cublas error N: text" for a status.
  std::string statusText(cublasStatus status) const;

  size_t (*cublasLtGetVersion)() = nullptr;
  /// Optional (older libraries lack it).
  const char *(*cublasLtGetStatusString)(cublasStatus) = nullptr;
  cublasStatus (*cublasLtCreate)(cublasLtHandle *) = nullptr;
  cublasStatus (*cublasLtDestroy)(cublasLtHandle) = nullptr;
  cublasStatus (*cublasLtMatmulDescCreate)(cublasLtMatmulDesc *, int,
                                           int) = nullptr;
  cublasStatus (*cublasLtMatmulDescDestroy)(cublasLtMatmulDesc) = nullptr;
  cublasStatus (*cublasLtMatmulDescSetAttribute)(cublasLtMatmulDesc, int,
                                                 const void *,
                                                 size_t) = nullptr;
  cublasStatus (*cublasLtMatrixLayoutCreate)(cublasLtMatrixLayout *, int,
                                             uint64_t, uint64_t,
                                             int64_t) = nullptr;
  cublasStatus (*cublasLtMatrixLayoutDestroy)(cublasLtMatrixLayout) = nullptr;
  cublasStatus (*cublasLtMatmulPreferenceCreate)(cublasLtMatmulPreference *) =
      nullptr;
  cublasStatus (*cublasLtMatmulPreferenceDestroy)(cublasLtMatmulPreference) =
      nullptr;
  cublasStatus (*cublasLtMatmulPreferenceSetAttribute)(cublasLtMatmulPreference,
                                                       int, const void *,
                                                       size_t) = nullptr;
  cublasStatus (*cublasLtMatmulAlgoGetHeuristic)(
      cublasLtHandle, cublasLtMatmulDesc, cublasLtMatrixLayout,
      cublasLtMatrixLayout, cublasLtMatrixLayout, cublasLtMatrixLayout,
      cublasLtMatmulPreference, int, cublasLtMatmulHeuristicResult *,
      int *) = nullptr;
  cublasStatus (*cublasLtMatmul)(
      cublasLtHandle, cublasLtMatmulDesc, const void *, const void *,
      cublasLtMatrixLayout, const void *, cublasLtMatrixLayout, const void *,
      const void *, cublasLtMatrixLayout, void *, cublasLtMatrixLayout,
      const cublasLtMatmulAlgo *, void *, size_t, CUstream) = nullptr;

private:
  CublasLt() = default;
  void *handle = nullptr;
  std::string libraryPath;
};

/// The sizes and storage of one library GEMM at run time.
struct GemmCall {
  int64_t m = 0, n = 0, k = 0;
  DType in = DType::F32, out = DType::F32;
  const void *a = nullptr, *b = nullptr, *bias = nullptr;
  void *d = nullptr;
  /// How many elements each buffer holds.
  int64_t aElements = 0, bElements = 0, dElements = 0, biasElements = 0;
};

/// What of `call` would reach past its buffers or read rows shorter than
/// they are wide, as `gemm` lays them out ("" when nothing): a bundle whose
/// GEMM record disagrees with its buffers must not make cuBLASLt touch
/// memory the kernel would not.
std::string gemmOverrun(const GemmDesc &gemm, const GemmCall &call);

/// One cuBLASLt handle and workspace of a cuda device, and the plan
/// (descriptors and the heuristic's algorithm) of every GEMM shape it ran.
/// Not thread-safe, like the device.
class GemmRunner {
public:
  /// The workspace every plan may use (what cuBLAS asks for on Hopper).
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;

  GemmRunner(const CublasLt &library, const CudaDriver &driver);
  ~GemmRunner();
  GemmRunner(const GemmRunner &) = delete;
  GemmRunner &operator=(const GemmRunner &) = delete;

  /// Enqueues `call` as `gemm` describes it on `stream`. False, having
  /// done nothing, when cuBLASLt offers no algorithm for it: the caller
  /// then launches the kernel. Throws moec::Error when cuBLASLt fails.
  bool run(const GemmDesc &gemm, const GemmCall &call, CUstream stream);

  /// How many distinct shapes have a plan.
  size_t plans() const { return cache.size(); }

private:
  struct Plan;
  /// What a plan depends on: shape, storage, types, bias, alignments.
  struct PlanKey {
    int64_t m, n, k, lda, ldb;
    bool aColMajor, bColMajor, bias;
    DType in, out;
    std::string compute;
    uint32_t alignA, alignB, alignD;
    bool operator<(const PlanKey &o) const;
  };
  Plan &planFor(const GemmDesc &gemm, const GemmCall &call);
  void check(cublasStatus status, const char *what) const;

  const CublasLt &lib;
  const CudaDriver &driver;
  cublasLtHandle handle = nullptr;
  CUdeviceptr workspace = 0;
  std::map<PlanKey, std::unique_ptr<Plan>> cache;
};

} // namespace moec::detail::cuda

#endif // MOEC_RUNTIME_CUDA_CUBLASLT_H
