//===- Linear.cpp - affine maps over the last dimension -------------------===//

#include "Common.h"
#include "Kernels.h"

#include <algorithm>
#include <fmt/format.h>

namespace moec::cpu {

namespace {

/// The sizes of `x [M, K] * W` with W `[K, N]`, or `[N, K]` used transposed.
struct LinearDims {
  int64_t m, k, n;
  bool transposed;
};

template <typename T>
LinearDims linearDims(const KernelContext &ctx, const TensorView &x,
                      const TensorView &w) {
  expectDType(ctx, w, dtypeOf<T>(), "weight");
  expectRank(ctx, w, 2, "weight");
  if (x.rank() == 0)
    ctx.fail("x must be [..., K], got a scalar");
  RowShape xs = rowShape(x);
  bool transposed = ctx.attrs.getFlag(
      defs::ops::linear::kTransposeWeight);
  int64_t wk = transposed ? w.dim(1) : w.dim(0);
  if (wk != xs.width)
    ctx.fail(fmt::format("weight {} does not match x {}: expected {} with "
                         "K = {}{}",
                         shapeString(w.shape), shapeString(x.shape),
                         transposed ? "[N, K]" : "[K, N]", xs.width,
                         transposed ? " (transpose_weight)" : ""));
  return {xs.rows, xs.width, transposed ? w.dim(0) : w.dim(1), transposed};
}

template <typename T> void linear(KernelContext &ctx) {
  const TensorView &x = requireInput(ctx, 0, "x");
  const TensorView &w = requireInput(ctx, 1, "weight");
  const TensorView &b = ctx.in(2);
  const TensorView &y = ctx.out(0);
  LinearDims dims = linearDims<T>(ctx, x, w);
  if (b.present()) {
    expectDType(ctx, b, dtypeOf<T>(), "bias");
    expectShape(ctx, b, {dims.n}, "bias");
  }
  expectRows(ctx, y, dims.m, dims.n, dtypeOf<T>(), "the result");
  if (!y.present())
    return;
  T *out = y.as<T>();
  if (b.present()) {
    // Seed every row with the bias and let the gemm accumulate onto it.
    const T *bias = b.as<T>();
    parallelFor(dims.m, dims.n, [&](int64_t r) {
      std::copy(bias, bias + dims.n, out + r * dims.n);
    });
  }
  gemm<T>(false, dims.transposed, dims.m, dims.n, dims.k, T(1), x.as<T>(),
          dims.k, w.as<T>(), dims.transposed ? dims.k : dims.n,
          b.present() ? T(1) : T(0), out, dims.n);
}

template <typename T> void linearGrad(KernelContext &ctx) {
  const TensorView &x = requireInput(ctx, 0, "x");
  const TensorView &w = requireInput(ctx, 1, "weight");
  const TensorView &dy = requireInput(ctx, 2, "dy");
  LinearDims dims = linearDims<T>(ctx, x, w);
  expectRows(ctx, dy, dims.m, dims.n, dtypeOf<T>(), "dy");
  bool hasBias = ctx.attrs.getFlag(defs::ops::linear_grad::kHasBias);
  // dbias is result 2: required with has_bias, absent (or missing) without.
  if (hasBias ? ctx.outputs.size() < 3 : ctx.out(2).present())
    ctx.fail(fmt::format("has_bias is {} but the plan step {} a dbias result",
                         hasBias ? "set" : "unset", hasBias ? "lacks" : "has"));
  const TensorView &dx = ctx.out(0), &dw = ctx.out(1), &db = ctx.out(2);
  expectRows(ctx, dx, dims.m, dims.k, dtypeOf<T>(), "dx");
  if (dw.present()) {
    expectDType(ctx, dw, dtypeOf<T>(), "dweight");
    expectShape(ctx, dw, w.shape, "dweight");
  }
  if (db.present()) {
    expectDType(ctx, db, dtypeOf<T>(), "dbias");
    expectShape(ctx, db, {dims.n}, "dbias");
  }

  const T *xp = x.as<T>(), *wp = w.as<T>(), *g = dy.as<T>();
  if (dx.present()) {
    // dx = dy W^T for W [K, N]; dy W for W stored [N, K].
    gemm<T>(false, !dims.transposed, dims.m, dims.k, dims.n, T(1), g, dims.n,
            wp, dims.transposed ? dims.k : dims.n, T(0), dx.as<T>(), dims.k);
  }
  if (dw.present()) {
    if (dims.transposed) // dW [N, K] = dy^T x
      gemm<T>(true, false, dims.n, dims.k, dims.m, T(1), g, dims.n, xp, dims.k,
              T(0), dw.as<T>(), dims.k);
    else // dW [K, N] = x^T dy
      gemm<T>(true, false, dims.k, dims.n, dims.m, T(1), xp, dims.k, g, dims.n,
              T(0), dw.as<T>(), dims.n);
  }
  if (db.present())
    columnSums(g, dims.m, dims.n, db.as<T>());
}

} // namespace

void linearKernel(KernelContext &ctx) {
  checkArity(ctx, 2, 3, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { linear<decltype(tag)>(ctx); });
}

void linearGradKernel(KernelContext &ctx) {
  checkArity(ctx, 3, 3, 2, 3);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { linearGrad<decltype(tag)>(ctx); });
}

} // namespace moec::cpu
