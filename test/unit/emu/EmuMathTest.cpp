//===- EmuMathTest.cpp - CUDA math functions on the host ------------------===//

#include "EmuTestUtil.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

using namespace moec::emu;
using namespace moec::emu::test;

namespace {

float flipSign(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits ^= 0x80000000u;
  std::memcpy(&v, &bits, sizeof bits);
  return v;
}

} // namespace

// The same libm as the host, so results agree bit for bit; the fast
// intrinsics (__expf) are the exact functions, rsqrtf is 1 / sqrtf.
TEST(EmuMath, FunctionsMatchTheHostLibrary) {
  const int n = 64;
  std::vector<float> x(n), y(17 * n);
  std::vector<double> yd(11 * n);
  for (int i = 0; i < n; ++i)
    x[i] = -4.0f + 0.13f * i;
  Launch(1, n).buffer(0, x).buffer(1, y).buffer(2, yd).run(correctModule(),
                                                           "mathFunctions");
  for (int t = 0; t < n; ++t) {
    const float v = x[t], w = x[(t + 1) % n], a = std::fabs(v);
    const float expected[17] = {std::exp(v),
                                std::log(a + 1.0f),
                                std::log1p(a),
                                std::tanh(v),
                                std::erf(v),
                                std::sqrt(a),
                                1.0f / std::sqrt(a + 1.0f),
                                std::fmax(v, 0.5f),
                                std::fmin(v, 0.5f),
                                std::exp(v),
                                std::log(a + 1.0f),
                                1.0f / (v + 10.0f),
                                v / 3.0f,
                                std::fma(v, w, 1.0f),
                                flipSign(v),
                                a,
                                v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v)};
    for (int k = 0; k < 17; ++k)
      EXPECT_EQ(y[17 * t + k], expected[k]) << "function " << k << " at " << v;
    const double d = v, e = w;
    const double expectedD[11] = {std::exp(d),
                                  std::log(std::fabs(d) + 1.0),
                                  std::log1p(std::fabs(d)),
                                  std::tanh(d),
                                  std::erf(d),
                                  std::sqrt(std::fabs(d)),
                                  1.0 / std::sqrt(std::fabs(d) + 1.0),
                                  std::fmax(d, 0.5),
                                  std::fmin(d, 0.5),
                                  std::fma(d, e, 1.0),
                                  1.0 / (d + 10.0)};
    for (int k = 0; k < 11; ++k)
      EXPECT_EQ(yd[11 * t + k], expectedD[k])
          << "function " << k << " at " << d;
  }
}
