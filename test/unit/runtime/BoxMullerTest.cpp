//===- BoxMullerTest.cpp - normals from Philox words ----------------------===//
//
// boxMullerPairs against the transform computed in long double by libm,
// hand cases at the quadrant boundaries, and against the scalar
// normalFromWords the device's noise uses.
//
//===----------------------------------------------------------------------===//

#include "BoxMuller.h"
#include "Philox.h"

#include <cmath>
#include <gtest/gtest.h>
#include <vector>

using namespace moec;

namespace {

/// The exact transform, in long double (64-bit mantissa).
void referencePair(uint32_t first, uint32_t second, long double &cosine,
                   long double &sine) {
  long double u = static_cast<long double>((first >> 8) + 1) / 16777216.0L;
  long double turns = static_cast<long double>(second >> 8) / 16777216.0L;
  long double radius = std::sqrt(-2.0L * std::log(u));
  long double angle = 2.0L * 3.14159265358979323846264338327950288L * turns;
  cosine = radius * std::cos(angle);
  sine = radius * std::sin(angle);
}

uint32_t wordOf(uint32_t fraction24) { return fraction24 << 8 | 0x5a; }

} // namespace

TEST(BoxMuller, MatchesTheTransformInLongDouble) {
  // Philox words, and the extremes of both words: u = 2^-24 (the largest
  // radius, 5.77) and u = 1, angles at and beside every multiple of pi/4.
  std::vector<uint32_t> words;
  for (uint32_t b = 0; b < 50000; ++b) {
    PhiloxBlock w = philoxBlock(11, 12, b);
    words.insert(words.end(), w.begin(), w.end());
  }
  for (uint32_t first : {0u, 1u << 8, 0x7fffffffu, 0xfffffe00u, 0xffffffffu})
    for (uint32_t eighth = 0; eighth < 8; ++eighth)
      for (int step : {-1, 0, 1}) {
        uint32_t at = eighth << 21;
        words.push_back(first);
        words.push_back(wordOf((at + step) & 0xffffffu));
      }
  const int64_t pairs = static_cast<int64_t>(words.size() / 2);
  std::vector<double> out(2 * pairs);
  boxMullerPairs(words.data(), pairs, out.data());
  double worst = 0;
  for (int64_t i = 0; i < pairs; ++i) {
    long double c, s;
    referencePair(words[2 * i], words[2 * i + 1], c, s);
    worst = std::max({worst, static_cast<double>(std::fabs(out[2 * i] - c)),
                      static_cast<double>(std::fabs(out[2 * i + 1] - s))});
  }
  EXPECT_LT(worst, 4e-15);
}

TEST(BoxMuller, HandCases) {
  // u = 1 (first word 0xffffff..): radius 0, both normals exactly zero.
  // u = 1/2 and a quarter turn: everything on the sine, sqrt(2 ln 2).
  // u = 1/2 and half a turn: -sqrt(2 ln 2) on the cosine.
  const uint32_t words[] = {0xffffff00u, 1u << 30,    0x7fffff00u,
                            1u << 30,    0x7fffff00u, 1u << 31};
  double out[6];
  boxMullerPairs(words, 3, out);
  EXPECT_EQ(out[0], 0.0);
  EXPECT_EQ(out[1], 0.0);
  const double r = std::sqrt(2.0 * std::log(2.0));
  EXPECT_EQ(out[2], 0.0); // cos of a quarter turn is exactly 0 here
  EXPECT_NEAR(out[3], r, 1e-15);
  EXPECT_NEAR(out[4], -r, 1e-15);
  EXPECT_EQ(out[5], 0.0);
}

TEST(BoxMuller, CosinesAreNormalFromWords) {
  std::vector<uint32_t> words;
  for (uint32_t b = 1; b < 1000; ++b) {
    PhiloxBlock w = philoxBlock(3, 4, b);
    words.insert(words.end(), w.begin(), w.end());
  }
  std::vector<double> out(words.size());
  boxMullerPairs(words.data(), static_cast<int64_t>(words.size() / 2),
                 out.data());
  for (size_t i = 0; i < words.size(); i += 2) {
    // libm's cos of the rounded angle 2 pi t, against the exact reduction
    // in turns: apart by at most a few ulp of the angle times the radius.
    EXPECT_NEAR(out[i], normalFromWords(words[i], words[i + 1]), 1e-14);
    double u = static_cast<double>((words[i] >> 8) + 1) / 16777216.0;
    EXPECT_NEAR(out[i] * out[i] + out[i + 1] * out[i + 1], -2.0 * std::log(u),
                1e-12);
  }
}
