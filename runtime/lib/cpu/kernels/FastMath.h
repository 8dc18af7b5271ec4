//===- FastMath.h - vectorised transcendental loops -------------*- C++ -*-===//
//
// Loops over float rows that glibc's scalar expf and tanhf would dominate
// (softmax in attention, the activations). They are compiled for AVX-512,
// AVX2 and baseline x86-64 and picked at load time; contraction is off in
// that file, so every version rounds the same operations the same way and
// returns the same bits.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CPU_KERNELS_FASTMATH_H
#define MOEC_RUNTIME_CPU_KERNELS_FASTMATH_H

#include <cstdint>

namespace moec::cpu {

/// x[j] = exp(x[j] - shift) for j < n, within 2 ulp of the exact value for
/// results in [2^-126, exp(88)]; smaller results (and -inf inputs) give 0,
/// larger ones saturate at exp(88). NaN stays NaN.
void expShiftedInPlace(float *x, int64_t n, float shift);

/// The same in double, through std::exp (the finite-difference checks run
/// the kernels in double).
void expShiftedInPlace(double *x, int64_t n, double shift);

/// y = gelu_tanh(x) = x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2 and,
/// when `dydx` is set, its derivative, for n elements. tanh is computed as
/// 1 - 2 / (exp(2z) + 1): absolute error below 2^-23, which is what the
/// 1 + tanh of GELU can hold anyway. The value never depends on whether the
/// derivative is asked for.
void geluTanhValues(const float *x, float *y, float *dydx, int64_t n);

/// y = tanh(x) and, with `dydx`, 1 - y^2: within 2 ulp of the exact value
/// (a Taylor series near 0, exp beyond; tiny inputs keep their value).
void tanhValues(const float *x, float *y, float *dydx, int64_t n);

/// y = silu(x) = x / (1 + exp(-x)) and, with `dydx`, its derivative.
void siluValues(const float *x, float *y, float *dydx, int64_t n);

} // namespace moec::cpu

#endif // MOEC_RUNTIME_CPU_KERNELS_FASTMATH_H
