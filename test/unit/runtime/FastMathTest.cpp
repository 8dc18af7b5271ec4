//===- FastMathTest.cpp - the vectorised exp, GELU and SiLU loops ---------===//

#include "cpu/kernels/FastMath.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <limits>
#include <random>
#include <vector>

using namespace moec::cpu;

TEST(FastMath, ExpIsWithinTwoUlpOfTheExactValue) {
  std::vector<float> x;
  for (int i = 0; i <= 200000; ++i)
    x.push_back(-87.0f + 175.0f * static_cast<float>(i) / 200000.0f);
  std::vector<float> e = x;
  expShiftedInPlace(e.data(), static_cast<int64_t>(e.size()), 0.0f);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double exact = std::exp(static_cast<double>(x[i]));
    worst = std::max(worst, std::abs(e[i] - exact) / exact);
  }
  EXPECT_LT(worst, 2.4e-7); // 2 ulp of float
}

TEST(FastMath, ExpShiftsAndHandlesTheEdges) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {3.0f, -inf, -200.0f, 200.0f, std::nanf(""), 0.0f};
  expShiftedInPlace(x.data(), static_cast<int64_t>(x.size()), 1.0f);
  EXPECT_NEAR(x[0], std::exp(2.0), 2e-7 * std::exp(2.0));
  EXPECT_EQ(x[1], 0.0f); // a masked score weighs nothing
  EXPECT_EQ(x[2], 0.0f);
  EXPECT_NEAR(x[3], std::exp(88.0), 1e-6 * std::exp(88.0)); // saturates
  EXPECT_TRUE(std::isnan(x[4]));
  EXPECT_NEAR(x[5], std::exp(-1.0), 2e-7);
}

namespace {

double geluTanh(double x) {
  return 0.5 * x *
         (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double silu(double x) { return x / (1 + std::exp(-x)); }
double tanhExact(double x) { return std::tanh(x); }

/// f and f' of `fast` against the double formula on random inputs; the
/// value must not depend on whether the derivative is asked for.
void expectMatchesDouble(void (*fast)(const float *, float *, float *,
                                      int64_t),
                         double (*exact)(double)) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(-12.0f, 12.0f);
  std::vector<float> x(5000);
  for (float &v : x)
    v = uniform(rng);
  x[0] = 1e-5f;
  x[1] = -30.0f;
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> y(n), y2(n), dy(n);
  fast(x.data(), y.data(), nullptr, n);
  fast(x.data(), y2.data(), dy.data(), n);
  EXPECT_EQ(0, std::memcmp(y.data(), y2.data(), n * sizeof(float)));
  for (int64_t i = 0; i < n; ++i) {
    double v = x[i], h = 1e-4 * std::max(1.0, std::abs(v));
    double slope = (exact(v + h) - exact(v - h)) / (2 * h);
    EXPECT_NEAR(y[i], exact(v), 1e-6 * std::max(1.0, std::abs(v))) << v;
    EXPECT_NEAR(dy[i], slope, 1e-5) << v;
  }
}

} // namespace

TEST(FastMath, GeluTanhMatchesItsDefinition) {
  expectMatchesDouble(geluTanhValues, geluTanh);
}

TEST(FastMath, SiluMatchesItsDefinition) {
  expectMatchesDouble(siluValues, silu);
}

TEST(FastMath, TanhMatchesItsDefinition) {
  expectMatchesDouble(tanhValues, tanhExact);
}

TEST(FastMath, TanhIsWithinTwoUlp) {
  // In units of the float spacing at the exact value: tiny inputs (where
  // 1 - 2 / (exp(2x) + 1) alone would cancel), the series up to 0.55, the
  // exp form after it up to where tanh rounds to 1, both signs.
  std::vector<float> x;
  for (int i = 1; i <= 100000; ++i) {
    float v = 9.0f * static_cast<float>(i) / 100000.0f;
    x.push_back(v);
    x.push_back(-v);
    x.push_back(v * 1e-5f);
  }
  for (float v = 0.5f; v < 0.62f; v = std::nextafter(v, 1.0f))
    x.push_back(v);
  x.push_back(1e-30f);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> y(n), dy(n);
  tanhValues(x.data(), y.data(), dy.data(), n);
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    double exact = std::tanh(static_cast<double>(x[i]));
    float nearest = static_cast<float>(std::abs(exact));
    double ulp = std::nextafter(nearest, 2.0f) - nearest;
    worst = std::max(worst, std::abs(y[i] - exact) / ulp);
    EXPECT_NEAR(dy[i], 1 - exact * exact, 1e-6) << x[i];
  }
  EXPECT_LE(worst, 2.0);
}

TEST(FastMath, TanhHandlesTheEdges) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {inf, -inf, 100.0f, -100.0f, std::nanf(""), -0.0f};
  std::vector<float> y(x.size());
  tanhValues(x.data(), y.data(), nullptr, static_cast<int64_t>(x.size()));
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -1.0f);
  EXPECT_EQ(y[2], 1.0f);
  EXPECT_EQ(y[3], -1.0f);
  EXPECT_TRUE(std::isnan(y[4]));
  EXPECT_EQ(y[5], 0.0f);
  EXPECT_TRUE(std::signbit(y[5]));
}
