//===- EmuGemmRowsTest.cpp - gemmRows, decoding's few-row products --------===//
//
// gemmRows (runtime/device/gemm.cuh) on the emu device: at most
// kGemmRowsMax rows, both of its mappings (lanes along n for B row-major
// or gathered by row; lanes along k for B column-major or gathered by
// column), ragged widths and depths, and its three operand roundings,
// against products of the rounded operands computed in double.
//
//===----------------------------------------------------------------------===//

#include "EmuTestUtil.h"

#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>

using namespace moec::emu;
using namespace moec::emu::test;

namespace {

/// The operand roundings, as `which` - kRowsWhich of the gemmTf32*
/// kernels (FloatGemmProblem::run).
enum Rounding { kFp32 = 0, kBf16 = 1, kTf32 = 2 };
constexpr int kRowsWhich = 3;

float rounded(float x, int rounding) {
  return rounding == kBf16   ? roundToBf16(x)
         : rounding == kTf32 ? roundToTf32(x)
                             : x;
}

/// Both of gemmRows' mappings: B row-major (layout 0) and gathered by row
/// (3) put the lanes along n, B column-major (1) and gathered by column (2)
/// along k; tiles 64 and 32 wide; 1 to 8 rows.
std::vector<FloatGemmProblem> rowsProblems() {
  std::vector<FloatGemmProblem> p;
  p.emplace_back("gemmTf32Rows64x64", 0, 64, 64, 1, 1, 1, 1, 1, 1);
  p.emplace_back("gemmTf32Rows64x64", 0, 64, 64, 1, 200, 300, 301, 203, 2);
  p.emplace_back("gemmTf32Rows64x64", 0, 64, 64, 8, 130, 70, 72, 131, 3);
  p.emplace_back("gemmTf32Cols128x32", 1, 128, 32, 1, 70, 300, 3, 301, 4);
  p.emplace_back("gemmTf32Cols128x32", 1, 128, 32, 8, 33, 65, 9, 66, 5);
  p.emplace_back("gemmTf32Gather64x32", 2, 64, 32, 2, 100, 70, 73, 80, 6);
  p.emplace_back("gemmTf32GatherT64x64", 3, 64, 64, 7, 53, 90, 41, 56, 7);
  return p;
}

} // namespace

// Every output within fp32 summation error of the exact product of the
// rounded operands: |C - exact| <= (K + 1) 2^-24 sum_k |A B|. Rounding
// applied where asked: bf16 and tf32 are visibly away from the product of
// the unrounded operands (an unrounded kernel fails the first check).
TEST(EmuGemmRows, MatchesTheProductOfRoundedOperands) {
  std::vector<FloatGemmProblem> problems = rowsProblems();
  for (FloatGemmProblem &p : problems)
    for (int rounding : {kFp32, kBf16, kTf32}) {
      SCOPED_TRACE(p.name() + " rounding " + std::to_string(rounding));
      std::vector<float> C = p.run(correctModule(), kRowsWhich + rounding);
      double worst = 0, diff2 = 0, ref2 = 0;
      for (int64_t m = 0; m < p.M; ++m)
        for (int64_t n = 0; n < p.N; ++n) {
          double exact = 0, magnitude = 0, unrounded = 0;
          for (int64_t k = 0; k < p.K; ++k) {
            double a = p.A[m * p.K + k], b = p.B[k * p.N + n];
            double product = double(rounded(float(a), rounding)) *
                             double(rounded(float(b), rounding));
            exact += product;
            magnitude += std::fabs(product);
            unrounded += a * b;
          }
          double got = C[m * p.N + n];
          worst = std::max(worst, std::fabs(got - exact) / magnitude);
          diff2 += (got - unrounded) * (got - unrounded);
          ref2 += unrounded * unrounded;
        }
      EXPECT_LE(worst, double(p.K + 1) * 0x1p-24);
      double fromUnrounded = std::sqrt(diff2 / ref2);
      if (rounding == kFp32) {
        EXPECT_LE(fromUnrounded, 1e-6);
      } else if (p.K > 1) {
        EXPECT_GE(fromUnrounded, 0x1p-16);
      }
    }
}

// Check mode: no read past the operands, no write past C (it holds M rows,
// not kGemmRowsMax), no read of shared memory before it was written; the
// same results as the normal build. The roundings read and write the same
// elements: fp32 on every problem, bf16 and tf32 on one of each mapping.
TEST(EmuGemmRows, PassesCheckMode) {
  std::vector<FloatGemmProblem> problems = rowsProblems();
  for (size_t i = 0; i < problems.size(); ++i)
    for (int rounding : {kFp32, kBf16, kTf32}) {
      if (rounding != kFp32 && i != 2 && i != 4)
        continue;
      FloatGemmProblem &p = problems[i];
      EXPECT_EQ(p.run(checkedModule(), kRowsWhich + rounding),
                p.run(correctModule(), kRowsWhich + rounding))
          << p.name() << " rounding " << rounding;
    }
}
