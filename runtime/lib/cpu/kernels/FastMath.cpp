//===- FastMath.cpp - vectorised transcendental loops ---------------------===//
//
// exp by range reduction: x = k ln2 + r with |r| <= ln2 / 2, exp(r) by its
// Taylor series to r^7 (truncation below 6e-9 relative), 2^k by building
// the float's exponent field. Branch-free, so the compiler vectorises it.
//
//===----------------------------------------------------------------------===//

#include "FastMath.h"
#include "Horner.h"

#include <array>
#include <cmath>
#include <cstring>

namespace moec::cpu {

namespace {

inline float expOne(float x) {
  constexpr float kLowest = -87.33654475f; // log(2^-126)
  constexpr float kHighest = 88.0f;        // keeps 2^k a normal float
  constexpr float kLog2e = 1.44269504089f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f; // 1.5 * 2^23: adding rounds to int
  float t = x < kLowest ? kLowest : (x > kHighest ? kHighest : x);
  t = t == t ? t : 0.0f;
  float kf = (t * kLog2e + kRound) - kRound;
  float r = t - kf * kLn2Hi - kf * kLn2Lo;
  constexpr std::array<float, 8> kExp = {
      1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f,
      1.0f / 6.0f,    0.5f,          1.0f,          1.0f};
  float p = horner(r, kExp);
  int32_t bits = (static_cast<int32_t>(kf) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  float e = p * scale;
  return x < kLowest ? 0.0f : (x == x ? e : x);
}

/// tanh(x): below |x| = 0.55 by the odd Taylor series to x^17 (the first
/// term left out is under 6e-9 of the value there), above it as
/// 1 - 2 / (exp(2|x|) + 1), which cancels little once tanh >= 0.5. Both
/// are computed and one is selected, so the loop stays branch-free.
inline float tanhOne(float x) {
  float a = x < 0.0f ? -x : x;
  float s = a * a;
  constexpr std::array<float, 8> kTanh = {6404582.0f / 10854718875.0f,
                                          -929569.0f / 638512875.0f,
                                          21844.0f / 6081075.0f,
                                          -1382.0f / 155925.0f,
                                          62.0f / 2835.0f,
                                          -17.0f / 315.0f,
                                          2.0f / 15.0f,
                                          -1.0f / 3.0f};
  float small = a + a * s * horner(s, kTanh);
  float large = 1.0f - 2.0f / (expOne(2.0f * a) + 1.0f);
  float t = std::copysign(a < 0.55f ? small : large, x); // keeps -0
  return x == x ? t : x;
}

} // namespace

__attribute__((target_clones("avx512f", "avx2", "default"))) void
tanhValues(const float *x, float *y, float *dydx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float t = tanhOne(x[i]);
    y[i] = t;
    if (dydx)
      dydx[i] = 1.0f - t * t;
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void
expShiftedInPlace(float *x, int64_t n, float shift) {
  for (int64_t j = 0; j < n; ++j)
    x[j] = expOne(x[j] - shift);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void
geluTanhValues(const float *x, float *y, float *dydx, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608f, kCubic = 0.044715f;
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i], v2 = v * v;
    float z = kSqrt2OverPi * (v + kCubic * v2 * v);
    float t = 1.0f - 2.0f / (expOne(2.0f * z) + 1.0f);
    y[i] = 0.5f * v * (1.0f + t);
    if (dydx)
      dydx[i] = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kSqrt2OverPi *
                                        (1.0f + 3.0f * kCubic * v2);
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void
siluValues(const float *x, float *y, float *dydx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i], denom = 1.0f + expOne(-v), s = 1.0f / denom;
    y[i] = v / denom;
    if (dydx)
      dydx[i] = s * (1.0f + v * (1.0f - s));
  }
}

void expShiftedInPlace(double *x, int64_t n, double shift) {
  for (int64_t j = 0; j < n; ++j)
    x[j] = std::exp(x[j] - shift);
}

} // namespace moec::cpu
