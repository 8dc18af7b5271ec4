//===- InitializersTest.cpp - parameter initial values --------------------===//

#include "Initializers.h"
#include "moec/Error.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace moec;

namespace {

ParamInfo param(const std::string &init, Shape shape, double scale = 1.0) {
  return {"p", DType::F64, std::move(shape), init, scale, false};
}

TEST(Initializers, SinusoidalIsFairseqsLayout) {
  // d = 6: h = 3 frequencies 1, 10000^(-1/2), 10000^(-1); row p is
  // [sin(p w), cos(p w)].
  Tensor t = detail::initialValue(param("sinusoidal", {4, 6}), 7);
  const double w[3] = {1.0, std::pow(10000.0, -0.5), 1e-4};
  for (int64_t p = 0; p < 4; ++p)
    for (int64_t i = 0; i < 3; ++i) {
      EXPECT_NEAR(t.at(p * 6 + i), std::sin(p * w[i]), 1e-15);
      EXPECT_NEAR(t.at(p * 6 + 3 + i), std::cos(p * w[i]), 1e-15);
    }
  // An odd width leaves its last column 0; the seed changes nothing.
  Tensor odd = detail::initialValue(param("sinusoidal", {3, 5}), 1);
  Tensor odd2 = detail::initialValue(param("sinusoidal", {3, 5}), 2);
  for (int64_t p = 0; p < 3; ++p)
    EXPECT_EQ(odd.at(p * 5 + 4), 0.0);
  for (int64_t i = 0; i < odd.numel(); ++i)
    EXPECT_EQ(odd.at(i), odd2.at(i));
  EXPECT_NEAR(odd.at(5 + 1), std::sin(1e-4), 1e-15);
}

TEST(Initializers, XavierBoundAndUnknownNames) {
  Tensor t = detail::initialValue(param("xavier_uniform", {30, 20}, 0.5), 3);
  double bound = 0.5 * std::sqrt(6.0 / 50), largest = 0;
  for (int64_t i = 0; i < t.numel(); ++i)
    largest = std::max(largest, std::abs(t.at(i)));
  EXPECT_LE(largest, bound);
  EXPECT_GT(largest, 0.9 * bound);
  EXPECT_THROW(detail::initialValue(param("gaussian", {2}), 0), Error);
}

} // namespace
