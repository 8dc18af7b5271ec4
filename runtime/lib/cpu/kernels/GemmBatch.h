//===- GemmBatch.h - independent gemms run as one parallel loop -*- C++ -*-===//
//
// The routed kernels run one gemm per expert. Run one after another, each
// gemm forks its own loop over a few blocks of C, every call repacks its
// whole B operand, and an expert with few rows leaves cores idle. A batch
// cuts every gemm of a phase into fixed blocks of C and runs all the blocks
// in one dynamically scheduled loop. Each element of C is still computed by
// one BLAS call whose operands do not depend on the thread count, so the
// results do not either.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CPU_KERNELS_GEMMBATCH_H
#define MOEC_RUNTIME_CPU_KERNELS_GEMMBATCH_H

#include <cstdint>
#include <vector>

namespace moec::cpu {

/// Row-major C = alpha * op(A) * op(B) + beta * C, as gemm() takes it.
template <typename T> struct GemmCall {
  bool transA, transB;
  int64_t m, n, k;
  T alpha;
  const T *a;
  int64_t lda;
  const T *b;
  int64_t ldb;
  T beta;
  T *c;
  int64_t ldc;
};

/// Rows (m >= n) or columns (m < n) of C per BLAS call in a batch. Four
/// times gemm()'s blocks: a batch has many gemms to share the cores, and
/// each call repacks its whole other operand (at d 256, E 8 the expert FFN
/// gradient took about 5% less CPU time with 256 than with 64).
constexpr int64_t kGemmBatchBlock = 256;

/// Gemms whose outputs do not overlap, collected and then run together.
template <typename T> class GemmBatch {
public:
  void add(const GemmCall<T> &call) { calls.push_back(call); }
  void add(bool transA, bool transB, int64_t m, int64_t n, int64_t k, T alpha,
           const T *a, int64_t lda, const T *b, int64_t ldb, T beta, T *c,
           int64_t ldc) {
    add({transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc});
  }
  /// Runs every gemm added (k = 0 gives beta * C, or 0 when beta is 0) and
  /// empties the batch.
  void run();

private:
  std::vector<GemmCall<T>> calls;
};

extern template class GemmBatch<float>;
extern template class GemmBatch<double>;

} // namespace moec::cpu

#endif // MOEC_RUNTIME_CPU_KERNELS_GEMMBATCH_H
