//===- UpdateLoops.h - the optimizers' vectorised element loops -*- C++ -*-===//
//
// Adam's and SGD's updates of a run of elements and the gradient norm's sum
// of squares, in double whatever the storage.
// Compiled for AVX-512, AVX2 and baseline x86-64 and picked at load time,
// with contraction off, so every version rounds the same operations the
// same way and returns the same bits (those of the scalar loop it
// replaced).
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CPU_KERNELS_UPDATELOOPS_H
#define MOEC_RUNTIME_CPU_KERNELS_UPDATELOOPS_H

#include <cstdint>

namespace moec::cpu {

/// The constants of one Adam step: bc1 = 1 - beta1^step and bc2 = 1 -
/// beta2^step are the bias corrections; `decoupled` is AdamW's weight
/// decay (on the parameter) instead of L2 (on the gradient).
struct AdamStep {
  double lr, gradScale, beta1, beta2, eps, weightDecay, bc1, bc2;
  bool decoupled;
};

/// For i < n, with g = grad[i] * gradScale (+ weightDecay * param[i] for
/// L2): m' = beta1 m + (1 - beta1) g, v' = beta2 v + (1 - beta2) g^2 and
/// param' = param - lr (m' / bc1) / (sqrt(v' / bc2) + eps) (- lr
/// weightDecay param for AdamW). Each output may be its input (in place).
void adamValues(const float *param, const float *grad, const float *m,
                const float *v, float *newParam, float *newM, float *newV,
                int64_t n, const AdamStep &step);
void adamValues(const double *param, const double *grad, const double *m,
                const double *v, double *newParam, double *newM, double *newV,
                int64_t n, const AdamStep &step);

/// The constants of one SGD step (momentum 0: plain SGD, m passes through).
struct SgdStep {
  double lr, gradScale, momentum, weightDecay;
};

/// For i < n, with g = grad[i] * gradScale + weightDecay * param[i]: m' =
/// momentum m + g and param' = param - lr m' (momentum > 0), or param' =
/// param - lr g and m' = m. Each output may be its input (in place).
void sgdValues(const float *param, const float *grad, const float *m,
               float *newParam, float *newM, int64_t n, const SgdStep &step);
void sgdValues(const double *param, const double *grad, const double *m,
               double *newParam, double *newM, int64_t n, const SgdStep &step);

/// The sum of x[i]^2 for i < n, in double: element i goes to partial sum
/// i % 16 and the 16 partial sums are added in a fixed tree, so the result
/// has the same bits whichever instruction set runs it.
double sumOfSquares(const float *x, int64_t n);
double sumOfSquares(const double *x, int64_t n);

} // namespace moec::cpu

#endif // MOEC_RUNTIME_CPU_KERNELS_UPDATELOOPS_H
