//===- CpuBatchNormTest.cpp - moe.batch_norm on the cpu device ------------===//
//
// Hand-computed training (with a padding mask, with one or no row in the
// statistics) and eval cases, and the gradient in both modes against
// central differences (the CpuGradients style: loss = <r, y>, dy = r).
// Optionally (when python3 with torch is installed) one case against
// torch.nn.BatchNorm1d.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"
#include "moec/Error.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <gtest/gtest.h>
#include <sstream>

using namespace moec;
using namespace moec::test;

namespace {

constexpr DType F64 = DType::F64;

/// Runs moe.batch_norm; returns result, new_mean, new_var.
std::vector<Tensor> batchNorm(const Tensor &x, const Tensor &gamma,
                              const Tensor &beta, const Tensor &mean,
                              const Tensor &var, const Tensor &mask,
                              const Json &attrs) {
  return runKernel("moe.batch_norm", {x, gamma, beta, mean, var, mask},
                   {like(x), like(mean), like(var)}, attrs);
}

TEST(CpuBatchNorm, TrainingNormalisesEveryRowWithTheMaskedStatistics) {
  // Rows 0, 1 and 3 take part: column 0 is {1, 3, 5} (mean 3, biased var
  // 8/3, unbiased 4), column 1 {2, 6, 10} (mean 6, var 32/3, unbiased 16).
  // Row 2 is padding, normalised with the same statistics.
  Tensor x = Tensor::of<double>({2, 2, 2}, {1, 2, 3, 6, 100, -7, 5, 10});
  Tensor m = Tensor::of<int32_t>({2, 2}, {1, 1, 0, 1});
  Tensor gamma = Tensor::of<double>({2}, {2, 0.5});
  Tensor beta = Tensor::of<double>({2}, {1, -1});
  Tensor mean = Tensor::of<double>({2}, {0.5, -1});
  Tensor var = Tensor::of<double>({2}, {2, 3});
  const double eps = 1.0 / 3; // var + eps = 3 and 11
  std::vector<Tensor> out = batchNorm(x, gamma, beta, mean, var, m,
                                      {{"eps", eps},
                                       {"momentum", 0.25},
                                       {"training", true}});
  const double r0 = 1 / std::sqrt(3.0), r1 = 1 / std::sqrt(11.0);
  expectValues(out[0],
               {(1 - 3) * r0 * 2 + 1, (2 - 6) * r1 * 0.5 - 1,
                (3 - 3) * r0 * 2 + 1, (6 - 6) * r1 * 0.5 - 1,
                (100 - 3) * r0 * 2 + 1, (-7 - 6) * r1 * 0.5 - 1,
                (5 - 3) * r0 * 2 + 1, (10 - 6) * r1 * 0.5 - 1},
               1e-14, "result");
  // 0.75 * running + 0.25 * batch (the unbiased variance).
  expectValues(out[1], {0.75 * 0.5 + 0.25 * 3, 0.75 * -1 + 0.25 * 6}, 1e-15,
               "new_mean");
  expectValues(out[2], {0.75 * 2 + 0.25 * 4, 0.75 * 3 + 0.25 * 16}, 1e-14,
               "new_var");

  // Without a mask every row takes part: column 0 is {1, 3, 100, 5}.
  out = batchNorm(x, gamma, beta, mean, var, absent(),
                  {{"eps", eps}, {"training", true}});
  double mu = (1 + 3 + 100 + 5) / 4.0;
  double v = ((1 - mu) * (1 - mu) + (3 - mu) * (3 - mu) +
              (100 - mu) * (100 - mu) + (5 - mu) * (5 - mu)) /
             4;
  EXPECT_NEAR(out[0].at(4), (100 - mu) / std::sqrt(v + eps) * 2 + 1, 1e-12);
  // The default momentum is 0.1.
  EXPECT_NEAR(out[1].at(0), 0.9 * 0.5 + 0.1 * mu, 1e-14);
  EXPECT_NEAR(out[2].at(0), 0.9 * 2 + 0.1 * v * 4 / 3, 1e-12);
}

TEST(CpuBatchNorm, OneOrNoRowKeepsTheRunningStatistics) {
  Tensor x = Tensor::of<double>({3, 2}, {1, 2, 3, 6, -4, 8});
  Tensor gamma = Tensor::of<double>({2}, {2, 0.5});
  Tensor beta = Tensor::of<double>({2}, {1, -1});
  Tensor mean = Tensor::of<double>({2}, {0.5, -1});
  Tensor var = Tensor::of<double>({2}, {2, 3});
  const double eps = 0.25, r = 1 / std::sqrt(eps);
  Json attrs = {{"eps", eps}, {"training", true}};
  // One row (row 1): mu is that row, var 0.
  std::vector<Tensor> out =
      batchNorm(x, gamma, beta, mean, var,
                Tensor::of<int32_t>({3}, {0, 1, 0}), attrs);
  expectValues(out[0],
               {(1 - 3) * r * 2 + 1, (2 - 6) * r * 0.5 - 1, 1, -1,
                (-4 - 3) * r * 2 + 1, (8 - 6) * r * 0.5 - 1},
               1e-14, "one row");
  expectValues(out[1], {0.5, -1}, 0, "mean kept");
  expectValues(out[2], {2, 3}, 0, "var kept");
  // No row: mu = 0 and var = 0.
  out = batchNorm(x, gamma, beta, mean, var,
                  Tensor::of<int32_t>({3}, {0, 0, 0}), attrs);
  expectValues(out[0],
               {1 * r * 2 + 1, 2 * r * 0.5 - 1, 3 * r * 2 + 1, 6 * r * 0.5 - 1,
                -4 * r * 2 + 1, 8 * r * 0.5 - 1},
               1e-14, "no row");
  expectValues(out[1], {0.5, -1}, 0, "mean kept");
  expectValues(out[2], {2, 3}, 0, "var kept");
}

TEST(CpuBatchNorm, EvalUsesTheRunningStatistics) {
  Tensor x = Tensor::of<double>({2, 2}, {1, 2, 3, 6});
  Tensor gamma = Tensor::of<double>({2}, {2, 0.5});
  Tensor beta = Tensor::of<double>({2}, {1, -1});
  Tensor mean = Tensor::of<double>({2}, {0.5, -1});
  Tensor var = Tensor::of<double>({2}, {2.75, 3.75}); // + eps: 3, 4
  // The mask plays no part in eval.
  std::vector<Tensor> out =
      batchNorm(x, gamma, beta, mean, var, Tensor::of<int32_t>({2}, {1, 0}),
                {{"eps", 0.25}, {"momentum", 0.5}});
  expectValues(out[0],
               {0.5 / std::sqrt(3.0) * 2 + 1, 3 / 2.0 * 0.5 - 1,
                2.5 / std::sqrt(3.0) * 2 + 1, 7 / 2.0 * 0.5 - 1},
               1e-14, "result");
  expectValues(out[1], {0.5, -1}, 0, "new_mean");
  expectValues(out[2], {2.75, 3.75}, 0, "new_var");
}

TEST(CpuBatchNorm, BadOperandsAreErrors) {
  Tensor x = randomTensor(F64, {3, 2}, 1);
  Tensor v = randomTensor(F64, {2}, 2);
  Tensor wide = randomTensor(F64, {3}, 3);
  EXPECT_THROW(batchNorm(x, wide, v, v, v, absent(), Json::object()), Error);
  EXPECT_THROW(batchNorm(x, v, v, v, v, Tensor::of<int32_t>({2}, {1, 1}),
                         Json::object()),
               Error);
  Tensor flat = randomTensor(F64, {2}, 4);
  EXPECT_THROW(batchNorm(flat, v, v, v, v, absent(), Json::object()), Error);
}

/// Finite differences of <r, batch_norm(x)> against batch_norm_grad with
/// dy = r, for x, gamma and beta.
void checkGradients(bool training, bool masked) {
  Tensor x = randomTensor(F64, {2, 3, 4}, 1, -2, 2);
  Tensor gamma = randomTensor(F64, {4}, 2, 0.5, 1.5);
  Tensor beta = randomTensor(F64, {4}, 3);
  Tensor mean = randomTensor(F64, {4}, 4);
  Tensor var = randomTensor(F64, {4}, 5, 0.5, 2);
  Tensor r = randomTensor(F64, {2, 3, 4}, 6);
  Tensor m = masked ? Tensor::of<int32_t>({2, 3}, {1, 1, 0, 1, 0, 1})
                    : absent();
  Json attrs = {{"eps", 1e-3}};
  if (training)
    attrs["training"] = true;
  auto loss = [&] {
    return dotProduct(batchNorm(x, gamma, beta, mean, var, m, attrs)[0], r);
  };
  std::vector<Tensor> grads =
      runKernel("moe.batch_norm_grad", {x, gamma, mean, var, r, m},
                {like(x), like(gamma), like(beta)}, attrs);
  expectGradient(loss, x, grads[0], "dx");
  expectGradient(loss, gamma, grads[1], "dgamma");
  expectGradient(loss, beta, grads[2], "dbeta");
  // The running statistics pass no gradient in training; in eval the loss
  // does depend on them, but they are frozen state.
  if (training) {
    expectGradient(loss, mean, like(mean), "running_mean");
    expectGradient(loss, var, like(var), "running_var");
  }
}

TEST(CpuGradients, BatchNormTraining) { checkGradients(true, false); }
TEST(CpuGradients, BatchNormTrainingMasked) { checkGradients(true, true); }
TEST(CpuGradients, BatchNormEval) { checkGradients(false, false); }
TEST(CpuGradients, BatchNormEvalMasked) { checkGradients(false, true); }

TEST(CpuGradients, BatchNormTrainingWithOneRow) {
  // mu is the one row: its own output is beta whatever it is, and moving
  // it moves every other row's.
  Tensor x = randomTensor(F64, {4, 3}, 1, -2, 2);
  Tensor gamma = randomTensor(F64, {3}, 2, 0.5, 1.5);
  Tensor beta = randomTensor(F64, {3}, 3);
  Tensor mean = randomTensor(F64, {3}, 4);
  Tensor var = randomTensor(F64, {3}, 5, 0.5, 2);
  Tensor r = randomTensor(F64, {4, 3}, 6);
  Tensor m = Tensor::of<int32_t>({4}, {0, 0, 1, 0});
  Json attrs = {{"eps", 0.5}, {"training", true}};
  auto loss = [&] {
    return dotProduct(batchNorm(x, gamma, beta, mean, var, m, attrs)[0], r);
  };
  std::vector<Tensor> grads =
      runKernel("moe.batch_norm_grad", {x, gamma, mean, var, r, m},
                {like(x), like(gamma), like(beta)}, attrs);
  expectGradient(loss, x, grads[0], "dx");
  expectGradient(loss, gamma, grads[1], "dgamma");
}

/// Debian's interpreter, where python3-torch installs.
const char *kPython = "/usr/bin/python3";

/// Whether that python imports torch.
bool haveTorch() {
  return std::system((std::string(kPython) +
                      " -c 'import torch' > /dev/null 2>&1")
                         .c_str()) == 0;
}

TEST(CpuBatchNorm, MatchesTorchBatchNorm1d) {
  if (!haveTorch())
    GTEST_SKIP() << kPython << " cannot import torch (install python3-torch)";
  // torch.nn.BatchNorm1d(3, eps=1e-5, momentum=0.1) in training mode on
  // 5 rows, from running statistics (0.5, -1, 2) and (2, 3, 0.5).
  Tensor x = randomTensor(F64, {5, 3}, 11, -3, 3);
  Tensor gamma = Tensor::of<double>({3}, {1.5, 0.5, -1});
  Tensor beta = Tensor::of<double>({3}, {0.25, -1, 2});
  Tensor mean = Tensor::of<double>({3}, {0.5, -1, 2});
  Tensor var = Tensor::of<double>({3}, {2, 3, 0.5});
  Tensor r = randomTensor(F64, {5, 3}, 12);
  std::ostringstream script;
  script.precision(17);
  auto list = [&](const Tensor &t) {
    script << "[";
    for (int64_t i = 0; i < t.numel(); ++i)
      script << (i ? ", " : "") << t.at(i);
    script << "]";
  };
  script << "import torch\nbn = torch.nn.BatchNorm1d(3).double()\n"
         << "with torch.no_grad():\n  bn.weight.copy_(torch.tensor(";
  list(gamma);
  script << "))\n  bn.bias.copy_(torch.tensor(";
  list(beta);
  script << "))\n  bn.running_mean.copy_(torch.tensor(";
  list(mean);
  script << "))\n  bn.running_var.copy_(torch.tensor(";
  list(var);
  script << "))\nx = torch.tensor(";
  list(x);
  script << ", dtype=torch.float64).reshape(5, 3).requires_grad_()\n"
         << "r = torch.tensor(";
  list(r);
  script << ", dtype=torch.float64).reshape(5, 3)\n"
         << "y = bn(x)\n(y * r).sum().backward()\n"
         << "for t in (y, bn.running_mean, bn.running_var, x.grad, "
            "bn.weight.grad, bn.bias.grad):\n"
         << "  print(' '.join(repr(v) for v in t.flatten().tolist()))\n";
  std::string path = ::testing::TempDir() + "/moec-bn-torch.py";
  {
    FILE *f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(script.str().c_str(), f);
    std::fclose(f);
  }
  FILE *pipe = popen((std::string(kPython) + " " + path).c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string text;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe))
    text.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0) << text;
  std::remove(path.c_str());
  std::istringstream lines(text);
  auto next = [&](int64_t count) {
    std::vector<double> v(count);
    for (double &e : v)
      lines >> e;
    return v;
  };

  Json attrs = {{"training", true}};
  std::vector<Tensor> out =
      batchNorm(x, gamma, beta, mean, var, absent(), attrs);
  std::vector<Tensor> grads =
      runKernel("moe.batch_norm_grad", {x, gamma, mean, var, r, absent()},
                {like(x), like(gamma), like(beta)}, attrs);
  expectValues(out[0], next(15), 1e-12, "y");
  expectValues(out[1], next(3), 1e-12, "running_mean");
  expectValues(out[2], next(3), 1e-12, "running_var");
  expectValues(grads[0], next(15), 1e-10, "x.grad");
  expectValues(grads[1], next(3), 1e-10, "weight.grad");
  expectValues(grads[2], next(3), 1e-10, "bias.grad");
}

} // namespace
