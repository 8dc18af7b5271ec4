//===- CpuGateTest.cpp - the X-MoE gate's ops on the cpu device -----------===//
//
// moe.normalize_rows, moe.rescale_rows and moe.finite_or_min on
// hand-computed cases, and their gradients against central differences.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>

using namespace moec;
using namespace moec::test;

namespace {

constexpr DType F64 = DType::F64;
const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(CpuGate, NormalizeRowsDividesByTheNormOrEps) {
  // Rows of norm 5, 13 and 5e-5 (below eps = 1e-4: divided by eps).
  Tensor x = Tensor::of<double>({3, 2}, {3, 4, -5, 12, 3e-5, -4e-5});
  Tensor y = runKernel1("moe.normalize_rows", {x}, like(x));
  expectValues(y, {0.6, 0.8, -5.0 / 13, 12.0 / 13, 0.3, -0.4}, 1e-15,
               "x / max(|x|, 1e-4)");
  y = runKernel1("moe.normalize_rows", {x}, like(x), {{"eps", 10.0}});
  expectValues(y, {0.3, 0.4, -5.0 / 13, 12.0 / 13, 3e-6, -4e-6}, 1e-15,
               "eps = 10");
}

TEST(CpuGate, NormalizeRowsGradientIsTheJacobianOfTheMaxForm) {
  // Above eps: dx = (dy - xh <xh, dy>) / n; x = (3, 4), xh = (0.6, 0.8),
  // dy = (1, 0): <xh, dy> = 0.6, dx = ((1, 0) - 0.6 (0.6, 0.8)) / 5.
  // Below: dx = dy / eps.
  Tensor x = Tensor::of<double>({2, 2}, {3, 4, 3e-5, 4e-5});
  Tensor dy = Tensor::of<double>({2, 2}, {1, 0, 2, -1});
  Tensor dx = runKernel1("moe.normalize_rows_grad", {x, dy}, like(x));
  expectValues(dx, {0.64 / 5, -0.48 / 5, 2e4, -1e4}, 1e-12, "dx");
}

TEST(CpuGate, RescaleRowsSetsEachNormAndLeavesZeroRows) {
  Tensor x = Tensor::of<double>({3, 2}, {3, 4, 0, 0, 0, -2});
  Tensor y = runKernel1("moe.rescale_rows", {x}, like(x), {{"norm", 1.5}});
  expectValues(y, {0.9, 1.2, 0, 0, 0, -1.5}, 1e-15, "rows of norm 1.5");
}

TEST(CpuGate, FiniteOrMinFillsWithTheGlobalMinimum) {
  // The minimum is over the whole tensor (-3 in row 1), not per row.
  Tensor x = Tensor::of<double>({2, 3}, {kInf, 2, kNaN, -3, -kInf, 5});
  Tensor y = runKernel1("moe.finite_or_min", {x}, like(x));
  expectValues(y, {-3, 2, -3, -3, -3, 5}, 0, "filled");
  // All finite: unchanged.
  Tensor finite = Tensor::of<double>({2}, {1.5, -0.5});
  expectValues(runKernel1("moe.finite_or_min", {finite}, like(finite)),
               {1.5, -0.5}, 0, "finite");
  // Nothing finite: zeros (a documented choice; the authors' code fails).
  Tensor none = Tensor::of<double>({3}, {kInf, kNaN, -kInf});
  expectValues(runKernel1("moe.finite_or_min", {none}, like(none)), {0, 0, 0},
               0, "nothing finite");
}

TEST(CpuGate, FiniteOrMinGradientGoesToTheLowestArgMin) {
  // -3 at flat indices 1 and 4: the lower one takes the replaced entries'
  // gradient (dy of 0, 2 and 5: 1 + 3 + 6 = 10).
  Tensor x = Tensor::of<double>({2, 3}, {kNaN, -3, kInf, 7, -3, -kInf});
  Tensor dy = Tensor::of<double>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor dx = runKernel1("moe.finite_or_min_grad", {x, dy}, like(x));
  expectValues(dx, {0, 12, 0, 4, 5, 0}, 0, "dx");
  Tensor none = Tensor::of<double>({2}, {kInf, kNaN});
  Tensor dnone =
      runKernel1("moe.finite_or_min_grad",
                 {none, Tensor::of<double>({2}, {1, 2})}, like(none));
  expectValues(dnone, {0, 0}, 0, "nothing finite");
}

TEST(CpuGate, F32MatchesF64) {
  Tensor x = randomTensor(F64, {5, 16}, 1), dy = randomTensor(F64, {5, 16}, 2);
  for (const char *op : {"moe.normalize_rows", "moe.rescale_rows"}) {
    Json attrs = std::string(op) == "moe.rescale_rows" ? Json{{"norm", 1.5}}
                                                       : Json::object();
    Tensor ref = runKernel1(op, {x}, like(x), attrs);
    Tensor f32 = runKernel1(op, {convert(x, DType::F32)},
                            zeros(DType::F32, {5, 16}), attrs);
    expectClose(f32, ref, 1e-6, op);
  }
  Tensor ref = runKernel1("moe.normalize_rows_grad", {x, dy}, like(x));
  Tensor f32 = runKernel1("moe.normalize_rows_grad",
                          {convert(x, DType::F32), convert(dy, DType::F32)},
                          zeros(DType::F32, {5, 16}));
  expectClose(f32, ref, 1e-6, "moe.normalize_rows_grad");
}

TEST(CpuGradients, NormalizeRows) {
  // Rows of about 2 (above eps) and one of norm about 4e-5 (below it; the
  // differences stay below eps too).
  Tensor x = randomTensor(F64, {4, 16}, 1);
  for (int64_t c = 0; c < 16; ++c)
    elementF64(x, 3 * 16 + c) *= 1e-5;
  Tensor r = randomTensor(F64, {4, 16}, 2);
  auto loss = [&] {
    return dotProduct(runKernel1("moe.normalize_rows", {x}, like(x)), r);
  };
  Tensor dx = runKernel1("moe.normalize_rows_grad", {x, r}, like(x));
  expectGradient(loss, x, dx, "dx", 64, 1e-7);
}

TEST(CpuGradients, FiniteOrMin) {
  // Distinct finite values, so that no difference changes the arg-min.
  Tensor x = randomTensor(F64, {3, 5}, 3);
  elementF64(x, 2) = kInf;
  elementF64(x, 6) = -kInf;
  elementF64(x, 11) = kNaN;
  elementF64(x, 14) = kInf;
  Tensor r = randomTensor(F64, {3, 5}, 4);
  auto loss = [&] {
    return dotProduct(runKernel1("moe.finite_or_min", {x}, like(x)), r);
  };
  Tensor dx = runKernel1("moe.finite_or_min_grad", {x, r}, like(x));
  expectGradient(loss, x, dx, "dx");
  // The arg-min holds its own dy plus every replaced entry's.
  int64_t arg = -1;
  for (int64_t i = 0; i < 15; ++i)
    if (std::isfinite(x.at(i)) && (arg < 0 || x.at(i) < x.at(arg)))
      arg = i;
  EXPECT_DOUBLE_EQ(dx.at(arg),
                   r.at(arg) + r.at(2) + r.at(6) + r.at(11) + r.at(14));
}

} // namespace
