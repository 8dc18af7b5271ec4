//===- CpuOptimizerTest.cpp - schedules and parameter updates -------------===//

#include "KernelTestUtil.h"

#include "moec/Error.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace moec;
using namespace moec::test;

namespace {

float lrAt(const Json &attrs, int64_t step) {
  return runKernel1("moe.lr_schedule", {scalarI64(step)}, zeros(DType::F32, {}),
                    attrs)
      .data<float>()[0];
}

TEST(CpuOptimizer, LrSchedules) {
  Json common = {
      {"base_lr", 1.0}, {"warmup", 4}, {"total_steps", 12}, {"final_lr", 0.1}};
  Json constant = common, linear = common, invSqrt = common, cosine = common;
  constant["kind"] = "constant";
  linear["kind"] = "linear";
  invSqrt["kind"] = "inverse_sqrt";
  cosine["kind"] = "cosine";

  EXPECT_EQ(lrAt(constant, 1), 1.0f);
  EXPECT_EQ(lrAt(constant, 100), 1.0f);

  // Warm-up s / w for every other kind.
  for (const Json &attrs : {linear, invSqrt, cosine}) {
    EXPECT_EQ(lrAt(attrs, 1), 0.25f);
    EXPECT_EQ(lrAt(attrs, 2), 0.5f);
    EXPECT_EQ(lrAt(attrs, 4), 1.0f);
  }
  // linear: 0.1 + 0.9 * max(0, 12 - s) / 8.
  EXPECT_EQ(lrAt(linear, 8), 0.55f);
  EXPECT_EQ(lrAt(linear, 12), 0.1f);
  EXPECT_EQ(lrAt(linear, 20), 0.1f);
  // inverse_sqrt: sqrt(4 / s); base / sqrt(s) without warm-up.
  EXPECT_EQ(lrAt(invSqrt, 16), 0.5f);
  Json noWarmup = invSqrt;
  noWarmup["warmup"] = 0;
  EXPECT_EQ(lrAt(noWarmup, 4), 0.5f);
  EXPECT_EQ(lrAt(noWarmup, 1), 1.0f);
  // cosine: 0.1 + 0.45 (1 + cos(pi min(1, (s - 4) / 8))).
  EXPECT_EQ(lrAt(cosine, 6), static_cast<float>(0.8681980515339464));
  EXPECT_EQ(lrAt(cosine, 8), 0.55f);
  EXPECT_EQ(lrAt(cosine, 12), 0.1f);
  EXPECT_EQ(lrAt(cosine, 30), 0.1f);

  // polynomial, power 2: 0.1 + 0.9 ((12 - s) / 8)^2 after the warm-up.
  Json polynomial = common;
  polynomial["kind"] = "polynomial";
  polynomial["power"] = 2.0;
  EXPECT_EQ(lrAt(polynomial, 1), 0.25f);
  EXPECT_EQ(lrAt(polynomial, 4), 1.0f);
  EXPECT_EQ(lrAt(polynomial, 6), 0.60625f);  // 0.1 + 0.9 * 0.75^2
  EXPECT_EQ(lrAt(polynomial, 8), 0.325f);    // 0.1 + 0.9 * 0.5^2
  EXPECT_EQ(lrAt(polynomial, 10), 0.15625f); // 0.1 + 0.9 * 0.25^2
  EXPECT_EQ(lrAt(polynomial, 12), 0.1f);
  EXPECT_EQ(lrAt(polynomial, 20), 0.1f);
  // power 1 (the default) is linear; power 0.5 decays slower at first.
  polynomial.erase("power");
  for (int64_t s : {1, 4, 5, 8, 11, 12, 13})
    EXPECT_EQ(lrAt(polynomial, s), lrAt(linear, s)) << s;
  polynomial["power"] = 0.5;
  EXPECT_EQ(lrAt(polynomial, 8),
            static_cast<float>(0.1 + 0.9 * std::pow(0.5, 0.5)));
  polynomial["power"] = 0.0;
  EXPECT_THROW(lrAt(polynomial, 8), Error);

  EXPECT_THROW(lrAt(linear, 0), Error);
  Json bad = common;
  bad["kind"] = "step";
  EXPECT_THROW(lrAt(bad, 5), Error);
}

/// One Adam step written out from the op's description.
std::vector<double> adamReference(std::vector<double> p, std::vector<double> g,
                                  std::vector<double> m, std::vector<double> v,
                                  int step, double lr, double scale, double b1,
                                  double b2, double eps, double wd,
                                  bool decoupled) {
  std::vector<double> out;
  for (size_t i = 0; i < p.size(); ++i) {
    double gi = g[i] * scale + (decoupled ? 0.0 : wd * p[i]);
    double mi = b1 * m[i] + (1 - b1) * gi;
    double vi = b2 * v[i] + (1 - b2) * gi * gi;
    double mh = mi / (1 - std::pow(b1, step)),
           vh = vi / (1 - std::pow(b2, step));
    out.push_back(p[i] - lr * mh / (std::sqrt(vh) + eps) -
                  (decoupled ? lr * wd * p[i] : 0.0));
    out.push_back(mi);
    out.push_back(vi);
  }
  return out;
}

TEST(CpuOptimizer, AdamOneStepMatchesTheFormula) {
  std::vector<double> p = {1, -2, 0.5}, g = {0.5, 0.1, -3}, m = {0.1, 0, 0.2},
                      v = {0.01, 0.04, 0.5};
  for (bool decoupled : {false, true}) {
    Json attrs = {
        {"beta1", 0.9}, {"beta2", 0.98}, {"eps", 1e-8}, {"weight_decay", 0.1}};
    if (decoupled)
      attrs["decoupled"] = true;
    Tensor param = Tensor::of<double>({3}, p);
    std::vector<Tensor> out =
        runKernel("moe.adam_update",
                  {param, Tensor::of<double>({3}, g),
                   Tensor::of<double>({3}, m), Tensor::of<double>({3}, v),
                   scalarI64(3), scalarF32(0.01f), scalarF64(2.0)},
                  {like(param), like(param), like(param)}, attrs);
    std::vector<double> ref =
        adamReference(p, g, m, v, 3, static_cast<double>(0.01f), 2.0, 0.9, 0.98,
                      1e-8, 0.1, decoupled);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_NEAR(out[0].at(i), ref[3 * i], 1e-15) << decoupled << " p " << i;
      EXPECT_NEAR(out[1].at(i), ref[3 * i + 1], 1e-15) << "m " << i;
      EXPECT_NEAR(out[2].at(i), ref[3 * i + 2], 1e-15) << "v " << i;
    }
  }
}

TEST(CpuOptimizer, AdamInPlaceMatchesSeparateBuffers) {
  const int64_t n = 5000;
  Json attrs = {{"beta1", 0.9},
                {"beta2", 0.999},
                {"eps", 1e-8},
                {"weight_decay", 0.01},
                {"decoupled", true}};
  Tensor param = randomTensor(DType::F32, {n}, 1);
  Tensor grad = randomTensor(DType::F32, {n}, 2);
  Tensor m = randomTensor(DType::F32, {n}, 3);
  Tensor v = randomTensor(DType::F32, {n}, 4, 0.0, 1.0);
  std::vector<Tensor> scalars = {scalarI64(7), scalarF32(1e-3f),
                                 scalarF32(0.5f)};
  std::vector<Tensor> separate =
      runKernel("moe.adam_update",
                {param, grad, m, v, scalars[0], scalars[1], scalars[2]},
                {like(param), like(param), like(param)}, attrs);
  Tensor p2 = clone(param), m2 = clone(m), v2 = clone(v);
  runKernel("moe.adam_update",
            {p2, grad, m2, v2, scalars[0], scalars[1], scalars[2]},
            {p2, m2, v2}, attrs);
  expectValues(p2, values(separate[0]), 0, "param");
  expectValues(m2, values(separate[1]), 0, "m");
  expectValues(v2, values(separate[2]), 0, "v");
}

// The vectorised loop (whichever of its AVX-512, AVX2 and baseline versions
// this CPU runs) gives the bits of the scalar double formula, over several
// blocks of the kernel's parallel loop and a ragged tail, for f32 storage
// and with only the parameter read back (the moments go to scratch).
TEST(CpuOptimizer, AdamGivesTheScalarFormulasBitsAcrossBlocks) {
  const int64_t n = 3 * 16384 + 77;
  for (bool decoupled : {false, true}) {
    Json attrs = {{"beta1", 0.9},
                  {"beta2", 0.98},
                  {"eps", 1e-9},
                  {"weight_decay", 0.01},
                  {"decoupled", decoupled}};
    Tensor param = randomTensor(DType::F32, {n}, 11);
    Tensor grad = randomTensor(DType::F32, {n}, 12, -3.0, 3.0);
    Tensor m = randomTensor(DType::F32, {n}, 13, -0.1, 0.1);
    Tensor v = randomTensor(DType::F32, {n}, 14, 0.0, 0.01);
    std::vector<Tensor> out = runKernel(
        "moe.adam_update",
        {param, grad, m, v, scalarI64(5), scalarF32(3e-3f), scalarF32(0.7f)},
        {like(param), absent(), absent()}, attrs);
    const double lr = 3e-3f, scale = 0.7f, bc1 = 1.0 - std::pow(0.9, 5.0),
                 bc2 = 1.0 - std::pow(0.98, 5.0);
    std::vector<double> expected(n);
    for (int64_t i = 0; i < n; ++i) {
      double p = param.at(i), g = grad.at(i) * scale;
      if (!decoupled)
        g += 0.01 * p;
      double m1 = 0.9 * m.at(i) + (1.0 - 0.9) * g;
      double v1 = 0.98 * v.at(i) + (1.0 - 0.98) * g * g;
      double p1 = p - lr * (m1 / bc1) / (std::sqrt(v1 / bc2) + 1e-9);
      if (decoupled)
        p1 -= lr * 0.01 * p;
      expected[i] = static_cast<float>(p1);
    }
    expectValues(out[0], expected, 0, decoupled ? "AdamW" : "Adam with L2");
  }
}

TEST(CpuOptimizer, SgdWithAndWithoutMomentum) {
  Tensor p = Tensor::of<double>({2}, {1, 2});
  Tensor g = Tensor::of<double>({2}, {0.5, -1});
  Tensor m = Tensor::of<double>({2}, {0.2, 0.1});
  double lr = static_cast<double>(0.1f);
  std::vector<Tensor> out =
      runKernel("moe.sgd_update", {p, g, m, scalarF32(0.1f), scalarF64(1.0)},
                {like(p), like(p)}, {{"momentum", 0.9}});
  // m' = 0.9 m + g; p' = p - lr m'.
  expectValues(out[1], {0.68, -0.91}, 1e-15, "m'");
  expectValues(out[0], {1 - lr * 0.68, 2 + lr * 0.91}, 1e-15, "p'");
  // Without momentum m passes through; weight decay joins the gradient.
  out = runKernel("moe.sgd_update", {p, g, m, scalarF32(0.1f), scalarF64(2.0)},
                  {like(p), like(p)}, {{"weight_decay", 0.5}});
  expectValues(out[1], {0.2, 0.1}, 0, "m passes through");
  expectValues(out[0], {1 - lr * (1 + 0.5), 2 - lr * (-2 + 1)}, 1e-15, "p'");
  // In place.
  runKernel("moe.sgd_update", {p, g, m, scalarF32(0.1f), scalarF64(1.0)},
            {p, m}, {{"momentum", 0.9}});
  expectValues(p, {1 - lr * 0.68, 2 + lr * 0.91}, 1e-15, "p' in place");
  expectValues(m, {0.68, -0.91}, 1e-15, "m' in place");
}

// As for Adam: the vectorised SGD loop gives the scalar formula's bits over
// several blocks and a ragged tail, with and without momentum, f32 storage.
TEST(CpuOptimizer, SgdGivesTheScalarFormulasBitsAcrossBlocks) {
  const int64_t n = 2 * 16384 + 1001;
  for (double momentum : {0.0, 0.9}) {
    Tensor param = randomTensor(DType::F32, {n}, 21);
    Tensor grad = randomTensor(DType::F32, {n}, 22, -3.0, 3.0);
    Tensor m = randomTensor(DType::F32, {n}, 23, -0.5, 0.5);
    std::vector<Tensor> out = runKernel(
        "moe.sgd_update", {param, grad, m, scalarF32(0.05f), scalarF32(0.7f)},
        {like(param), like(param)},
        {{"momentum", momentum}, {"weight_decay", 0.01}});
    const double lr = 0.05f, scale = 0.7f;
    std::vector<double> expectedP(n), expectedM(n);
    for (int64_t i = 0; i < n; ++i) {
      double p = param.at(i), g = grad.at(i) * scale + 0.01 * p;
      double m1 = momentum > 0 ? momentum * m.at(i) + g : m.at(i);
      expectedP[i] = static_cast<float>(p - lr * (momentum > 0 ? m1 : g));
      expectedM[i] = static_cast<float>(m1);
    }
    std::string what = momentum > 0 ? "with momentum" : "plain";
    expectValues(out[0], expectedP, 0, "p' " + what);
    expectValues(out[1], expectedM, 0, "m' " + what);
  }
}

} // namespace
