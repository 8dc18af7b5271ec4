//===- FakeCublasLt.cpp - a host stand-in for libcublasLt -----------------===//
//
// Computes cublasLtMatmul as cuBLASLt documents it (column-major operands,
// op(A) and op(B) by TRANSA/TRANSB, D = alpha op(A) op(B) + beta C, plus
// the bias along D's rows with CUBLASLT_EPILOGUE_BIAS) on the fake
// driver's "device" memory, which is host memory. The cuda device's
// row-major mapping is then checked by values, without a GPU. Loaded
// through $MOEC_CUBLASLT_LIBRARY; tests steer it through fakeCublasLtState().
//
//===----------------------------------------------------------------------===//

#include "FakeCublasLt.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

using Status = int;
constexpr Status kSuccess = 0, kInvalidValue = 7, kNotSupported = 15;
constexpr int kTypeF32 = 0, kTypeF64 = 1, kTypeBF16 = 14;

moec::fake::CublasLtState state;

struct Desc {
  int compute = 0, scale = 0;
  int transA = 0, transB = 0;
  uint32_t epilogue = 1;
  const void *bias = nullptr;
  int biasType = -1;
};

struct Layout {
  int type = 0;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
};

struct Preference {
  uint64_t workspace = 0;
};

double read(const void *p, int type, int64_t i) {
  switch (type) {
  case kTypeF64:
    return static_cast<const double *>(p)[i];
  case kTypeBF16: {
    uint32_t bits = uint32_t(static_cast<const uint16_t *>(p)[i]) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  case kTypeF32:
  default:
    return static_cast<const float *>(p)[i];
  }
}

void write(void *p, int type, int64_t i, double v) {
  switch (type) {
  case kTypeF64:
    static_cast<double *>(p)[i] = v;
    return;
  case kTypeBF16: {
    float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bits += 0x7fff + ((bits >> 16) & 1); // round to nearest even
    static_cast<uint16_t *>(p)[i] = static_cast<uint16_t>(bits >> 16);
    return;
  }
  default:
    static_cast<float *>(p)[i] = static_cast<float>(v);
  }
}

/// Element (r, c) of op(M) for a column-major M.
double element(const void *p, const Layout &l, int op, uint64_t r, uint64_t c) {
  if (op == 1)
    std::swap(r, c);
  return read(p, l.type, int64_t(c) * l.ld + int64_t(r));
}

} // namespace

extern "C" {

moec::fake::CublasLtState *fakeCublasLtState() { return &state; }

size_t cublasLtGetVersion() { return 130001; }

const char *cublasLtGetStatusString(Status status) {
  return status == kNotSupported ? "CUBLAS_STATUS_NOT_SUPPORTED"
                                 : "CUBLAS_STATUS_INVALID_VALUE";
}

Status cublasLtCreate(void **handle) {
  if (state.failCreate)
    return 1; // CUBLAS_STATUS_NOT_INITIALIZED
  static int context;
  *handle = &context;
  ++state.handles;
  return kSuccess;
}
Status cublasLtDestroy(void *) {
  --state.handles;
  return kSuccess;
}

Status cublasLtMatmulDescCreate(Desc **desc, int compute, int scale) {
  *desc = new Desc{compute, scale};
  ++state.liveObjects;
  return kSuccess;
}
Status cublasLtMatmulDescDestroy(Desc *desc) {
  delete desc;
  --state.liveObjects;
  return kSuccess;
}
Status cublasLtMatmulDescSetAttribute(Desc *desc, int attribute,
                                      const void *value, size_t bytes) {
  switch (attribute) {
  case 3:  // TRANSA
  case 4:  // TRANSB
  case 26: // BIAS_DATA_TYPE
    if (bytes != sizeof(int))
      return kInvalidValue;
    std::memcpy(attribute == 3   ? &desc->transA
                : attribute == 4 ? &desc->transB
                                 : &desc->biasType,
                value, bytes);
    return kSuccess;
  case 7: // EPILOGUE
    if (bytes != sizeof(uint32_t))
      return kInvalidValue;
    std::memcpy(&desc->epilogue, value, bytes);
    return kSuccess;
  case 8: // BIAS_POINTER
    if (bytes != sizeof(void *))
      return kInvalidValue;
    std::memcpy(&desc->bias, value, bytes);
    return kSuccess;
  default:
    return kInvalidValue;
  }
}

Status cublasLtMatrixLayoutCreate(Layout **layout, int type, uint64_t rows,
                                  uint64_t cols, int64_t ld) {
  // cuBLASLt refuses a leading dimension shorter than a column.
  if (ld < int64_t(rows))
    return kInvalidValue;
  *layout = new Layout{type, rows, cols, ld};
  ++state.liveObjects;
  return kSuccess;
}
Status cublasLtMatrixLayoutDestroy(Layout *layout) {
  delete layout;
  --state.liveObjects;
  return kSuccess;
}

Status cublasLtMatmulPreferenceCreate(Preference **preference) {
  *preference = new Preference();
  ++state.liveObjects;
  return kSuccess;
}
Status cublasLtMatmulPreferenceDestroy(Preference *preference) {
  delete preference;
  --state.liveObjects;
  return kSuccess;
}
Status cublasLtMatmulPreferenceSetAttribute(Preference *preference,
                                            int attribute, const void *value,
                                            size_t bytes) {
  if (attribute == 1 && bytes == sizeof(uint64_t))
    std::memcpy(&preference->workspace, value, bytes);
  else if (!(attribute >= 5 && attribute <= 8 && bytes == sizeof(uint32_t)))
    return kInvalidValue;
  return kSuccess;
}

struct HeuristicResult {
  uint64_t algo[8];
  size_t workspaceSize;
  Status state;
  float wavesCount;
  int reserved[4];
};

Status cublasLtMatmulAlgoGetHeuristic(void *, Desc *desc, Layout *, Layout *,
                                      Layout *, Layout *d, Preference *, int,
                                      HeuristicResult *result, int *found) {
  ++state.heuristicQueries;
  if ((desc->epilogue & 4) != 0 && !desc->bias)
    ++state.queriesWithoutBiasPointer;
  *found = 0;
  if (state.noAlgorithm)
    return kNotSupported;
  std::memset(result, 0, sizeof(*result));
  result->workspaceSize = 1024;
  result->state = kSuccess;
  result->wavesCount = 1;
  *found = d->rows > 0 ? 1 : 0;
  return kSuccess;
}

Status cublasLtMatmul(void *, Desc *desc, const void *alpha, const void *A,
                      Layout *la, const void *B, Layout *lb, const void *beta,
                      const void *C, Layout *lc, void *D, Layout *ld,
                      const void *, void *workspace, size_t workspaceBytes,
                      void *) {
  if (state.failMatmul)
    return kNotSupported;
  if (!workspace || workspaceBytes < 1024)
    return kInvalidValue;
  bool f64 = desc->scale == kTypeF64;
  double a = f64 ? *static_cast<const double *>(alpha)
                 : *static_cast<const float *>(alpha);
  double b = f64 ? *static_cast<const double *>(beta)
                 : *static_cast<const float *>(beta);
  uint64_t m = ld->rows, n = ld->cols;
  uint64_t k = desc->transA ? la->rows : la->cols;
  uint64_t kb = desc->transB ? lb->cols : lb->rows;
  uint64_t ma = desc->transA ? la->cols : la->rows;
  uint64_t nb = desc->transB ? lb->rows : lb->cols;
  if (k != kb || ma != m || nb != n || lc->rows != m || lc->cols != n)
    return kInvalidValue;
  bool bias = (desc->epilogue & 4) != 0;
  if (bias && (!desc->bias || desc->biasType != ld->type))
    return kInvalidValue;
  ++state.matmuls;
  state.lastM = m;
  state.lastN = n;
  state.lastK = k;
  std::vector<double> out(m * n);
  for (uint64_t j = 0; j < n; ++j)
    for (uint64_t i = 0; i < m; ++i) {
      double sum = 0;
      for (uint64_t l = 0; l < k; ++l)
        sum += element(A, *la, desc->transA, i, l) *
               element(B, *lb, desc->transB, l, j);
      double v = a * sum;
      if (b != 0)
        v += b * read(C, lc->type, int64_t(j) * lc->ld + int64_t(i));
      if (bias)
        v += read(desc->bias, desc->biasType, int64_t(i));
      out[j * m + i] = v;
    }
  for (uint64_t j = 0; j < n; ++j)
    for (uint64_t i = 0; i < m; ++i)
      write(D, ld->type, int64_t(j) * ld->ld + int64_t(i), out[j * m + i]);
  return kSuccess;
}

} // extern "C"
