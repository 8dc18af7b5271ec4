//===- CpuRopeTest.cpp - moe.rope against its definition ------------------===//
//
// A hand-computed case, random inputs against a reference written from the
// op's description in double, the inverse undoing the rotation, and the
// property rotary embeddings exist for: the score of a rotated query and
// key depends on their positions only through the offset.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

#include "moec/Error.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace moec;
using namespace moec::test;

namespace {

Json ropeAttrs(int64_t heads, int64_t headDim, int64_t rotary, double base,
               bool inverse = false) {
  Json attrs = {{"num_heads", heads},
                {"head_dim", headDim},
                {"rotary_dim", rotary},
                {"base", base}};
  if (inverse)
    attrs["inverse"] = true;
  return attrs;
}

Tensor rope(const Tensor &x, int64_t start, const Json &attrs) {
  return runKernel1("moe.rope", {x, scalarI64(start)}, like(x), attrs);
}

/// moe.rope of x [B, S, heads * headDim] as its description reads, with
/// every quantity in double.
std::vector<double> reference(const Tensor &x, int64_t start, int64_t heads,
                              int64_t headDim, int64_t rotary, double base) {
  std::vector<double> in = values(x), out = in;
  int64_t seq = x.shape()[1], width = heads * headDim, half = rotary / 2;
  for (int64_t row = 0; row < x.shape()[0] * seq; ++row)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < half; ++i) {
        double p = static_cast<double>(start + row % seq);
        double theta = p * std::pow(base, -2.0 * i / rotary);
        int64_t a = row * width + h * headDim + i, b = a + half;
        out[a] = in[a] * std::cos(theta) - in[b] * std::sin(theta);
        out[b] = in[b] * std::cos(theta) + in[a] * std::sin(theta);
      }
  return out;
}

TEST(CpuRope, HandComputedRotation) {
  // Positions 1 and 2 (start 1) of two heads of width 4, base 100: pair 0
  // (features 0 and 2) turns by p radians, pair 1 (features 1 and 3) by
  // p / 10.
  Tensor x = Tensor::of<double>(
      {1, 2, 8}, {1, 2, 3, 4, -1, 0.5, 2, -3, 0.25, -2, 1, 1.5, 0, 0, 0, 0});
  Tensor y = rope(x, 1, ropeAttrs(2, 4, 4, 100));
  // p = 1: [1cos1 - 3sin1, 2cos.1 - 4sin.1, 3cos1 + 1sin1, 4cos.1 + 2sin.1].
  expectValues(y,
               {-1.9841106485555495, 1.590674663968739, 2.4623779024123156,
                4.17968349440576, -2.2232442754839328, 0.7970023325794974,
                0.23913362692838303, -2.9350957875106634,
                // p = 2.
                -1.0133341359624672, -2.2581371518750752, -0.18882247984072198,
                1.0727612051717401, 0, 0, 0, 0},
               2e-6, "rope");

  // rotary_dim 2 of head_dim 4: features 0 and 1 turn by p, 2 and 3 pass.
  Tensor partial = rope(x, 1, ropeAttrs(2, 4, 2, 100));
  double c = std::cos(1.0), s = std::sin(1.0);
  expectValues(partial,
               {1 * c - 2 * s, 2 * c + 1 * s, 3, 4, -1 * c - 0.5 * s,
                0.5 * c - 1 * s, 2, -3,
                0.25 * std::cos(2.0) + 2 * std::sin(2.0),
                -2 * std::cos(2.0) + 0.25 * std::sin(2.0), 1, 1.5, 0, 0, 0, 0},
               2e-6, "partial rope");
}

TEST(CpuRope, RandomInputsMatchTheDefinition) {
  struct Case {
    int64_t heads, headDim, rotary, start;
    double base;
  };
  for (Case c : {Case{2, 8, 8, 0, 10000}, Case{3, 6, 4, 5, 10000},
                 Case{1, 16, 16, 30, 500}, Case{4, 4, 2, 7, 10}}) {
    SCOPED_TRACE(testing::Message()
                 << c.heads << " heads of " << c.headDim << ", rotary "
                 << c.rotary << ", start " << c.start << ", base " << c.base);
    for (DType dtype : {DType::F64, DType::F32}) {
      Tensor x = randomTensor(dtype, {2, 5, c.heads * c.headDim}, 7, -2, 2);
      Tensor y =
          rope(x, c.start, ropeAttrs(c.heads, c.headDim, c.rotary, c.base));
      // cos and sin are f32 by definition: 1e-6 of the values' size.
      expectValues(y,
                   reference(x, c.start, c.heads, c.headDim, c.rotary, c.base),
                   1e-5, "rope");
      // The inverse turns back (an orthogonal matrix up to f32 cos/sin).
      Tensor back = rope(
          y, c.start,
          ropeAttrs(c.heads, c.headDim, c.rotary, c.base, /*inverse=*/true));
      expectClose(back, x, 1e-5, "inverse of rope");
    }
  }
}

TEST(CpuRope, ScoresDependOnlyOnTheOffset) {
  // One head of 16 features: q at position p1 and k at p2, each as a
  // one-token sequence starting there.
  Tensor q = randomTensor(DType::F64, {1, 1, 16}, 3);
  Tensor k = randomTensor(DType::F64, {1, 1, 16}, 4);
  Json attrs = ropeAttrs(1, 16, 16, 10000);
  auto score = [&](int64_t p1, int64_t p2) {
    return dotProduct(rope(q, p1, attrs), rope(k, p2, attrs));
  };
  for (int64_t offset : {0, 1, 3, -2, 17}) {
    SCOPED_TRACE(offset);
    double first = score(40 + offset, 40);
    for (int64_t p2 : {0, 5, 23, 100}) {
      if (p2 + offset < 0)
        continue;
      EXPECT_NEAR(score(p2 + offset, p2), first, 1e-5) << "p2 = " << p2;
    }
  }
  // ... and does depend on it: the rotation is not the identity.
  for (auto [a, b] : {std::pair{1, 3}, {0, 17}, {3, -2}})
    EXPECT_GT(std::fabs(score(40 + a, 40) - score(40 + b, 40)), 1e-3)
        << "offsets " << a << " and " << b;
  // Position 0 turns by nothing.
  EXPECT_NEAR(score(0, 0), dotProduct(q, k), 1e-12);
}

TEST(CpuRope, RejectsBadShapesAndStarts) {
  Tensor x = randomTensor(DType::F32, {1, 2, 8}, 1);
  EXPECT_THROW(rope(x, -1, ropeAttrs(2, 4, 4, 10000)), Error);
  EXPECT_THROW(rope(x, 0, ropeAttrs(2, 4, 3, 10000)), Error); // odd
  EXPECT_THROW(rope(x, 0, ropeAttrs(3, 4, 4, 10000)), Error); // width
}

} // namespace
