//===- BatchNorm.cpp - batch normalisation over rows ----------------------===//
//
// Column statistics in double, two passes (mean, then squared deviations),
// each column's rows in increasing order; parallel over blocks of columns
// only, so results never depend on the thread count. x and the [d]
// operands share one dtype here (bf16 x is staged to f32 by the device).
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "Kernels.h"

#include <cmath>

namespace moec::cpu {

namespace {

/// Columns per parallel block of the column passes.
constexpr int64_t kColumnBlock = 64;

/// Calls fn(c0, c1) for blocks [c0, c1) of the d columns in parallel.
template <typename Fn> void forColumnBlocks(int64_t d, int64_t rows, Fn &&fn) {
  int64_t blocks = (d + kColumnBlock - 1) / kColumnBlock;
  parallelFor(blocks, 2 * kColumnBlock * rows, [&](int64_t b) {
    fn(b * kColumnBlock, std::min(d, (b + 1) * kColumnBlock));
  });
}

/// Per-column statistics of the rows that take part (mask != 0).
struct ColumnStats {
  std::vector<double> mean, rstd;
  int64_t n = 0;
};

/// The shapes of a batch-norm step: x [..., d] with at least one leading
/// dimension, `vectors` (input indices) [d] of x's dtype, the optional
/// mask (input `maskIndex`) of x's rows. Returns x's rows.
template <typename T>
RowShape batchNormDims(const KernelContext &ctx,
                       std::initializer_list<std::pair<size_t, const char *>>
                           vectors,
                       size_t maskIndex) {
  const TensorView &x = requireInput(ctx, 0, "x");
  if (x.rank() < 2)
    ctx.fail("x must be [..., d] with at least one leading dimension, got " +
             shapeString(x.shape));
  RowShape rs = rowShape(x);
  for (auto [index, name] : vectors) {
    const TensorView &v = requireInput(ctx, index, name);
    expectDType(ctx, v, dtypeOf<T>(), name);
    expectShape(ctx, v, {rs.width}, name);
  }
  const TensorView &mask = ctx.in(maskIndex);
  if (mask.present()) {
    expectDType(ctx, mask, DType::I32, "mask");
    if (mask.numel() != rs.rows)
      ctx.fail("mask must have one entry per row of x (" +
               std::to_string(rs.rows) + "), got " + shapeString(mask.shape));
  }
  return rs;
}

/// Batch statistics over the rows with mask != 0 (all rows without a
/// mask): mu and 1 / sqrt(var + eps) with the biased var; var = 0 and
/// mu = 0 when no row takes part.
template <typename T>
ColumnStats batchStats(const T *x, const int32_t *mask, RowShape rs,
                       double eps, std::vector<double> *var = nullptr) {
  const int64_t d = rs.width;
  ColumnStats s;
  s.mean.assign(d, 0.0);
  s.rstd.assign(d, 0.0);
  std::vector<double> v(d, 0.0);
  for (int64_t r = 0; r < rs.rows; ++r)
    s.n += !mask || mask[r] != 0;
  forColumnBlocks(d, rs.rows, [&](int64_t c0, int64_t c1) {
    double sum[kColumnBlock] = {}, sq[kColumnBlock] = {};
    for (int64_t r = 0; r < rs.rows; ++r)
      if (!mask || mask[r] != 0)
        for (int64_t c = c0; c < c1; ++c)
          sum[c - c0] += x[r * d + c];
    for (int64_t c = c0; c < c1; ++c)
      s.mean[c] = s.n > 0 ? sum[c - c0] / static_cast<double>(s.n) : 0.0;
    for (int64_t r = 0; r < rs.rows; ++r)
      if (!mask || mask[r] != 0)
        for (int64_t c = c0; c < c1; ++c) {
          double dev = x[r * d + c] - s.mean[c];
          sq[c - c0] += dev * dev;
        }
    for (int64_t c = c0; c < c1; ++c) {
      v[c] = s.n > 0 ? sq[c - c0] / static_cast<double>(s.n) : 0.0;
      s.rstd[c] = 1.0 / std::sqrt(v[c] + eps);
    }
  });
  if (var)
    *var = std::move(v);
  return s;
}

/// The running statistics as the statistics to normalise with (eval).
template <typename T>
ColumnStats runningStats(const T *mean, const T *var, int64_t d, double eps) {
  ColumnStats s;
  s.mean.resize(d);
  s.rstd.resize(d);
  for (int64_t c = 0; c < d; ++c) {
    s.mean[c] = mean[c];
    s.rstd[c] = 1.0 / std::sqrt(static_cast<double>(var[c]) + eps);
  }
  return s;
}

const int32_t *maskData(const TensorView &mask) {
  return mask.present() ? mask.as<int32_t>() : nullptr;
}

template <typename T> void batchNorm(KernelContext &ctx) {
  namespace bn = defs::ops::batch_norm;
  RowShape rs = batchNormDims<T>(
      ctx,
      {{1, "gamma"}, {2, "beta"}, {3, "running_mean"}, {4, "running_var"}}, 5);
  const int64_t d = rs.width;
  const TensorView &y = ctx.out(0), &newMean = ctx.out(1),
                   &newVar = ctx.out(2);
  expectRows(ctx, y, rs.rows, d, dtypeOf<T>(), "the result");
  expectNumel(ctx, newMean, d, dtypeOf<T>(), "new_mean");
  expectNumel(ctx, newVar, d, dtypeOf<T>(), "new_var");
  double eps = ctx.attrs.getFloat(bn::kEps, bn::kEpsDefault);
  double momentum = ctx.attrs.getFloat(bn::kMomentum, bn::kMomentumDefault);
  bool training = ctx.attrs.getFlag(bn::kTraining);
  const T *xp = ctx.in(0).as<T>(), *gp = ctx.in(1).as<T>(),
          *bp = ctx.in(2).as<T>(), *rm = ctx.in(3).as<T>(),
          *rv = ctx.in(4).as<T>();

  std::vector<double> var;
  ColumnStats s = training ? batchStats(xp, maskData(ctx.in(5)), rs, eps, &var)
                           : runningStats(rm, rv, d, eps);
  // torch's running update with the unbiased variance; n <= 1 leaves the
  // running statistics as they are.
  bool update = training && s.n > 1;
  double unbias = update ? static_cast<double>(s.n) / (s.n - 1) : 0.0;
  for (int64_t c = 0; c < d; ++c) {
    if (newMean.present())
      newMean.as<T>()[c] = update ? static_cast<T>((1 - momentum) * rm[c] +
                                                   momentum * s.mean[c])
                                  : rm[c];
    if (newVar.present())
      newVar.as<T>()[c] = update ? static_cast<T>((1 - momentum) * rv[c] +
                                                  momentum * var[c] * unbias)
                                 : rv[c];
  }
  if (!y.present())
    return;
  T *yp = y.as<T>();
  parallelFor(rs.rows, 4 * d, [&](int64_t r) {
    for (int64_t c = 0; c < d; ++c)
      yp[r * d + c] = static_cast<T>((xp[r * d + c] - s.mean[c]) * s.rstd[c] *
                                         gp[c] +
                                     bp[c]);
  });
}

template <typename T> void batchNormGrad(KernelContext &ctx) {
  namespace bn = defs::ops::batch_norm_grad;
  RowShape rs = batchNormDims<T>(
      ctx, {{1, "gamma"}, {2, "running_mean"}, {3, "running_var"}}, 5);
  const int64_t d = rs.width;
  const TensorView &dy = requireInput(ctx, 4, "dy");
  expectRows(ctx, dy, rs.rows, d, dtypeOf<T>(), "dy");
  const TensorView &dx = ctx.out(0), &dgamma = ctx.out(1), &dbeta = ctx.out(2);
  expectRows(ctx, dx, rs.rows, d, dtypeOf<T>(), "dx");
  expectNumel(ctx, dgamma, d, dtypeOf<T>(), "dgamma");
  expectNumel(ctx, dbeta, d, dtypeOf<T>(), "dbeta");
  double eps = ctx.attrs.getFloat(bn::kEps, bn::kEpsDefault);
  bool training = ctx.attrs.getFlag(bn::kTraining);
  const T *xp = ctx.in(0).as<T>(), *gp = ctx.in(1).as<T>(),
          *g = dy.as<T>();
  const int32_t *mask = training ? maskData(ctx.in(5)) : nullptr;
  ColumnStats s = training ? batchStats(xp, mask, rs, eps)
                           : runningStats(ctx.in(2).as<T>(),
                                          ctx.in(3).as<T>(), d, eps);

  // A = sum dy and B = sum dy * x_hat over every row.
  std::vector<double> a(d, 0.0), b(d, 0.0);
  forColumnBlocks(d, rs.rows, [&](int64_t c0, int64_t c1) {
    for (int64_t r = 0; r < rs.rows; ++r)
      for (int64_t c = c0; c < c1; ++c) {
        double gy = g[r * d + c];
        a[c] += gy;
        b[c] += gy * (xp[r * d + c] - s.mean[c]) * s.rstd[c];
      }
  });
  for (int64_t c = 0; c < d; ++c) {
    if (dgamma.present())
      dgamma.as<T>()[c] = static_cast<T>(b[c]);
    if (dbeta.present())
      dbeta.as<T>()[c] = static_cast<T>(a[c]);
  }
  if (!dx.present())
    return;
  T *dxp = dx.as<T>();
  const double n = static_cast<double>(s.n);
  parallelFor(rs.rows, 6 * d, [&](int64_t r) {
    // Rows inside the statistics also move mu and var.
    bool inStats = training && s.n > 0 && (!mask || mask[r] != 0);
    for (int64_t c = 0; c < d; ++c) {
      double gy = g[r * d + c];
      if (inStats) {
        double xh = (xp[r * d + c] - s.mean[c]) * s.rstd[c];
        gy -= (a[c] + xh * b[c]) / n;
      }
      dxp[r * d + c] = static_cast<T>(gp[c] * s.rstd[c] * gy);
    }
  });
}

} // namespace

void batchNormKernel(KernelContext &ctx) {
  checkArity(ctx, 5, 6, 3, 3);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { batchNorm<decltype(tag)>(ctx); });
}

void batchNormGradKernel(KernelContext &ctx) {
  checkArity(ctx, 5, 6, 3, 3);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { batchNormGrad<decltype(tag)>(ctx); });
}

} // namespace moec::cpu
