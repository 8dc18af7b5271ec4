//===- EmuTf32Test.cpp - the tf32 GEMM tiles against double precision -----===//
//
// gemmTileTf32 and gemmTile3xTf32 (runtime/device/gemm.cuh) on the emu
// device, against products computed in double: tf32 within its error bound,
// 3xTF32 much closer, near gemmTile's fp32 FMA.
//
//===----------------------------------------------------------------------===//

#include "EmuTestUtil.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <iostream>
#include <random>

using namespace moec::emu;
using namespace moec::emu::test;

namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

/// How far one result is from the exact product.
struct Errors {
  /// ||C - exact|| / ||exact|| over all outputs (what the kernel check
  /// measures).
  double normwise = 0;
  /// The largest |C - exact| / sum_k |A B|, over outputs: the error per
  /// unit of product magnitude, which bounds rounding analyses state.
  double componentwise = 0;
};

Errors errorsOf(const FloatGemmProblem &p, const std::vector<float> &C) {
  Errors e;
  double diff2 = 0, ref2 = 0;
  for (int64_t m = 0; m < p.M; ++m)
    for (int64_t n = 0; n < p.N; ++n) {
      double exact = 0, magnitude = 0;
      for (int64_t k = 0; k < p.K; ++k) {
        double product = p.A[m * p.K + k] * p.B[k * p.N + n];
        exact += product;
        magnitude += std::fabs(product);
      }
      double d = C[m * p.N + n] - exact;
      diff2 += d * d;
      ref2 += exact * exact;
      e.componentwise = std::max(e.componentwise, std::fabs(d) / magnitude);
    }
  e.normwise = std::sqrt(diff2 / ref2);
  return e;
}

std::vector<FloatGemmProblem> tf32Problems() {
  std::vector<FloatGemmProblem> p;
  p.emplace_back("gemmTf32Rows64x64", 0, 64, 64, 1, 1, 1, 1, 1, 1);
  p.emplace_back("gemmTf32Rows64x64", 0, 64, 64, 37, 53, 70, 72, 57, 2);
  p.emplace_back("gemmTf32Rows64x64", 0, 64, 64, 128, 96, 300, 301, 96, 3);
  p.emplace_back("gemmTf32Cols128x32", 1, 128, 32, 37, 53, 70, 40, 71, 4);
  p.emplace_back("gemmTf32Cols128x32", 1, 128, 32, 130, 70, 100, 131, 101, 5);
  p.emplace_back("gemmTf32Gather64x32", 2, 64, 32, 37, 53, 70, 73, 80, 6);
  p.emplace_back("gemmTf32GatherT64x64", 3, 64, 64, 37, 53, 70, 41, 56, 7);
  return p;
}

} // namespace

// cvtRnaTf32 on the emu device rounds to nearest, ties away from zero, as
// cvt.rna.tf32.f32 does: ties, carries into the exponent, subnormals,
// infinities and NaN.
TEST(EmuTf32, CvtRnaTf32RoundsToNearestTiesAway) {
  std::vector<float> x = {1.0f + 0x1p-11f,  -(1.0f + 0x1p-11f),
                          1.0f + 0x1p-11f - 0x1p-23f,
                          1.0f + 3 * 0x1p-11f, 0x1.fffp0f * 0x1p5f,
                          0x1p-140f + 0x1p-149f, 0x1.fffffep127f,
                          INFINITY, -INFINITY, NAN, 0.0f, -0.0f};
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  while (x.size() < 512)
    x.push_back(std::ldexp(normal(rng), static_cast<int>(rng() % 60) - 30));
  std::vector<uint32_t> out(x.size());
  Launch(2, 256).buffer(0, x).buffer(1, out).run(correctModule(), "roundTf32");
  for (size_t i = 0; i < x.size(); ++i) {
    float got;
    std::memcpy(&got, &out[i], sizeof got);
    if (std::isnan(x[i])) {
      EXPECT_EQ(out[i], 0x7fffffffu) << "PTX's canonical NaN";
      continue;
    }
    EXPECT_EQ(out[i] & 0x1fffu, 0u) << x[i];
    EXPECT_EQ(bitsOf(got), bitsOf(roundToTf32(x[i]))) << std::hexfloat << x[i];
  }
  EXPECT_EQ(out[0], bitsOf(1.0f + 0x1p-10f)) << "ties round away from zero";
  EXPECT_EQ(out[2], bitsOf(1.0f));
}

// Ragged sizes (M, N, K not multiples of the tile), both operand layouts
// and gathered rows and columns. tf32: every output within the rounding
// bound of its products, (2^-10 + K 2^-24) sum |A B|, and visibly less
// accurate than fp32. 3xTF32: within (2^-20 + 3 K 2^-24) sum |A B|, at
// least 100 times closer than tf32 and close to gemmTile's fp32 FMA.
TEST(EmuTf32, TilesStayWithinTheirErrorBounds) {
  for (FloatGemmProblem &p : tf32Problems()) {
    SCOPED_TRACE(p.name());
    Errors tf32 = errorsOf(p, p.run(correctModule(), 0));
    Errors split = errorsOf(p, p.run(correctModule(), 1));
    Errors fp32 = errorsOf(p, p.run(correctModule(), 2));
    std::cout << p.name() << ": normwise error tf32 " << tf32.normwise
              << ", 3xTF32 " << split.normwise << ", fp32 " << fp32.normwise
              << "\n";
    const double K = static_cast<double>(p.K);
    EXPECT_LE(tf32.componentwise, 0x1p-10 + K * 0x1p-24);
    EXPECT_LE(split.componentwise, 0x1p-20 + 3 * K * 0x1p-24);
    // Normwise, independent roundings of random signs give about
    // 2^-11 sqrt(2/3) for tf32; the kernel check allows 5e-3.
    EXPECT_LE(tf32.normwise, 2e-3);
    if (p.K > 1) {
      EXPECT_GE(tf32.normwise, 0x1p-16) << "the operands should be rounded";
      EXPECT_LE(split.normwise, tf32.normwise / 100);
    }
    EXPECT_LE(split.normwise, 4 * fp32.normwise + 0x1p-21);
  }
}

// Check mode: no read past the operands, no read of shared memory before it
// was written; the same results as the normal build.
TEST(EmuTf32, TilesPassCheckMode) {
  std::vector<FloatGemmProblem> problems = tf32Problems();
  for (size_t i : {1, 3, 5, 6}) {
    FloatGemmProblem &p = problems[i];
    for (int which : {0, 1})
      EXPECT_EQ(p.run(checkedModule(), which), p.run(correctModule(), which))
          << p.name() << " which " << which;
  }
}
