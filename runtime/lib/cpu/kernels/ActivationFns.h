//===- ActivationFns.h - pointwise activations and derivatives -*- C++ -*-===//
//
// The `#moe.activation` kinds, shared by moe.activation(_grad) and the
// expert FFN kernels. Values are computed in the element type T.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CPU_KERNELS_ACTIVATIONFNS_H
#define MOEC_RUNTIME_CPU_KERNELS_ACTIVATIONFNS_H

#include "Common.h"
#include "FastMath.h"

#include <cmath>

namespace moec::cpu {

using defs::Activation;

namespace act {
constexpr double kSqrt2OverPi = 0.79788456080286535588; // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794; // 1 / sqrt(2 pi)

/// f(x) and, through `dfdx`, f'(x) (relu'(0) = 0), evaluating each kind's
/// transcendental once.
template <Activation K, typename T> inline T valueAndDerivative(T x, T &dfdx) {
  if constexpr (K == Activation::Identity) {
    dfdx = T(1);
    return x;
  } else if constexpr (K == Activation::Relu) {
    dfdx = x > T(0) ? T(1) : T(0);
    return x > T(0) ? x : T(0);
  } else if constexpr (K == Activation::GeluTanh) {
    T x2 = x * x;
    T t = std::tanh(T(kSqrt2OverPi) * (x + T(kGeluCubic) * x2 * x));
    dfdx = T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * T(kSqrt2OverPi) *
                                     (T(1) + T(3 * kGeluCubic) * x2);
    return T(0.5) * x * (T(1) + t);
  } else if constexpr (K == Activation::GeluErf) {
    T e = std::erf(x * T(kInvSqrt2));
    dfdx = T(0.5) * (T(1) + e) + x * std::exp(T(-0.5) * x * x) * T(kInvSqrt2Pi);
    return T(0.5) * x * (T(1) + e);
  } else if constexpr (K == Activation::Silu) {
    T denom = T(1) + std::exp(-x);
    T s = T(1) / denom;
    dfdx = s * (T(1) + x * (T(1) - s));
    return x / denom;
  } else {
    T t = std::tanh(x);
    dfdx = T(1) - t * t;
    return t;
  }
}

/// y[i] = f(x[i]) for i < n and, with `dydx`, f'(x[i]); float GELU (tanh),
/// SiLU and tanh go through the vectorised loops of FastMath.h. Whether
/// dydx is asked for never changes y.
template <Activation K, typename T>
void values(const T *x, T *y, T *dydx, int64_t n) {
  if constexpr (std::is_same_v<T, float> && K == Activation::GeluTanh)
    return geluTanhValues(x, y, dydx, n);
  else if constexpr (std::is_same_v<T, float> && K == Activation::Silu)
    return siluValues(x, y, dydx, n);
  else if constexpr (std::is_same_v<T, float> && K == Activation::Tanh)
    return tanhValues(x, y, dydx, n);
  for (int64_t i = 0; i < n; ++i) {
    T dfdx;
    y[i] = valueAndDerivative<K>(x[i], dfdx);
    if (dydx)
      dydx[i] = dfdx;
  }
}

/// Elements per task of the activation loops: large enough to amortise
/// the fork, small enough for a chunk-sized buffer on the stack.
constexpr int64_t kChunk = 2048;

/// fn(begin, count) over [0, n) in chunks of kChunk, in parallel.
template <typename Fn> void forChunks(int64_t n, Fn &&fn) {
  parallelFor((n + kChunk - 1) / kChunk, 20 * kChunk, [&](int64_t c) {
    fn(c * kChunk, std::min(kChunk, n - c * kChunk));
  });
}

/// Calls `fn(std::integral_constant<Activation, K>{})` for the runtime kind,
/// so loops are instantiated once per kind with no switch inside.
template <typename Fn> void withKind(Activation kind, Fn &&fn) {
  switch (kind) {
  case Activation::Identity:
    return fn(std::integral_constant<Activation, Activation::Identity>{});
  case Activation::Relu:
    return fn(std::integral_constant<Activation, Activation::Relu>{});
  case Activation::GeluTanh:
    return fn(std::integral_constant<Activation, Activation::GeluTanh>{});
  case Activation::GeluErf:
    return fn(std::integral_constant<Activation, Activation::GeluErf>{});
  case Activation::Silu:
    return fn(std::integral_constant<Activation, Activation::Silu>{});
  case Activation::Tanh:
    return fn(std::integral_constant<Activation, Activation::Tanh>{});
  }
}
} // namespace act

} // namespace moec::cpu

#endif // MOEC_RUNTIME_CPU_KERNELS_ACTIVATIONFNS_H
