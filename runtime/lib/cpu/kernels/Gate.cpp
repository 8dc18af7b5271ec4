//===- Gate.cpp - row scaling and the finite fill of the X-MoE gate -------===//
//
// Row norms are accumulated in double in column order. finite_or_min scans
// the whole tensor in flat order, so its arg-min is the lowest index among
// equal minima and its dy sum has one fixed order.
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "Kernels.h"

#include <cmath>

namespace moec::cpu {

namespace {

/// The L2 norm of one row, in double.
template <typename T> double rowNorm(const T *x, int64_t width) {
  double sq = 0;
  for (int64_t c = 0; c < width; ++c)
    sq += static_cast<double>(x[c]) * x[c];
  return std::sqrt(sq);
}

/// Checks x `[..., C]` and an output of its shape; returns x's rows.
template <typename T>
RowShape rowDims(const KernelContext &ctx, const TensorView &x,
                 const TensorView &out, std::string_view outName) {
  if (x.rank() == 0)
    ctx.fail("x must be [..., C], got a scalar");
  RowShape rs = rowShape(x);
  expectRows(ctx, out, rs.rows, rs.width, dtypeOf<T>(), outName);
  return rs;
}

/// y = x * scale(||x_row||) row by row.
template <typename T, typename Scale>
void scaleRows(KernelContext &ctx, Scale &&scale) {
  const TensorView &x = requireInput(ctx, 0, "x");
  const TensorView &y = ctx.out(0);
  RowShape rs = rowDims<T>(ctx, x, y, "the result");
  if (!y.present())
    return;
  const T *xp = x.as<T>();
  T *yp = y.as<T>();
  const int64_t d = rs.width;
  parallelFor(rs.rows, 4 * d, [&](int64_t r) {
    const double s = scale(rowNorm(xp + r * d, d));
    for (int64_t c = 0; c < d; ++c)
      yp[r * d + c] = static_cast<T>(xp[r * d + c] * s);
  });
}

template <typename T> void normalizeRows(KernelContext &ctx) {
  double eps = ctx.attrs.getFloat(defs::ops::normalize_rows::kEps,
                                  defs::ops::normalize_rows::kEpsDefault);
  scaleRows<T>(ctx, [&](double n) { return 1.0 / std::max(n, eps); });
}

template <typename T> void rescaleRows(KernelContext &ctx) {
  double norm = ctx.attrs.getFloat(defs::ops::rescale_rows::kNorm);
  if (!(norm > 0))
    ctx.fail("norm must be > 0");
  // A zero row has no direction to rescale along: it stays zero.
  scaleRows<T>(ctx, [&](double n) { return n > 0 ? norm / n : 1.0; });
}

template <typename T> void normalizeRowsGrad(KernelContext &ctx) {
  const TensorView &x = requireInput(ctx, 0, "x");
  const TensorView &dy = requireInput(ctx, 1, "dy");
  const TensorView &dx = ctx.out(0);
  RowShape rs = rowDims<T>(ctx, x, dx, "dx");
  expectRows(ctx, dy, rs.rows, rs.width, dtypeOf<T>(), "dy");
  if (!dx.present())
    return;
  double eps = ctx.attrs.getFloat(defs::ops::normalize_rows_grad::kEps,
                                  defs::ops::normalize_rows_grad::kEpsDefault);
  const T *xp = x.as<T>(), *g = dy.as<T>();
  T *out = dx.as<T>();
  const int64_t d = rs.width;
  parallelFor(rs.rows, 6 * d, [&](int64_t r) {
    const T *xr = xp + r * d, *gr = g + r * d;
    const double n = rowNorm(xr, d);
    T *dxr = out + r * d;
    if (!(n > eps)) {
      // y = x / eps below the kink.
      for (int64_t c = 0; c < d; ++c)
        dxr[c] = static_cast<T>(gr[c] / eps);
      return;
    }
    // (dy - xh <xh, dy>) / n = dy / n - x <x, dy> / n^3.
    double dot = 0;
    for (int64_t c = 0; c < d; ++c)
      dot += static_cast<double>(xr[c]) * gr[c];
    const double along = dot / (n * n * n);
    for (int64_t c = 0; c < d; ++c)
      dxr[c] = static_cast<T>(gr[c] / n - xr[c] * along);
  });
}

/// The lowest flat index of the smallest finite entry, or -1.
template <typename T> int64_t finiteArgMin(const T *x, int64_t n) {
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(x[i]) && (best < 0 || x[i] < x[best]))
      best = i;
  return best;
}

template <typename T> void finiteOrMin(KernelContext &ctx) {
  const TensorView &x = requireInput(ctx, 0, "x");
  const TensorView &y = ctx.out(0);
  const int64_t n = x.numel();
  expectNumel(ctx, y, n, dtypeOf<T>(), "the result");
  if (!y.present())
    return;
  const T *xp = x.as<T>();
  T *yp = y.as<T>();
  const int64_t arg = finiteArgMin(xp, n);
  // Nothing finite: zeros (the authors' code fails there).
  const T m = arg >= 0 ? xp[arg] : T(0);
  parallelFor(n, 1,
              [&](int64_t i) { yp[i] = std::isfinite(xp[i]) ? xp[i] : m; });
}

template <typename T> void finiteOrMinGrad(KernelContext &ctx) {
  const TensorView &x = requireInput(ctx, 0, "x");
  const TensorView &dy = requireInput(ctx, 1, "dy");
  const TensorView &dx = ctx.out(0);
  const int64_t n = x.numel();
  expectNumel(ctx, dy, n, dtypeOf<T>(), "dy");
  expectNumel(ctx, dx, n, dtypeOf<T>(), "dx");
  if (!dx.present())
    return;
  const T *xp = x.as<T>(), *g = dy.as<T>();
  T *out = dx.as<T>();
  const int64_t arg = finiteArgMin(xp, n);
  // Every replaced entry was a copy of x[arg]: its gradient goes there.
  double replaced = 0;
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(xp[i]))
      replaced += g[i];
  parallelFor(n, 1,
              [&](int64_t i) { out[i] = std::isfinite(xp[i]) ? g[i] : T(0); });
  if (arg >= 0)
    out[arg] = static_cast<T>(g[arg] + replaced);
}

} // namespace

void normalizeRowsKernel(KernelContext &ctx) {
  checkArity(ctx, 1, 1, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { normalizeRows<decltype(tag)>(ctx); });
}

void normalizeRowsGradKernel(KernelContext &ctx) {
  checkArity(ctx, 2, 2, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { normalizeRowsGrad<decltype(tag)>(ctx); });
}

void rescaleRowsKernel(KernelContext &ctx) {
  checkArity(ctx, 1, 1, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { rescaleRows<decltype(tag)>(ctx); });
}

void finiteOrMinKernel(KernelContext &ctx) {
  checkArity(ctx, 1, 1, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { finiteOrMin<decltype(tag)>(ctx); });
}

void finiteOrMinGradKernel(KernelContext &ctx) {
  checkArity(ctx, 2, 2, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { finiteOrMinGrad<decltype(tag)>(ctx); });
}

} // namespace moec::cpu
