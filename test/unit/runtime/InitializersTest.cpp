//===- InitializersTest.cpp - parameter initial values --------------------===//

#include "Initializers.h"
#include "moec/Error.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace moec;

namespace {

ParamInfo param(const std::string &init, Shape shape, double scale = 1.0) {
  return {"p", DType::F64, std::move(shape), init, scale, false, 0, ""};
}

TEST(Initializers, NormalsHaveUnitMomentsAndIndependentNeighbours) {
  // Both Box-Muller normals of a pair are used: their moments, and the
  // correlation of each value with the next (a cosine and its sine), must be
  // those of independent standard normals.
  const int64_t n = 200003; // not a multiple of 4: the last block is cut
  Tensor t = detail::initialValue(param("normal", {n}, 0.5), 11);
  double sum = 0, sumSq = 0, sumQuart = 0, lag = 0;
  for (int64_t i = 0; i < n; ++i) {
    double z = t.at(i) / 0.5;
    sum += z;
    sumSq += z * z;
    sumQuart += z * z * z * z;
    if (i + 1 < n)
      lag += z * t.at(i + 1) / 0.5;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sumSq / n, 1.0, 0.015);
  EXPECT_NEAR(sumQuart / n, 3.0, 0.1);
  EXPECT_NEAR(lag / n, 0.0, 0.01);
  // A prefix of the same stream: values depend on the index alone.
  Tensor head = detail::initialValue(param("normal", {7}, 0.5), 11);
  for (int64_t i = 0; i < 7; ++i)
    EXPECT_EQ(head.at(i), t.at(i));
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

/// W W^T (rows x rows) of a row-major [rows, cols] tensor.
std::vector<double> gram(const Tensor &w, int64_t rows, int64_t cols) {
  std::vector<double> g(rows * rows, 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < rows; ++j)
      for (int64_t c = 0; c < cols; ++c)
        g[i * rows + j] += w.at(i * cols + c) * w.at(j * cols + c);
  return g;
}

TEST(Initializers, OrthogonalRowsWithTheGain) {
  // The X-MoE expert embeddings: E = 8 rows of 16, W W^T = 0.32^2 I.
  Tensor w = detail::initialValue(param("orthogonal", {8, 16}, 0.32), 5);
  std::vector<double> g = gram(w, 8, 16);
  for (int64_t i = 0; i < 8; ++i)
    for (int64_t j = 0; j < 8; ++j)
      EXPECT_NEAR(g[i * 8 + j], i == j ? 0.32 * 0.32 : 0.0, 1e-14)
          << i << ", " << j;
  // Square: orthogonal both ways.
  Tensor q = detail::initialValue(param("orthogonal", {16, 16}), 5);
  std::vector<double> gq = gram(q, 16, 16);
  for (int64_t i = 0; i < 16; ++i)
    for (int64_t j = 0; j < 16; ++j)
      EXPECT_NEAR(gq[i * 16 + j], i == j ? 1.0 : 0.0, 1e-13);
}

TEST(Initializers, OrthogonalColumnsWhenRowsOutnumberThem) {
  // E = 32 > 16: the columns are orthonormal, W^T W = gain^2 I.
  Tensor w = detail::initialValue(param("orthogonal", {32, 16}, 0.32), 5);
  for (int64_t a = 0; a < 16; ++a)
    for (int64_t b = 0; b < 16; ++b) {
      double dot = 0;
      for (int64_t r = 0; r < 32; ++r)
        dot += w.at(r * 16 + a) * w.at(r * 16 + b);
      EXPECT_NEAR(dot, a == b ? 0.1024 : 0.0, 1e-14) << a << ", " << b;
    }
  // Dimensions after the first are flattened, as torch does: [2, 3, 4] is
  // a [2, 12] matrix with orthonormal rows.
  Tensor t = detail::initialValue(param("orthogonal", {2, 3, 4}), 5);
  std::vector<double> g = gram(t, 2, 12);
  EXPECT_NEAR(g[0], 1.0, 1e-14);
  EXPECT_NEAR(g[1], 0.0, 1e-14);
  EXPECT_NEAR(g[3], 1.0, 1e-14);
}

TEST(Initializers, OrthogonalIsTorchsQOfTheNormalStream) {
  // The Q of the QR of the stream's normals with R's diagonal made
  // positive (torch: Q * sign(diag(R))), here by Gram-Schmidt on the
  // columns of the transposed normals (R_jj = the norm left, > 0).
  const int64_t rows = 3, cols = 5;
  Tensor a = detail::initialValue(param("normal", {rows, cols}), 9);
  Tensor w = detail::initialValue(param("orthogonal", {rows, cols}), 9);
  std::vector<std::vector<double>> basis;
  for (int64_t i = 0; i < rows; ++i) {
    std::vector<double> v(cols);
    for (int64_t c = 0; c < cols; ++c)
      v[c] = a.at(i * cols + c);
    for (const std::vector<double> &u : basis) {
      double dot = 0;
      for (int64_t c = 0; c < cols; ++c)
        dot += u[c] * v[c];
      for (int64_t c = 0; c < cols; ++c)
        v[c] -= dot * u[c];
    }
    double norm = 0;
    for (double e : v)
      norm += e * e;
    for (double &e : v)
      e /= std::sqrt(norm);
    for (int64_t c = 0; c < cols; ++c)
      EXPECT_NEAR(w.at(i * cols + c), v[c], 1e-12) << i << ", " << c;
    basis.push_back(v);
  }
  // Deterministic, and the seed matters.
  Tensor again = detail::initialValue(param("orthogonal", {rows, cols}), 9);
  Tensor other = detail::initialValue(param("orthogonal", {rows, cols}), 10);
  for (int64_t i = 0; i < w.numel(); ++i)
    EXPECT_EQ(w.at(i), again.at(i));
  EXPECT_NE(w.at(0), other.at(0));
  EXPECT_THROW(detail::initialValue(param("orthogonal", {6}), 1), Error);
}

} // namespace
