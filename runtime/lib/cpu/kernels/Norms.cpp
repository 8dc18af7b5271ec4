//===- Norms.cpp - layer and RMS normalisation ----------------------------===//
//
// Row statistics are accumulated in double (laneSum's eight partial sums);
// the parameter gradients sum over tokens in token order (columnReduce).
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "Kernels.h"

#include <array>
#include <cmath>

namespace moec::cpu {

namespace {

/// Checks x `[..., d]` and a `[d]` parameter; returns x's rows.
template <typename T>
RowShape normDims(const KernelContext &ctx, const TensorView &x,
                  const TensorView &gamma) {
  if (x.rank() == 0)
    ctx.fail("x must be [..., d], got a scalar");
  RowShape rs = rowShape(x);
  expectDType(ctx, gamma, dtypeOf<T>(), "gamma");
  expectShape(ctx, gamma, {rs.width}, "gamma");
  return rs;
}

/// Mean and 1 / sqrt(var + eps) of one row.
template <typename T>
void layerNormStats(const T *x, int64_t d, double eps, double &mu,
                    double &rstd) {
  double sum = laneSum(d, [&](int64_t c) -> double { return x[c]; });
  mu = d > 0 ? sum / d : 0.0;
  double sq = laneSum(d, [&](int64_t c) { return (x[c] - mu) * (x[c] - mu); });
  rstd = 1.0 / std::sqrt((d > 0 ? sq / d : 0.0) + eps);
}

/// 1 / sqrt(mean(x^2) + eps) of one row.
template <typename T> double rmsNormScale(const T *x, int64_t d, double eps) {
  double sq =
      laneSum(d, [&](int64_t c) { return static_cast<double>(x[c]) * x[c]; });
  return 1.0 / std::sqrt((d > 0 ? sq / d : 0.0) + eps);
}

template <typename T> void layerNorm(KernelContext &ctx) {
  const TensorView &x = requireInput(ctx, 0, "x");
  const TensorView &gamma = requireInput(ctx, 1, "gamma");
  const TensorView &beta = requireInput(ctx, 2, "beta");
  RowShape rs = normDims<T>(ctx, x, gamma);
  expectDType(ctx, beta, dtypeOf<T>(), "beta");
  expectShape(ctx, beta, {rs.width}, "beta");
  const TensorView &y = ctx.out(0);
  expectRows(ctx, y, rs.rows, rs.width, dtypeOf<T>(), "the result");
  if (!y.present())
    return;
  double eps = ctx.attrs.getFloat(defs::ops::layer_norm::kEps,
                                  defs::ops::layer_norm::kEpsDefault);
  const T *xp = x.as<T>(), *gp = gamma.as<T>(), *bp = beta.as<T>();
  T *yp = y.as<T>();
  int64_t d = rs.width;
  parallelFor(rs.rows, 8 * d, [&](int64_t r) {
    const T *xr = xp + r * d;
    double mu, rstd;
    layerNormStats(xr, d, eps, mu, rstd);
    for (int64_t c = 0; c < d; ++c)
      yp[r * d + c] = static_cast<T>((xr[c] - mu) * rstd * gp[c] + bp[c]);
  });
}

template <typename T> void layerNormGrad(KernelContext &ctx) {
  const TensorView &x = requireInput(ctx, 0, "x");
  const TensorView &gamma = requireInput(ctx, 1, "gamma");
  const TensorView &dy = requireInput(ctx, 2, "dy");
  RowShape rs = normDims<T>(ctx, x, gamma);
  expectRows(ctx, dy, rs.rows, rs.width, dtypeOf<T>(), "dy");
  const TensorView &dx = ctx.out(0), &dgamma = ctx.out(1), &dbeta = ctx.out(2);
  expectRows(ctx, dx, rs.rows, rs.width, dtypeOf<T>(), "dx");
  expectNumel(ctx, dgamma, rs.width, dtypeOf<T>(), "dgamma");
  expectNumel(ctx, dbeta, rs.width, dtypeOf<T>(), "dbeta");
  double eps = ctx.attrs.getFloat(defs::ops::layer_norm_grad::kEps,
                                  defs::ops::layer_norm_grad::kEpsDefault);
  const T *xp = x.as<T>(), *gp = gamma.as<T>(), *g = dy.as<T>();
  int64_t d = rs.width;

  std::vector<double> mu(rs.rows), rstd(rs.rows);
  parallelFor(rs.rows, 8 * d, [&](int64_t r) {
    const T *xr = xp + r * d;
    layerNormStats(xr, d, eps, mu[r], rstd[r]);
    if (!dx.present())
      return;
    // dx = r * (g - mean(g) - xh * mean(g * xh)) with g = dy * gamma.
    const T *gr = g + r * d;
    double sumG = laneSum(
        d, [&](int64_t c) { return static_cast<double>(gr[c]) * gp[c]; });
    double sumGXh = laneSum(d, [&](int64_t c) {
      return static_cast<double>(gr[c]) * gp[c] * (xr[c] - mu[r]) * rstd[r];
    });
    double meanG = sumG / d, meanGXh = sumGXh / d;
    T *dxr = dx.as<T>() + r * d;
    for (int64_t c = 0; c < d; ++c) {
      double xh = (xr[c] - mu[r]) * rstd[r];
      double gc = static_cast<double>(gr[c]) * gp[c];
      dxr[c] = static_cast<T>(rstd[r] * (gc - meanG - xh * meanGXh));
    }
  });
  // dgamma and dbeta in one pass over dy.
  if (dgamma.present() || dbeta.present())
    columnReduceEach<2>(
        rs.rows, d,
        std::array<T *, 2>{dgamma.present() ? dgamma.as<T>() : nullptr,
                           dbeta.present() ? dbeta.as<T>() : nullptr},
        [&](int64_t r, int64_t c) {
          const double gc = g[r * d + c];
          return std::array<double, 2>{gc * (xp[r * d + c] - mu[r]) * rstd[r],
                                       gc};
        });
}

template <typename T> void rmsNorm(KernelContext &ctx) {
  const TensorView &x = requireInput(ctx, 0, "x");
  const TensorView &gamma = requireInput(ctx, 1, "gamma");
  RowShape rs = normDims<T>(ctx, x, gamma);
  const TensorView &y = ctx.out(0);
  expectRows(ctx, y, rs.rows, rs.width, dtypeOf<T>(), "the result");
  if (!y.present())
    return;
  double eps = ctx.attrs.getFloat(defs::ops::rms_norm::kEps,
                                  defs::ops::rms_norm::kEpsDefault);
  const T *xp = x.as<T>(), *gp = gamma.as<T>();
  T *yp = y.as<T>();
  int64_t d = rs.width;
  parallelFor(rs.rows, 8 * d, [&](int64_t r) {
    const T *xr = xp + r * d;
    double scale = rmsNormScale(xr, d, eps);
    for (int64_t c = 0; c < d; ++c)
      yp[r * d + c] = static_cast<T>(xr[c] * scale * gp[c]);
  });
}

template <typename T> void rmsNormGrad(KernelContext &ctx) {
  const TensorView &x = requireInput(ctx, 0, "x");
  const TensorView &gamma = requireInput(ctx, 1, "gamma");
  const TensorView &dy = requireInput(ctx, 2, "dy");
  RowShape rs = normDims<T>(ctx, x, gamma);
  expectRows(ctx, dy, rs.rows, rs.width, dtypeOf<T>(), "dy");
  const TensorView &dx = ctx.out(0), &dgamma = ctx.out(1);
  expectRows(ctx, dx, rs.rows, rs.width, dtypeOf<T>(), "dx");
  expectNumel(ctx, dgamma, rs.width, dtypeOf<T>(), "dgamma");
  double eps = ctx.attrs.getFloat(defs::ops::rms_norm_grad::kEps,
                                  defs::ops::rms_norm_grad::kEpsDefault);
  const T *xp = x.as<T>(), *gp = gamma.as<T>(), *g = dy.as<T>();
  int64_t d = rs.width;

  std::vector<double> scale(rs.rows);
  parallelFor(rs.rows, 8 * d, [&](int64_t r) {
    const T *xr = xp + r * d;
    double s = scale[r] = rmsNormScale(xr, d, eps);
    if (!dx.present())
      return;
    // dx = r * g - x * r^3 * mean(g * x) with g = dy * gamma.
    const T *gr = g + r * d;
    double sumGX = laneSum(d, [&](int64_t c) {
      return static_cast<double>(gr[c]) * gp[c] * xr[c];
    });
    double meanGX = sumGX / d;
    T *dxr = dx.as<T>() + r * d;
    for (int64_t c = 0; c < d; ++c)
      dxr[c] = static_cast<T>(s * gr[c] * gp[c] - xr[c] * s * s * s * meanGX);
  });
  if (dgamma.present())
    columnReduce(rs.rows, d, dgamma.as<T>(), [&](int64_t r, int64_t c) {
      return static_cast<double>(g[r * d + c]) * xp[r * d + c] * scale[r];
    });
}

} // namespace

void layerNormKernel(KernelContext &ctx) {
  checkArity(ctx, 3, 3, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { layerNorm<decltype(tag)>(ctx); });
}

void layerNormGradKernel(KernelContext &ctx) {
  checkArity(ctx, 3, 3, 3, 3);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { layerNormGrad<decltype(tag)>(ctx); });
}

void rmsNormKernel(KernelContext &ctx) {
  checkArity(ctx, 2, 2, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { rmsNorm<decltype(tag)>(ctx); });
}

void rmsNormGradKernel(KernelContext &ctx) {
  checkArity(ctx, 3, 3, 2, 2);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { rmsNormGrad<decltype(tag)>(ctx); });
}

} // namespace moec::cpu
