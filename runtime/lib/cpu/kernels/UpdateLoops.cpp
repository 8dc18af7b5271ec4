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

} // namespace

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
