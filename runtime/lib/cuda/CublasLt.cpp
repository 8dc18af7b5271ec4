//===- CublasLt.cpp - dense GEMMs through cuBLASLt, loaded at run time ----===//
//
// cuBLASLt is column-major and moec row-major: D = A B (row-major, m x n)
// is computed as D^T = B^T A^T, an n x m column-major product whose
// operands are B's and A's memory read as column-major matrices, each
// transposed or not by its storage order. The bias then runs along D^T's
// rows, which is what CUBLASLT_EPILOGUE_BIAS broadcasts.
//
//===----------------------------------------------------------------------===//

#include "CublasLt.h"
#include "ToolkitLibraries.h"
#include "moec/Error.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fmt/format.h>
#include <mutex>
#include <tuple>
#include <vector>

namespace moec::detail::cuda {

namespace {

// cublas_api.h, library_types.h and cublasLt.h (CUDA 12 and 13).
constexpr cublasStatus kSuccess = 0;
constexpr int kOpN = 0, kOpT = 1;
constexpr int kComputeF32 = 68, kComputeF32FastTf32 = 77, kComputeF64 = 70;
constexpr int kTypeF32 = 0, kTypeF64 = 1, kTypeBF16 = 14;
constexpr int kDescTransA = 3, kDescTransB = 4, kDescEpilogue = 7,
              kDescBiasPointer = 8, kDescBiasDataType = 26;
constexpr uint32_t kEpilogueDefault = 1, kEpilogueBias = 4;
constexpr int kPrefMaxWorkspace = 1, kPrefAlignA = 5, kPrefAlignB = 6,
              kPrefAlignC = 7, kPrefAlignD = 8;

int cudaTypeOf(DType t) {
  switch (t) {
  case DType::F64:
    return kTypeF64;
  case DType::BF16:
    return kTypeBF16;
  default:
    return kTypeF32;
  }
}

/// The largest power of two (up to 256) that divides the address: what
/// cuBLASLt may assume of it.
uint32_t alignmentOf(const void *p) {
  auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && address % a != 0)
    a /= 2;
  return a;
}

template <typename Fn>
void resolve(void *handle, const std::string &path, const char *name, Fn &fn,
             bool required = true) {
  fn = reinterpret_cast<Fn>(::dlsym(handle, name));
  if (!fn && required)
    throw Error(fmt::format("'{}' is not a usable cuBLASLt: it has no {} "
                            "(moec needs cuBLASLt of CUDA 12 or 13)",
                            path, name));
}

} // namespace

CublasLt::~CublasLt() = default; // the library stays loaded

std::unique_ptr<CublasLt> CublasLt::open(const std::string &library) {
  void *handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *error = ::dlerror();
    throw Error(fmt::format("cuBLASLt ({}) could not be loaded: {}", library,
                            error ? error : "unknown error"));
  }
  std::unique_ptr<CublasLt> lib(new CublasLt());
  lib->handle = handle;
  lib->libraryPath = library;
  try {
    CublasLt &l = *lib;
    resolve(handle, library, "cublasLtGetVersion", l.cublasLtGetVersion);
    resolve(handle, library, "cublasLtGetStatusString",
            l.cublasLtGetStatusString, /*required=*/false);
    resolve(handle, library, "cublasLtCreate", l.cublasLtCreate);
    resolve(handle, library, "cublasLtDestroy", l.cublasLtDestroy);
    resolve(handle, library, "cublasLtMatmulDescCreate",
            l.cublasLtMatmulDescCreate);
    resolve(handle, library, "cublasLtMatmulDescDestroy",
            l.cublasLtMatmulDescDestroy);
    resolve(handle, library, "cublasLtMatmulDescSetAttribute",
            l.cublasLtMatmulDescSetAttribute);
    resolve(handle, library, "cublasLtMatrixLayoutCreate",
            l.cublasLtMatrixLayoutCreate);
    resolve(handle, library, "cublasLtMatrixLayoutDestroy",
            l.cublasLtMatrixLayoutDestroy);
    resolve(handle, library, "cublasLtMatmulPreferenceCreate",
            l.cublasLtMatmulPreferenceCreate);
    resolve(handle, library, "cublasLtMatmulPreferenceDestroy",
            l.cublasLtMatmulPreferenceDestroy);
    resolve(handle, library, "cublasLtMatmulPreferenceSetAttribute",
            l.cublasLtMatmulPreferenceSetAttribute);
    resolve(handle, library, "cublasLtMatmulAlgoGetHeuristic",
            l.cublasLtMatmulAlgoGetHeuristic);
    resolve(handle, library, "cublasLtMatmul", l.cublasLtMatmul);
  } catch (...) {
    ::dlclose(handle);
    throw;
  }
  Dl_info info;
  if (::dladdr(reinterpret_cast<void *>(lib->cublasLtCreate), &info) &&
      info.dli_fname)
    lib->libraryPath = info.dli_fname;
  return lib;
}

std::string CublasLt::statusText(cublasStatus status) const {
  const char *text =
      cublasLtGetStatusString ? cublasLtGetStatusString(status) : nullptr;
  return text ? fmt::format("{} ({})", text, status)
              : fmt::format("cuBLAS status {}", status);
}

const CublasLt *CublasLt::get(std::string *why) {
  static std::mutex mutex;
  static std::unique_ptr<CublasLt> instance;
  static std::string failure;
  static bool tried = false;
  std::lock_guard<std::mutex> lock(mutex);
  if (!tried) {
    tried = true;
    const char *enabled = std::getenv("MOEC_CUBLASLT");
    const char *override = std::getenv("MOEC_CUBLASLT_LIBRARY");
    std::vector<std::string> candidates;
    if (enabled && std::strcmp(enabled, "0") == 0)
      failure = "turned off by MOEC_CUBLASLT=0";
    else if (override && *override)
      candidates = {override};
    else
      candidates =
          toolkitLibraryCandidates("libcublasLt.so", installedDriverCudaMajor(),
                                   /*unversioned=*/false);
    std::vector<std::string> failures;
    for (const std::string &candidate : candidates) {
      try {
        instance = open(candidate);
        break;
      } catch (const Error &e) {
        failures.push_back(e.what());
      }
    }
    if (!instance && failure.empty())
      failure = fmt::format("{}", fmt::join(failures, "; "));
  }
  if (!instance && why)
    *why = failure;
  return instance.get();
}

//===----------------------------------------------------------------------===//
// GemmRunner
//===----------------------------------------------------------------------===//

struct GemmRunner::Plan {
  const CublasLt &lib;
  cublasLtMatmulDesc desc = nullptr;
  cublasLtMatrixLayout a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo algo{};
  size_t workspaceBytes = 0;
  bool usable = false;

  explicit Plan(const CublasLt &lib) : lib(lib) {}
  ~Plan() {
    for (cublasLtMatrixLayout layout : {a, b, d})
      if (layout)
        lib.cublasLtMatrixLayoutDestroy(layout);
    if (desc)
      lib.cublasLtMatmulDescDestroy(desc);
  }
};

GemmRunner::GemmRunner(const CublasLt &library, const CudaDriver &driver)
    : lib(library), driver(driver) {
  if (cublasStatus status = lib.cublasLtCreate(&handle); status != kSuccess)
    throw Error(
        fmt::format("cublasLtCreate failed: {}", lib.statusText(status)));
  CUresult result = driver.cuMemAlloc(&workspace, kWorkspaceBytes);
  if (result != CUDA_SUCCESS) {
    lib.cublasLtDestroy(handle);
    throw Error(fmt::format("cannot allocate cuBLASLt's {} MiB workspace on "
                            "the GPU: cuMemAlloc failed: {}; set "
                            "MOEC_CUBLASLT=0 to use moec's own GEMM kernels",
                            kWorkspaceBytes >> 20, driver.errorText(result)));
  }
}

GemmRunner::~GemmRunner() {
  cache.clear();
  driver.cuMemFree(workspace);
  lib.cublasLtDestroy(handle);
}

void GemmRunner::check(cublasStatus status, const char *what) const {
  if (status != kSuccess)
    throw Error(fmt::format("{} failed: {}; set MOEC_CUBLASLT=0 to use "
                            "moec's own GEMM kernels",
                            what, lib.statusText(status)));
}

bool GemmRunner::PlanKey::operator<(const PlanKey &o) const {
  auto tie = [](const PlanKey &p) {
    return std::tie(p.m, p.n, p.k, p.lda, p.ldb, p.aColMajor, p.bColMajor,
                    p.bias, p.in, p.out, p.compute, p.alignA, p.alignB,
                    p.alignD);
  };
  return tie(*this) < tie(o);
}

std::string gemmOverrun(const GemmDesc &g, const GemmCall &c) {
  // An operand of `rows` x `cols` logical elements, stored `outer` lines of
  // `inner` elements `ld` apart, reaches (outer - 1) * ld + inner elements.
  auto check = [](const char *name, int64_t outer, int64_t inner, int64_t ld,
                  int64_t have) -> std::string {
    if (outer <= 0 || inner <= 0)
      return "";
    if (ld < inner)
      return fmt::format("{} has lines of {} elements {} apart", name, inner,
                         ld);
    int64_t reach = 0;
    if (__builtin_mul_overflow(outer - 1, ld, &reach) ||
        __builtin_add_overflow(reach, inner, &reach) || reach > have)
      return fmt::format("{} ({} lines of {} elements, {} apart) reaches "
                         "past its {}-element buffer",
                         name, outer, inner, ld, have);
    return "";
  };
  std::string why = g.a.colMajor
                        ? check("A", c.k, c.m, g.a.ld, c.aElements)
                        : check("A", c.m, c.k, g.a.ld, c.aElements);
  if (why.empty())
    why = g.b.colMajor ? check("B", c.n, c.k, g.b.ld, c.bElements)
                       : check("B", c.k, c.n, g.b.ld, c.bElements);
  if (why.empty())
    why = check("D", c.m, c.n, c.n, c.dElements);
  if (why.empty() && c.bias)
    why = check("the bias", 1, c.n, c.n, c.biasElements);
  return why;
}

GemmRunner::Plan &GemmRunner::planFor(const GemmDesc &g, const GemmCall &c) {
  uint32_t alignA = alignmentOf(c.a), alignB = alignmentOf(c.b),
           alignD = alignmentOf(c.d);
  PlanKey key{c.m,          c.n,         c.k,           g.a.ld, g.b.ld,
              g.a.colMajor, g.b.colMajor, c.bias != nullptr, c.in,   c.out,
              g.compute,    alignA,      alignB,        alignD};
  std::unique_ptr<Plan> &slot = cache[key];
  if (slot)
    return *slot;
  slot = std::make_unique<Plan>(lib);
  Plan &plan = *slot;

  bool f64 = g.compute == "f64";
  int compute = f64                   ? kComputeF64
                : g.compute == "tf32" ? kComputeF32FastTf32
                                      : kComputeF32;
  check(lib.cublasLtMatmulDescCreate(&plan.desc, compute,
                                     f64 ? kTypeF64 : kTypeF32),
        "cublasLtMatmulDescCreate");
  // cuBLASLt's A is moec's B and its B is moec's A (see the top).
  int transA = g.b.colMajor ? kOpT : kOpN, transB = g.a.colMajor ? kOpT : kOpN;
  uint32_t epilogue = c.bias ? kEpilogueBias : kEpilogueDefault;
  auto set = [&](int attribute, const void *value, size_t bytes) {
    check(
        lib.cublasLtMatmulDescSetAttribute(plan.desc, attribute, value, bytes),
        "cublasLtMatmulDescSetAttribute");
  };
  set(kDescTransA, &transA, sizeof(transA));
  set(kDescTransB, &transB, sizeof(transB));
  set(kDescEpilogue, &epilogue, sizeof(epilogue));
  if (c.bias) {
    // The heuristic sees the whole description; run() sets each call's
    // own pointer.
    int biasType = cudaTypeOf(c.out);
    set(kDescBiasDataType, &biasType, sizeof(biasType));
    set(kDescBiasPointer, &c.bias, sizeof(c.bias));
  }
  auto layout = [&](cublasLtMatrixLayout &out, DType type, int64_t rows,
                    int64_t cols, int64_t ld) {
    check(lib.cublasLtMatrixLayoutCreate(&out, cudaTypeOf(type), uint64_t(rows),
                                         uint64_t(cols), ld),
          "cublasLtMatrixLayoutCreate");
  };
  if (g.b.colMajor)
    layout(plan.a, c.in, c.k, c.n, g.b.ld);
  else
    layout(plan.a, c.in, c.n, c.k, g.b.ld);
  if (g.a.colMajor)
    layout(plan.b, c.in, c.m, c.k, g.a.ld);
  else
    layout(plan.b, c.in, c.k, c.m, g.a.ld);
  layout(plan.d, c.out, c.n, c.m, c.n);

  cublasLtMatmulPreference preference = nullptr;
  check(lib.cublasLtMatmulPreferenceCreate(&preference),
        "cublasLtMatmulPreferenceCreate");
  cublasLtMatmulHeuristicResult result{};
  int found = 0;
  cublasStatus status = kSuccess;
  {
    uint64_t workspaceBytes = kWorkspaceBytes;
    const std::pair<int, uint32_t> alignments[] = {{kPrefAlignA, alignB},
                                                   {kPrefAlignB, alignA},
                                                   {kPrefAlignC, alignD},
                                                   {kPrefAlignD, alignD}};
    status = lib.cublasLtMatmulPreferenceSetAttribute(
        preference, kPrefMaxWorkspace, &workspaceBytes, sizeof(workspaceBytes));
    for (auto [attribute, value] : alignments)
      if (status == kSuccess)
        status = lib.cublasLtMatmulPreferenceSetAttribute(
            preference, attribute, &value, sizeof(value));
    if (status == kSuccess)
      status = lib.cublasLtMatmulAlgoGetHeuristic(
          handle, plan.desc, plan.a, plan.b, plan.d, plan.d, preference, 1,
          &result, &found);
  }
  lib.cublasLtMatmulPreferenceDestroy(preference);
  // No algorithm for this shape is not an error: the kernel computes it.
  plan.usable = status == kSuccess && found > 0 && result.state == kSuccess &&
                result.workspaceSize <= kWorkspaceBytes;
  plan.algo = result.algo;
  plan.workspaceBytes = result.workspaceSize;
  return plan;
}

bool GemmRunner::run(const GemmDesc &gemm, const GemmCall &call,
                     CUstream stream) {
  Plan &plan = planFor(gemm, call);
  if (!plan.usable)
    return false;
  if (call.bias)
    check(lib.cublasLtMatmulDescSetAttribute(plan.desc, kDescBiasPointer,
                                             &call.bias, sizeof(call.bias)),
          "cublasLtMatmulDescSetAttribute");
  const double oneF64 = 1, zeroF64 = 0;
  const float oneF32 = 1, zeroF32 = 0;
  bool f64 = gemm.compute == "f64";
  const void *alpha = f64 ? static_cast<const void *>(&oneF64) : &oneF32;
  const void *beta = f64 ? static_cast<const void *>(&zeroF64) : &zeroF32;
  check(lib.cublasLtMatmul(handle, plan.desc, alpha, call.b, plan.a, call.a,
                           plan.b, beta, call.d, plan.d, call.d, plan.d,
                           &plan.algo, reinterpret_cast<void *>(workspace),
                           plan.workspaceBytes, stream),
        "cublasLtMatmul");
  return true;
}

} // namespace moec::detail::cuda
