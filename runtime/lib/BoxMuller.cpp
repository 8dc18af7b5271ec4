//===- BoxMuller.cpp - standard normals from Philox words -----------------===//
//
// ln u: u = 2^e f with f in [sqrt(1/2), sqrt(2)), ln f = 2 atanh(s) for
// s = (f - 1) / (f + 1), |s| < 0.172, by its series to s^23 (the rest is
// below 1e-19 of s), and e ln 2 in two parts so that it is exact.
// The angle is reduced in turns, where it is exact (24-bit fractions):
// 4 a / (2 pi) = q + r with integer q and |r| <= 1/2, then sin and cos of
// x = r pi / 2, |x| <= pi / 4, by their Taylor series to x^17 and x^18,
// and the quadrant q swaps and negates them.
//
//===----------------------------------------------------------------------===//

#include "BoxMuller.h"
#include "Horner.h"

#include <array>
#include <cmath>
#include <cstring>

namespace moec {

namespace {

inline double fromBits(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

inline uint64_t toBits(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return bits;
}

/// ln u for a normal double u in (0, 1].
inline double logUnit(double u) {
  constexpr double kLn2Hi = 6.93147180369123816490e-01; // 32 bits: e ln2 exact
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  constexpr double kTwo52 = 4503599627370496.0;
  uint64_t bits = toBits(u);
  // The biased exponent as a double: its bits under 2^52's.
  double e = fromBits((bits >> 52) | toBits(kTwo52)) - (kTwo52 + 1023.0);
  double f = fromBits((bits & 0x000fffffffffffffull) | toBits(1.0));
  bool high = f > M_SQRT2;
  f = high ? 0.5 * f : f;
  e = high ? e + 1.0 : e;
  double s = (f - 1.0) / (f + 1.0), s2 = s * s;
  constexpr std::array<double, 11> kAtanh = {
      1.0 / 23, 1.0 / 21, 1.0 / 19, 1.0 / 17, 1.0 / 15, 1.0 / 13,
      1.0 / 11, 1.0 / 9,  1.0 / 7,  1.0 / 5,  1.0 / 3};
  double p = horner(s2, kAtanh);
  double lnF = 2.0 * s + 2.0 * (s * s2 * p);
  return e * kLn2Hi + (lnF + e * kLn2Lo);
}

/// cos and sin of 2 pi turns, for turns in [0, 1) with at most 24
/// significant bits.
inline void cosSinOfTurns(double turns, double &cosine, double &sine) {
  constexpr double kRound = 6755399441055744.0; // 1.5 * 2^52
  constexpr double kHalfPi = 1.57079632679489661923;
  double t = 4.0 * turns;
  double q = (t + kRound) - kRound; // nearest integer, 0 .. 4
  double x = (t - q) * kHalfPi, x2 = x * x;
  // 1/17!, -1/15!, ... and -1/18!, 1/16!, ...: sin's and cos's series.
  constexpr std::array<double, 8> kSin = {1.0 / 355687428096000.0,
                                          -1.0 / 1307674368000.0,
                                          1.0 / 6227020800.0,
                                          -1.0 / 39916800.0,
                                          1.0 / 362880.0,
                                          -1.0 / 5040.0,
                                          1.0 / 120.0,
                                          -1.0 / 6.0};
  constexpr std::array<double, 8> kCos = {-1.0 / 6402373705728000.0,
                                          1.0 / 20922789888000.0,
                                          -1.0 / 87178291200.0,
                                          1.0 / 479001600.0,
                                          -1.0 / 3628800.0,
                                          1.0 / 40320.0,
                                          -1.0 / 720.0,
                                          1.0 / 24.0};
  double sinX = x + x * x2 * horner(x2, kSin);
  double cosX = (1.0 - 0.5 * x2) + x2 * x2 * horner(x2, kCos);
  // Quadrant q: cos(q pi/2 + x), sin(q pi/2 + x); q = 4 is q = 0.
  bool swap = q == 1.0 || q == 3.0;
  bool negateCos = q == 1.0 || q == 2.0;
  bool negateSin = q == 2.0 || q == 3.0;
  double c = swap ? sinX : cosX, s = swap ? cosX : sinX;
  cosine = negateCos ? -c : c;
  sine = negateSin ? -s : s;
}

} // namespace

__attribute__((target_clones("avx512f", "avx2", "default"))) void
boxMullerPairs(const uint32_t *words, int64_t pairs, double *out) {
  constexpr double kTwoToMinus24 = 1.0 / 16777216.0;
  for (int64_t i = 0; i < pairs; ++i) {
    double u = static_cast<double>((words[2 * i] >> 8) + 1) * kTwoToMinus24;
    double turns = static_cast<double>(words[2 * i + 1] >> 8) * kTwoToMinus24;
    double radius = std::sqrt(-2.0 * logUnit(u));
    double c, s;
    cosSinOfTurns(turns, c, s);
    out[2 * i] = radius * c;
    out[2 * i + 1] = radius * s;
  }
}

} // namespace moec
