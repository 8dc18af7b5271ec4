//===- Elementwise.cpp - the arith float ops the plans use ----------------===//
//
// Operands have the same shape, or one is 0-d and broadcasts against the
// other. maximumf / minimumf follow arith: NaN propagates and -0 < +0.
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "Kernels.h"

#include <cmath>
#include <fmt/format.h>
#include <limits>

namespace moec::cpu {

namespace {

struct Add {
  template <typename T> T operator()(T a, T b) const { return a + b; }
};
struct Sub {
  template <typename T> T operator()(T a, T b) const { return a - b; }
};
struct Mul {
  template <typename T> T operator()(T a, T b) const { return a * b; }
};
struct Div {
  template <typename T> T operator()(T a, T b) const { return a / b; }
};
struct Max {
  template <typename T> T operator()(T a, T b) const {
    if (std::isnan(a) || std::isnan(b))
      return std::numeric_limits<T>::quiet_NaN();
    if (a == b) // only the sign of a zero can differ
      return std::signbit(a) ? b : a;
    return a > b ? a : b;
  }
};
struct Min {
  template <typename T> T operator()(T a, T b) const {
    if (std::isnan(a) || std::isnan(b))
      return std::numeric_limits<T>::quiet_NaN();
    if (a == b)
      return std::signbit(a) ? a : b;
    return a < b ? a : b;
  }
};

template <typename T, typename Op> void binary(KernelContext &ctx, Op op) {
  const TensorView &lhs = requireInput(ctx, 0, "lhs");
  const TensorView &rhs = requireInput(ctx, 1, "rhs");
  expectDType(ctx, rhs, dtypeOf<T>(), "rhs");
  bool lhsScalar = lhs.rank() == 0, rhsScalar = rhs.rank() == 0;
  if (lhs.shape != rhs.shape && !lhsScalar && !rhsScalar)
    ctx.fail(fmt::format("operand shapes {} and {} differ and neither is 0-d",
                         shapeString(lhs.shape), shapeString(rhs.shape)));
  const TensorView &full = lhsScalar ? rhs : lhs;
  const TensorView &out = ctx.out(0);
  if (!out.present())
    return;
  expectDType(ctx, out, dtypeOf<T>(), "the result");
  expectShape(ctx, out, full.shape, "the result");
  const T *a = lhs.as<T>(), *b = rhs.as<T>();
  T *y = out.as<T>();
  // Per-element strides of 0 or 1 express the broadcast.
  int64_t sa = lhsScalar ? 0 : 1, sb = rhsScalar ? 0 : 1;
  parallelFor(full.numel(), 1,
              [&](int64_t i) { y[i] = op(a[i * sa], b[i * sb]); });
}

template <typename Op> void binaryKernel(KernelContext &ctx, Op op) {
  checkArity(ctx, 2, 2, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "lhs"), "lhs",
                [&](auto tag) { binary<decltype(tag)>(ctx, op); });
}

template <typename T> void negate(KernelContext &ctx) {
  const TensorView &x = requireInput(ctx, 0, "operand");
  const TensorView &out = ctx.out(0);
  if (!out.present())
    return;
  expectDType(ctx, out, dtypeOf<T>(), "the result");
  expectShape(ctx, out, x.shape, "the result");
  const T *a = x.as<T>();
  T *y = out.as<T>();
  parallelFor(x.numel(), 1, [&](int64_t i) { y[i] = -a[i]; });
}

} // namespace

void addfKernel(KernelContext &ctx) { binaryKernel(ctx, Add()); }
void subfKernel(KernelContext &ctx) { binaryKernel(ctx, Sub()); }
void mulfKernel(KernelContext &ctx) { binaryKernel(ctx, Mul()); }
void divfKernel(KernelContext &ctx) { binaryKernel(ctx, Div()); }
void maximumfKernel(KernelContext &ctx) { binaryKernel(ctx, Max()); }
void minimumfKernel(KernelContext &ctx) { binaryKernel(ctx, Min()); }

void negfKernel(KernelContext &ctx) {
  checkArity(ctx, 1, 1, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "operand"), "operand",
                [&](auto tag) { negate<decltype(tag)>(ctx); });
}

} // namespace moec::cpu
