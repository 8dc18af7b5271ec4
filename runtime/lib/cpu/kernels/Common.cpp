//===- Common.cpp - helpers shared by the cpu kernels ---------------------===//

#include "Common.h"

#include <algorithm>
#include <cblas.h>
#include <climits>
#include <cstdlib>
#include <fmt/format.h>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace moec::cpu {

void checkArity(const KernelContext &ctx, size_t minIn, size_t maxIn,
                size_t minOut, size_t maxOut) {
  size_t nIn = ctx.inputs.size(), nOut = ctx.outputs.size();
  if (nIn < minIn || nIn > maxIn)
    ctx.fail(fmt::format("expected {} operands, the plan step has {}",
                         minIn == maxIn ? fmt::format("{}", minIn)
                                        : fmt::format("{} to {}", minIn, maxIn),
                         nIn));
  if (nOut < minOut || nOut > maxOut)
    ctx.fail(fmt::format("expected {} results, the plan step has {}",
                         minOut == maxOut
                             ? fmt::format("{}", minOut)
                             : fmt::format("{} to {}", minOut, maxOut),
                         nOut));
}

const TensorView &requireInput(const KernelContext &ctx, size_t i,
                               std::string_view name) {
  const TensorView &view = ctx.in(i);
  if (!view.present())
    ctx.fail(fmt::format("operand #{} ({}) has no data", i, name));
  return view;
}

void expectDType(const KernelContext &ctx, const TensorView &view, DType dtype,
                 std::string_view name) {
  if (view.dtype != dtype)
    ctx.fail(fmt::format("{} must be {}, got {}", name, dtypeName(dtype),
                         dtypeName(view.dtype)));
}

void expectShape(const KernelContext &ctx, const TensorView &view,
                 const Shape &shape, std::string_view name) {
  if (view.shape != shape)
    ctx.fail(fmt::format("{} must have shape {}, got {}", name,
                         shapeString(shape), shapeString(view.shape)));
}

void expectRank(const KernelContext &ctx, const TensorView &view, int64_t rank,
                std::string_view name) {
  if (view.rank() != rank)
    ctx.fail(fmt::format("{} must have rank {}, got shape {}", name, rank,
                         shapeString(view.shape)));
}

RowShape rowShape(const TensorView &view) {
  if (view.rank() == 0)
    return {1, 1};
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < view.shape.size(); ++i)
    rows *= view.shape[i];
  return {rows, view.shape.back()};
}

void expectRows(const KernelContext &ctx, const TensorView &view, int64_t rows,
                int64_t width, DType dtype, std::string_view name) {
  if (!view.present())
    return;
  expectDType(ctx, view, dtype, name);
  RowShape rs = rowShape(view);
  if (view.rank() == 0 || rs.rows != rows || rs.width != width)
    ctx.fail(fmt::format("{} must be [..., {}] with {} rows, got shape {}",
                         name, width, rows, shapeString(view.shape)));
}

void expectNumel(const KernelContext &ctx, const TensorView &view,
                 int64_t count, DType dtype, std::string_view name) {
  if (!view.present())
    return;
  expectDType(ctx, view, dtype, name);
  if (view.numel() != count)
    ctx.fail(fmt::format("{} must have {} elements, got shape {}", name, count,
                         shapeString(view.shape)));
}

int64_t scalarInt(const KernelContext &ctx, const TensorView &view,
                  std::string_view name) {
  if (!view.present())
    ctx.fail(fmt::format("the scalar {} has no data", name));
  expectDType(ctx, view, DType::I64, name);
  if (view.numel() != 1)
    ctx.fail(fmt::format("{} must be a scalar, got shape {}", name,
                         shapeString(view.shape)));
  return *view.as<int64_t>();
}

double scalarFloat(const KernelContext &ctx, const TensorView &view,
                   std::string_view name) {
  if (!view.present())
    ctx.fail(fmt::format("the scalar {} has no data", name));
  if (view.numel() != 1)
    ctx.fail(fmt::format("{} must be a scalar, got shape {}", name,
                         shapeString(view.shape)));
  if (view.dtype == DType::F32)
    return *view.as<float>();
  if (view.dtype == DType::F64)
    return *view.as<double>();
  ctx.fail(fmt::format("{} must be f32 or f64, got {}", name,
                       dtypeName(view.dtype)));
}

std::string indexString(const Shape &shape, int64_t flat) {
  std::vector<int64_t> index(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    int64_t d = shape[i] > 0 ? shape[i] : 1;
    index[i] = flat % d;
    flat /= d;
  }
  return fmt::format("[{}]", fmt::join(index, ", "));
}

void checkExpertIndices(const KernelContext &ctx, const TensorView &expert,
                        const TensorView *slot, int64_t numExperts) {
  const int32_t *ex = expert.as<int32_t>();
  const int32_t *sl = slot ? slot->as<int32_t>() : nullptr;
  for (int64_t a = 0; a < expert.numel(); ++a) {
    if (sl && sl[a] < 0)
      continue;
    if (ex[a] < 0 || ex[a] >= numExperts)
      ctx.fail(fmt::format("expert{} = {} is outside [0, {})",
                           indexString(expert.shape, a), ex[a], numExperts));
  }
}

BlockPool::~BlockPool() {
  for (Block &b : idle)
    std::free(b.data);
}

BlockPool::Block BlockPool::take(size_t bytes, bool replaceLargest,
                                 const char *what) {
  bytes = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  auto best = idle.end();
  for (auto it = idle.begin(); it != idle.end(); ++it)
    if (it->bytes >= bytes && (best == idle.end() || it->bytes < best->bytes))
      best = it;
  if (best != idle.end()) {
    Block block = *best;
    idle.erase(best);
    return block;
  }
  if (replaceLargest && !idle.empty()) {
    auto largest = std::max_element(
        idle.begin(), idle.end(),
        [](const Block &a, const Block &b) { return a.bytes < b.bytes; });
    std::free(largest->data);
    idle.erase(largest);
  }
  Block block{std::aligned_alloc(64, bytes), bytes};
  if (!block.data)
    throw Error(fmt::format("out of host memory allocating {} bytes for {}",
                            bytes, what));
  return block;
}

namespace {
/// This thread's scratch blocks.
thread_local BlockPool scratchPool;
} // namespace

void *Scratch::getBytes(size_t bytes) {
  taken.push_back(scratchPool.take(bytes, /*replaceLargest=*/true,
                                   "kernel scratch"));
  return taken.back().data;
}

Scratch::~Scratch() {
  for (BlockPool::Block &b : taken)
    scratchPool.give(b);
}

static int blasInt(int64_t v) {
  if (v > INT_MAX)
    throw Error(fmt::format("gemm dimension {} exceeds the 32-bit BLAS "
                            "interface; split the batch",
                            v));
  return static_cast<int>(v);
}

namespace {

/// y = alpha op(M) x + beta y for a row-major M `[rows, cols]` (op(M) is M,
/// or its transpose with `trans`), x and y with strides.
template <typename T>
void gemv(bool trans, int64_t rows, int64_t cols, T alpha, const T *m,
          int64_t ldm, const T *x, int64_t incx, T beta, T *y, int64_t incy) {
  int64_t ny = trans ? cols : rows;
  // OpenBLAS forms beta y by scaling y. Its 0.3.21 writes zeros for 0;
  // zeroing first keeps NaN in stale memory out of y in any version.
  if (beta == T(0))
    for (int64_t i = 0; i < ny; ++i)
      y[i * incy] = T(0);
  CBLAS_TRANSPOSE t = trans ? CblasTrans : CblasNoTrans;
  const int r = blasInt(rows), c = blasInt(cols), ld = blasInt(ldm),
            ix = blasInt(incx), iy = blasInt(incy);
#ifdef _OPENMP
  // OpenBLAS threads a gemv from about 9216 elements, far below its gemm's
  // cutoff. Where our loop did not fork (one block: MoA's 64-wide
  // products), that is a nested team with new threads on every call,
  // spinning against ours (a MoA decoding step took 28 ms instead of 1),
  // and sums that change with the thread count. OpenBLAS reads the calling
  // task's OpenMP thread count, so the call runs with one; the parallelism
  // is our loop's.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
#endif
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemv(CblasRowMajor, t, r, c, alpha, m, ld, x, ix, beta, y, iy);
  else
    cblas_dgemv(CblasRowMajor, t, r, c, alpha, m, ld, x, ix, beta, y, iy);
#ifdef _OPENMP
  omp_set_num_threads(threads);
#endif
}

} // namespace

template <typename T>
void gemmSerial(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                T alpha, const T *a, int64_t lda, const T *b, int64_t ldb,
                T beta, T *c, int64_t ldc) {
  // One row or one column of C is a matrix-vector product. gemm would first
  // pack the whole matrix that the product reads once (a decoding step's
  // products are all one row); OpenBLAS skips that only on some CPUs.
  if (m == 1) {
    // c[j] = sum_i op(A)[0, i] op(B)[i, j]: op(B)^T times A's row.
    gemv(!transB, transB ? n : k, transB ? k : n, alpha, b, ldb, a,
         transA ? lda : 1, beta, c, 1);
    return;
  }
  if (n == 1) {
    // c[i] = sum_j op(A)[i, j] op(B)[j, 0]: op(A) times B's column.
    gemv(transA, transA ? k : m, transA ? m : k, alpha, a, lda, b,
         transB ? 1 : ldb, beta, c, ldc);
    return;
  }
  CBLAS_TRANSPOSE ta = transA ? CblasTrans : CblasNoTrans;
  CBLAS_TRANSPOSE tb = transB ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, blasInt(m), blasInt(n), blasInt(k),
                alpha, a, blasInt(lda), b, blasInt(ldb), beta, c, blasInt(ldc));
  else
    cblas_dgemm(CblasRowMajor, ta, tb, blasInt(m), blasInt(n), blasInt(k),
                alpha, a, blasInt(lda), b, blasInt(ldb), beta, c, blasInt(ldc));
}

namespace {

/// Rows (or columns) of C per BLAS call. The partition of C is fixed, and
/// every call runs inside our own parallel loop; where it forks, the OpenMP
/// build of OpenBLAS stays single-threaded. Each element of C is computed
/// by one call in one order, whatever the thread count.
constexpr int64_t kGemmBlock = 64;

} // namespace

template <typename T>
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, T alpha,
          const T *a, int64_t lda, const T *b, int64_t ldb, T beta, T *c,
          int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    // BLAS would be handed zero-sized operands; the product is empty.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  if (m >= n) {
    // Row blocks of C: rows of op(A).
    int64_t blocks = (m + kGemmBlock - 1) / kGemmBlock;
    parallelFor(blocks, kGemmBlock * n * k, [&](int64_t blk) {
      int64_t r0 = blk * kGemmBlock, rows = std::min(kGemmBlock, m - r0);
      const T *aBlock = transA ? a + r0 : a + r0 * lda;
      gemmSerial(transA, transB, rows, n, k, alpha, aBlock, lda, b, ldb, beta,
               c + r0 * ldc, ldc);
    });
  } else {
    // Column blocks of C: columns of op(B).
    int64_t blocks = (n + kGemmBlock - 1) / kGemmBlock;
    parallelFor(blocks, kGemmBlock * m * k, [&](int64_t blk) {
      int64_t c0 = blk * kGemmBlock, cols = std::min(kGemmBlock, n - c0);
      const T *bBlock = transB ? b + c0 * ldb : b + c0;
      gemmSerial(transA, transB, m, cols, k, alpha, a, lda, bBlock, ldb, beta,
               c + c0, ldc);
    });
  }
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float,
                          const float *, int64_t, const float *, int64_t, float,
                          float *, int64_t);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double,
                           const double *, int64_t, const double *, int64_t,
                           double, double *, int64_t);
template void gemmSerial<float>(bool, bool, int64_t, int64_t, int64_t, float,
                                const float *, int64_t, const float *, int64_t,
                                float, float *, int64_t);
template void gemmSerial<double>(bool, bool, int64_t, int64_t, int64_t,
                                 double, const double *, int64_t,
                                 const double *, int64_t, double, double *,
                                 int64_t);

} // namespace moec::cpu
