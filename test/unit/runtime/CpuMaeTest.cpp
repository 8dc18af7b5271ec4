//===- CpuMaeTest.cpp - the MAE layer's ops on the cpu device ------------===//
//
// moe.window_mean, moe.head_mixture, moe.sample_expert and moe.gate_stats
// on hand-computed cases; sampling frequencies against p; and the
// gradients of the window mean and the head mixture against central
// differences.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"
#include "Philox.h"
#include "moec/Error.h"

#include <cmath>
#include <gtest/gtest.h>
#include <iostream>

using namespace moec;
using namespace moec::test;

namespace {

constexpr DType F64 = DType::F64;

/// x [2, 3, 2]: sequence 0 is (1, 2), (3, 4), (5, 6); sequence 1 is
/// (-1, 0), (2, 8), (4, -2).
Tensor windowInput() {
  return Tensor::of<double>({2, 3, 2}, {1, 2, 3, 4, 5, 6, -1, 0, 2, 8, 4, -2});
}

Json window(const std::string &kind, int64_t size = 0) {
  Json attrs = {{"window", kind}};
  if (size)
    attrs["size"] = size;
  return attrs;
}

/// moe.window_mean of x without history.
Tensor windowMean(const Tensor &x, const Tensor &mask, const Json &attrs) {
  bool sequence = attrs.at("window") == "sequence";
  Shape shape = x.shape();
  if (sequence)
    shape[1] = 1;
  return runKernel1("moe.window_mean", {x, absent(), absent(), mask},
                    zeros(x.dtype(), shape), attrs);
}

TEST(CpuMae, WindowMeanOverEachWindow) {
  Tensor x = windowInput();
  Tensor mask = Tensor::of<int32_t>({2, 3}, {1, 1, 0, 1, 0, 0});
  expectValues(windowMean(x, mask, window("sequence")), {2, 3, -1, 0}, 1e-15,
               "sequence, masked: (x0 + x1) / 2 and x0");
  expectValues(windowMean(x, absent(), window("sequence")),
               {3, 4, 5.0 / 3, 2}, 1e-15, "sequence, no mask");
  Tensor none = Tensor::of<int32_t>({2, 3}, {0, 0, 0, 1, 1, 1});
  expectValues(windowMean(x, none, window("sequence")), {0, 0, 5.0 / 3, 2},
               1e-15, "a sequence without a real position averages to 0");
  expectValues(windowMean(x, absent(), window("prefix")),
               {1, 2, 2, 3, 3, 4, -1, 0, 0.5, 4, 5.0 / 3, 2}, 1e-15,
               "prefix: positions 0..t");
  expectValues(windowMean(x, absent(), window("last", 2)),
               {1, 2, 2, 3, 4, 5, -1, 0, 0.5, 4, 3, 3}, 1e-15,
               "last 2: positions t-1..t");
  expectValues(windowMean(x, absent(), window("last", 5)),
               values(windowMean(x, absent(), window("prefix"))), 1e-15,
               "last, longer than the sequence: prefix");
  expectValues(windowMean(x, absent(), window("last", 1)), values(x), 0,
               "last 1: x itself");
}

TEST(CpuMae, WindowMeanReadsTheHistoryWhenDecoding) {
  // history[q] = (q + 1, 10 (q + 1)) for q < 5; the two new tokens are
  // positions 2 and 3 (past = 2). x's values are not read.
  Tensor history(F64, {1, 5, 2});
  for (int64_t q = 0; q < 5; ++q) {
    elementF64(history, 2 * q) = q + 1;
    elementF64(history, 2 * q + 1) = 10 * (q + 1);
  }
  Tensor x = randomTensor(F64, {1, 2, 2}, 1);
  auto run = [&](const Json &attrs, int64_t past) {
    return runKernel1("moe.window_mean", {x, history, scalarI64(past), absent()},
                      like(x), attrs);
  };
  expectValues(run(window("prefix"), 2), {2, 20, 2.5, 25}, 1e-15,
               "prefix: means of positions 0..2 and 0..3");
  expectValues(run(window("last", 2), 2), {2.5, 25, 3.5, 35}, 1e-15,
               "last 2: means of positions 1..2 and 2..3");
  expectValues(run(window("last", 3), 3), {3, 30, 4, 40}, 1e-15,
               "last 3 after 3: positions 1..3 and 2..4");
  // The window of a decoding step equals the training program's at the
  // same position.
  Tensor full = windowMean(history, absent(), window("last", 3));
  Tensor step = run(window("last", 3), 3);
  expectValues(step, {full.at(6), full.at(7), full.at(8), full.at(9)}, 1e-15,
               "decode = training at positions 3 and 4");
  EXPECT_THROW(run(window("prefix"), 4), Error) << "past + S > L";
}

TEST(CpuMae, WindowMeanGradientByHand) {
  // prefix, dy = 1: dx[s] = sum_{t >= s} 1 / (t + 1).
  Tensor x = windowInput();
  Tensor ones(F64, {2, 3, 2});
  for (int64_t i = 0; i < ones.numel(); ++i)
    elementF64(ones, i) = 1;
  auto grad = [&](const Tensor &dy, const Tensor &mask, const Json &attrs) {
    return runKernel1("moe.window_mean_grad", {x, dy, mask}, like(x), attrs);
  };
  double d0 = 1 + 0.5 + 1.0 / 3, d1 = 0.5 + 1.0 / 3, d2 = 1.0 / 3;
  expectValues(grad(ones, absent(), window("prefix")),
               {d0, d0, d1, d1, d2, d2, d0, d0, d1, d1, d2, d2}, 1e-15,
               "prefix");
  // last 2: t = 0 counts 1, t = 1 and 2 count 2; s takes t = s, s + 1.
  expectValues(grad(ones, absent(), window("last", 2)),
               {1.5, 1.5, 1, 1, 0.5, 0.5, 1.5, 1.5, 1, 1, 0.5, 0.5}, 1e-15,
               "last 2");
  Tensor dy = Tensor::of<double>({2, 1, 2}, {4, 6, 3, -3});
  Tensor mask = Tensor::of<int32_t>({2, 3}, {1, 1, 0, 0, 0, 0});
  expectValues(grad(dy, mask, window("sequence")),
               {2, 3, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0}, 1e-15,
               "sequence: dy / count at real positions, 0 at padding");
}

TEST(CpuMae, HeadMixtureScalesEachHead) {
  // H = 2, dh = 2, g = (0.3, 0.7): s = 2 (1 - g) / 1 = (1.4, 0.6).
  Tensor context = Tensor::of<double>({1, 2, 4}, {1, 2, 3, 4, -1, 0, 5, 2});
  Tensor g = Tensor::of<double>({1, 1, 2}, {0.3, 0.7});
  Json attrs = {{"num_heads", 2}};
  Tensor y = runKernel1("moe.head_mixture", {context, g}, like(context), attrs);
  expectValues(y, {1.4, 2.8, 1.8, 2.4, -1.4, 0, 3, 1.2}, 1e-15,
               "one gate per sequence");
  // One gate per position: the second position's gate is (1, 0).
  Tensor gs = Tensor::of<double>({1, 2, 2}, {0.3, 0.7, 1, 0});
  y = runKernel1("moe.head_mixture", {context, gs}, like(context), attrs);
  expectValues(y, {1.4, 2.8, 1.8, 2.4, 0, 0, 10, 4}, 1e-15,
               "one gate per position");
}

TEST(CpuMae, UniformResponsibilitiesLeaveTheContextUnchanged) {
  // g = 1/H: s_j = H (1 - 1/H) / (H - 1) = 1, for f32 and f64, g in f32
  // with an f64 context, and one gate per position.
  for (int64_t heads : {2, 4, 8}) {
    SCOPED_TRACE(heads);
    Tensor context = randomTensor(F64, {2, 3, heads * 3}, 1);
    for (int64_t groups : {1, 3})
      for (DType gType : {DType::F32, F64}) {
        Tensor g(gType, {2, groups, heads});
        for (int64_t i = 0; i < g.numel(); ++i)
          g.set(i, 1.0 / heads);
        Tensor y = runKernel1("moe.head_mixture", {context, g}, like(context),
                              {{"num_heads", heads}});
        // 1/H rounded to f32 moves s by at most about 2^-24 H / (H - 1).
        expectValues(y, values(context), gType == F64 ? 1e-15 : 1e-7,
                     "identity");
      }
  }
}

TEST(CpuMae, HeadMixtureGradientByHand) {
  // H = 2, dh = 1, one position: dg_j = -2 dy_j c_j.
  Tensor context = Tensor::of<double>({1, 1, 2}, {3, -2});
  Tensor g = Tensor::of<double>({1, 1, 2}, {0.25, 0.75});
  Tensor dy = Tensor::of<double>({1, 1, 2}, {1, 5});
  std::vector<Tensor> out =
      runKernel("moe.head_mixture_grad", {dy, context, g},
                {like(context), like(g)}, {{"num_heads", 2}});
  expectValues(out[0], {1.5, 2.5}, 1e-15, "dcontext = dy s");
  expectValues(out[1], {-6, 20}, 1e-15, "dg");
}

/// moe.sample_expert's picks: the index of the 1 in each row.
std::vector<int64_t> picks(const Tensor &onehot) {
  int64_t n = onehot.shape().back();
  std::vector<int64_t> out;
  for (int64_t r = 0; r < onehot.numel() / n; ++r) {
    int64_t ones = 0, at = -1;
    for (int64_t j = 0; j < n; ++j)
      if (onehot.at(r * n + j) == 1) {
        ++ones;
        at = j;
      } else {
        EXPECT_EQ(onehot.at(r * n + j), 0) << r << " " << j;
      }
    EXPECT_EQ(ones, 1) << "row " << r;
    out.push_back(at);
  }
  return out;
}

Tensor sample(const Tensor &p, int64_t n, int64_t seed, int64_t stream,
              bool uniform = false) {
  Json attrs = {{"num_experts", n}, {"stream", stream}};
  if (uniform)
    attrs["uniform"] = true;
  return runKernel1("moe.sample_expert", {p, scalarI64(seed)},
                    zeros(DType::F32, {p.shape()[0], p.shape()[1], n}), attrs);
}

TEST(CpuMae, SampleExpertFrequenciesFollowP) {
  // 20000 sequences of 3 rows: row 0 has p, row 1 p reversed, row 2 p
  // again. Each frequency is within 4.5 standard deviations of p, and the
  // rows of a sequence share one draw u_b (rows 0 and 2 always agree, and
  // every row's pick is the inverse of its own running sum at u_b).
  const int64_t batch = 20000, n = 4;
  const double p[n] = {0.1, 0.2, 0.3, 0.4};
  Tensor probs(DType::F32, {batch, 3, n});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < n; ++j) {
      probs.set((b * 3 + 0) * n + j, p[j]);
      probs.set((b * 3 + 1) * n + j, p[n - 1 - j]);
      probs.set((b * 3 + 2) * n + j, p[j]);
    }
  std::vector<int64_t> chosen = picks(sample(probs, n, 17, 3));
  std::vector<int64_t> counts(n, 0);
  for (int64_t b = 0; b < batch; ++b) {
    ++counts[chosen[b * 3]];
    EXPECT_EQ(chosen[b * 3 + 2], chosen[b * 3]) << b;
    // Rows 0 and 1 pick the first j with u below their running sum (f32).
    float u = static_cast<float>(philoxUniform(17, 3, b));
    for (int64_t row : {0, 1}) {
      float running = 0;
      int64_t expect = -1;
      for (int64_t j = 0; j < n && expect < 0; ++j) {
        running += static_cast<float>(row == 0 ? p[j] : p[n - 1 - j]);
        if (u < running)
          expect = j;
      }
      EXPECT_EQ(chosen[b * 3 + row], expect) << b << " " << row;
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    double freq = double(counts[j]) / batch;
    double sigma = std::sqrt(p[j] * (1 - p[j]) / batch);
    std::cout << "expert " << j << ": frequency " << freq << ", p " << p[j]
              << "\n";
    EXPECT_NEAR(freq, p[j], 4.5 * sigma) << j;
  }
}

TEST(CpuMae, SampleExpertUniformIgnoresP) {
  // With `uniform`, j = floor(u_b n): the same for every row of b, whatever
  // p holds (here zeros of another width), and each of n experts about
  // 1/n of the time.
  const int64_t batch = 30000, n = 3;
  Tensor ignored(DType::F32, {batch, 2, 5});
  std::vector<int64_t> chosen = picks(sample(ignored, n, 5, 9, true));
  std::vector<int64_t> counts(n, 0);
  for (int64_t b = 0; b < batch; ++b) {
    EXPECT_EQ(chosen[2 * b], chosen[2 * b + 1]) << b;
    EXPECT_EQ(chosen[2 * b],
              static_cast<int64_t>(std::floor(philoxUniform(5, 9, b) * n)))
        << b;
    ++counts[chosen[2 * b]];
  }
  for (int64_t j = 0; j < n; ++j) {
    double freq = double(counts[j]) / batch;
    std::cout << "uniform expert " << j << ": frequency " << freq << "\n";
    EXPECT_NEAR(freq, 1.0 / n, 4.5 * std::sqrt(2.0 / 9 / batch)) << j;
  }
}

TEST(CpuMae, SampleExpertFallsBackToTheLastPositiveP) {
  // p sums to 0.5: a u above it finds no j, and the last j with p > 0
  // (j = 1) takes it; j = 2 and 3 are never drawn.
  const int64_t batch = 4000, n = 4;
  Tensor probs(F64, {batch, 1, n});
  for (int64_t b = 0; b < batch; ++b) {
    elementF64(probs, b * n) = 0.2;
    elementF64(probs, b * n + 1) = 0.3;
  }
  std::vector<int64_t> chosen = picks(sample(probs, n, 1, 0));
  int64_t ones = 0;
  for (int64_t b = 0; b < batch; ++b) {
    EXPECT_LT(chosen[b], 2) << b;
    ones += chosen[b] == 1;
    EXPECT_EQ(chosen[b], philoxUniform(1, 0, b) < 0.2f ? 0 : 1) << b;
  }
  EXPECT_NEAR(double(ones) / batch, 0.8, 0.03);
}

TEST(CpuMae, GateStatsByHand) {
  // Rows (0.5, 0.5, 0) and (0.2, 0.3, 0.5): column means and the mean
  // entropy, 0 log 0 counted as 0.
  Tensor g = Tensor::of<double>({1, 2, 3}, {0.5, 0.5, 0, 0.2, 0.3, 0.5});
  Tensor stats =
      runKernel1("moe.gate_stats", {g}, zeros(DType::F32, {4}));
  double h0 = std::log(2.0);
  double h1 = -(0.2 * std::log(0.2) + 0.3 * std::log(0.3) + 0.5 * std::log(0.5));
  expectValues(stats, {0.35, 0.4, 0.25, (h0 + h1) / 2}, 1e-7,
               "means and mean entropy");
  // Uniform rows: entropy log H.
  Tensor u(DType::F32, {3, 2, 4});
  for (int64_t i = 0; i < u.numel(); ++i)
    u.set(i, 0.25);
  expectValues(runKernel1("moe.gate_stats", {u}, zeros(DType::F32, {5})),
               {0.25, 0.25, 0.25, 0.25, std::log(4.0)}, 1e-6, "uniform");
}

TEST(CpuMae, F32MatchesF64) {
  Tensor x = randomTensor(F64, {3, 7, 5}, 1);
  Tensor mask = Tensor::of<int32_t>({3, 7}, {1, 1, 1, 0, 0, 0, 0, //
                                             1, 1, 1, 1, 1, 1, 1, //
                                             1, 0, 0, 0, 0, 0, 0});
  for (const Json &attrs : std::vector<Json>{
           window("sequence"), window("prefix"), window("last", 3)}) {
    Tensor m = attrs.at("window") == "sequence" ? mask : absent();
    expectClose(windowMean(convert(x, DType::F32), m, attrs),
                windowMean(x, m, attrs), 1e-6, attrs.dump());
  }
}

//===----------------------------------------------------------------------===//
// Gradients against central differences (loss = <r, y>).
//===----------------------------------------------------------------------===//

TEST(CpuGradients, WindowMean) {
  Tensor x = randomTensor(F64, {2, 6, 3}, 1);
  Tensor mask = Tensor::of<int32_t>({2, 6}, {1, 1, 1, 1, 0, 0, //
                                             1, 0, 0, 0, 0, 0});
  struct Case {
    Json attrs;
    bool masked;
  };
  for (const Case &c : std::vector<Case>{
           {window("sequence"), false},
           {window("sequence"), true},
           {window("prefix"), false},
           {window("last", 1), false},
           {window("last", 3), false},
           {window("last", 9), false}}) {
    SCOPED_TRACE(c.attrs.dump() + (c.masked ? " masked" : ""));
    Tensor m = c.masked ? mask : absent();
    Shape shape = x.shape();
    if (c.attrs.at("window") == "sequence")
      shape[1] = 1;
    Tensor r = randomTensor(F64, shape, 2);
    auto loss = [&] { return dotProduct(windowMean(x, m, c.attrs), r); };
    Tensor dx = runKernel1("moe.window_mean_grad", {x, r, m}, like(x),
                           c.attrs);
    expectGradient(loss, x, dx, "dx");
  }
}

TEST(CpuGradients, HeadMixture) {
  // One gate per sequence and one per position, 3 heads of 2.
  Tensor context = randomTensor(F64, {2, 4, 6}, 1);
  Json attrs = {{"num_heads", 3}};
  for (int64_t groups : {1, 4}) {
    SCOPED_TRACE(groups);
    Tensor g = randomTensor(F64, {2, groups, 3}, 2, 0.0, 1.0);
    Tensor r = randomTensor(F64, {2, 4, 6}, 3);
    auto loss = [&] {
      return dotProduct(
          runKernel1("moe.head_mixture", {context, g}, like(context), attrs),
          r);
    };
    std::vector<Tensor> grads = runKernel(
        "moe.head_mixture_grad", {r, context, g}, {like(context), like(g)},
        attrs);
    expectGradient(loss, context, grads[0], "dcontext");
    expectGradient(loss, g, grads[1], "dg");
  }
}

} // namespace
