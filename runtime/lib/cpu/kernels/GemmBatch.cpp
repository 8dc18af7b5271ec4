//===- GemmBatch.cpp - independent gemms run as one parallel loop ---------===//

#include "GemmBatch.h"

#include "Common.h"

#include <algorithm>

namespace moec::cpu {

namespace {

/// One BLAS call of a batch: block `block` of call `call`.
struct BlockTask {
  int32_t call;
  int32_t block;
};

int64_t blockCount(int64_t size, int64_t block) {
  return (size + block - 1) / block;
}

} // namespace

template <typename T> void GemmBatch<T>::run() {
  const int64_t block = kGemmBatchBlock;
  std::vector<BlockTask> tasks;
  double work = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    const GemmCall<T> &g = calls[i];
    if (g.m == 0 || g.n == 0)
      continue;
    // k = 0 scales C by beta in one task; otherwise blocks along the
    // longer side of C.
    int64_t blocks = g.k == 0 ? 1 : blockCount(std::max(g.m, g.n), block);
    for (int64_t b = 0; b < blocks; ++b)
      tasks.push_back({static_cast<int32_t>(i), static_cast<int32_t>(b)});
    work += static_cast<double>(g.m) * g.n * std::max<int64_t>(1, g.k);
  }
  bool parallel = tasks.size() > 1 && work >= kMinParallelWork;
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (size_t t = 0; t < tasks.size(); ++t) {
    const GemmCall<T> &g = calls[tasks[t].call];
    if (g.k == 0) {
      for (int64_t i = 0; i < g.m; ++i)
        for (int64_t j = 0; j < g.n; ++j)
          g.c[i * g.ldc + j] =
              g.beta == T(0) ? T(0) : g.beta * g.c[i * g.ldc + j];
      continue;
    }
    int64_t start = tasks[t].block * block;
    if (g.m >= g.n) {
      int64_t rows = std::min(block, g.m - start);
      const T *a = g.transA ? g.a + start : g.a + start * g.lda;
      gemmSerial(g.transA, g.transB, rows, g.n, g.k, g.alpha, a, g.lda, g.b,
                 g.ldb, g.beta, g.c + start * g.ldc, g.ldc);
    } else {
      int64_t cols = std::min(block, g.n - start);
      const T *b = g.transB ? g.b + start * g.ldb : g.b + start;
      gemmSerial(g.transA, g.transB, g.m, cols, g.k, g.alpha, g.a, g.lda, b,
                 g.ldb, g.beta, g.c + start, g.ldc);
    }
  }
  calls.clear();
}

template class GemmBatch<float>;
template class GemmBatch<double>;

} // namespace moec::cpu
