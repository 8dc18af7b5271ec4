//===- UpdateLoops.cpp - the optimizers' vectorised element loops ---------===//
//
// `omp simd` because the outputs may be the inputs themselves (element i
// reads index i only before it writes index i), which the compiler's own
// overlap check would send down its scalar path. The file is compiled
// without errno for sqrt (a call the vectoriser cannot take) and without
// trapping math; neither changes a value.
//
//===----------------------------------------------------------------------===//

#include "UpdateLoops.h"

#include <cmath>

namespace moec::cpu {

namespace {

template <bool Decoupled, typename T>
inline void adamLoop(const T *param, const T *grad, const T *m, const T *v,
                     T *newParam, T *newM, T *newV, int64_t n,
                     const AdamStep &s) {
  const double lr = s.lr, gradScale = s.gradScale, beta1 = s.beta1,
               beta2 = s.beta2, eps = s.eps, wd = s.weightDecay, bc1 = s.bc1,
               bc2 = s.bc2;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    double p = param[i], g = grad[i] * gradScale, m0 = m[i], v0 = v[i];
    if (!Decoupled)
      g += wd * p;
    double m1 = beta1 * m0 + (1.0 - beta1) * g;
    double v1 = beta2 * v0 + (1.0 - beta2) * g * g;
    double p1 = p - lr * (m1 / bc1) / (std::sqrt(v1 / bc2) + eps);
    if (Decoupled)
      p1 -= lr * wd * p;
    newParam[i] = static_cast<T>(p1);
    newM[i] = static_cast<T>(m1);
    newV[i] = static_cast<T>(v1);
  }
}

template <typename T>
inline void adamDispatch(const T *param, const T *grad, const T *m, const T *v,
                         T *newParam, T *newM, T *newV, int64_t n,
                         const AdamStep &s) {
  if (s.decoupled)
    adamLoop<true>(param, grad, m, v, newParam, newM, newV, n, s);
  else
    adamLoop<false>(param, grad, m, v, newParam, newM, newV, n, s);
}

template <bool Momentum, typename T>
inline void sgdLoop(const T *param, const T *grad, const T *m, T *newParam,
                    T *newM, int64_t n, const SgdStep &s) {
  const double lr = s.lr, gradScale = s.gradScale, momentum = s.momentum,
               wd = s.weightDecay;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    double p = param[i], g = grad[i] * gradScale + wd * p;
    if (Momentum) {
      double m1 = momentum * m[i] + g;
      newParam[i] = static_cast<T>(p - lr * m1);
      newM[i] = static_cast<T>(m1);
    } else {
      newParam[i] = static_cast<T>(p - lr * g);
      newM[i] = m[i]; // exactly, as T
    }
  }
}

template <typename T>
inline void sgdDispatch(const T *param, const T *grad, const T *m, T *newParam,
                        T *newM, int64_t n, const SgdStep &s) {
  if (s.momentum > 0.0)
    sgdLoop<true>(param, grad, m, newParam, newM, n, s);
  else
    sgdLoop<false>(param, grad, m, newParam, newM, n, s);
}

/// Sixteen partial sums: one AVX-512 register of doubles is a single
/// dependency chain of adds, two let loads and adds overlap.
template <typename T> inline double squaresLoop(const T *x, int64_t n) {
  constexpr int64_t kLanes = 16;
  double acc[kLanes] = {};
  int64_t full = n - n % kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
#pragma omp simd
    for (int64_t j = 0; j < kLanes; ++j) {
      double e = x[i + j];
      acc[j] += e * e;
    }
  }
  for (int64_t i = full; i < n; ++i) {
    double e = x[i];
    acc[i - full] += e * e;
  }
  for (int64_t width = kLanes / 2; width > 0; width /= 2)
    for (int64_t j = 0; j < width; ++j)
      acc[j] += acc[j + width];
  return acc[0];
}

} // namespace

__attribute__((target_clones("avx512f", "avx2", "default"))) void
sgdValues(const float *param, const float *grad, const float *m,
          float *newParam, float *newM, int64_t n, const SgdStep &step) {
  sgdDispatch(param, grad, m, newParam, newM, n, step);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void
sgdValues(const double *param, const double *grad, const double *m,
          double *newParam, double *newM, int64_t n, const SgdStep &step) {
  sgdDispatch(param, grad, m, newParam, newM, n, step);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) double
sumOfSquares(const float *x, int64_t n) {
  return squaresLoop(x, n);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) double
sumOfSquares(const double *x, int64_t n) {
  return squaresLoop(x, n);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void
adamValues(const float *param, const float *grad, const float *m,
           const float *v, float *newParam, float *newM, float *newV, int64_t n,
           const AdamStep &step) {
  adamDispatch(param, grad, m, v, newParam, newM, newV, n, step);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void
adamValues(const double *param, const double *grad, const double *m,
           const double *v, double *newParam, double *newM, double *newV,
           int64_t n, const AdamStep &step) {
  adamDispatch(param, grad, m, v, newParam, newM, newV, n, step);
}

} // namespace moec::cpu
