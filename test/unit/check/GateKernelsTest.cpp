//===- GateKernelsTest.cpp - the X-MoE gate's kernels against the cpu -----===//
//
// inputs/xmoe_gate.mlir (no .moe syntax has the gate yet) compiled with f32
// and bf16 storage: every generated kernel of every program on the emu
// device against the cpu device, in emu's checking mode too, and through
// NVRTC for sm_80 and sm_90 without spills. The cpu device's scores are
// checked against the op's definition on the planted infinities and NaNs.
//
//===----------------------------------------------------------------------===//

#include "BundleData.h"
#include "KernelCheck.h"
#include "ModuleKernelChecks.h"
#include "emu/EmuDevice.h"
#include "moec/Compiler.h"
#include "moec/Cuda.h"
#include "moec/Files.h"
#include "moec/KernelCheck.h"
#include "moec/Session.h"

#include <cmath>
#include <gtest/gtest.h>
#include <iostream>

using namespace moec;

namespace {

/// The gate module with `storage` (f32 or bf16) activations, tiled for
/// `arch`.
Bundle gateBundle(const std::string &storage, const std::string &arch) {
  return test::storageModuleBundle("xmoe_gate.mlir", storage, arch);
}

class GateKernels : public ::testing::TestWithParam<std::string> {};

TEST_P(GateKernels, MatchTheCpuDevice) {
  Bundle bundle = gateBundle(GetParam(), "sm_80");
  ASSERT_FALSE(bundle.internals().kernels.empty()) << "no CUDA was generated";
  KernelCheckOptions options;
  options.device = "emu";
  KernelCheckReport report = checkKernels(bundle, options);
  EXPECT_TRUE(report.passed()) << report.format();
  EXPECT_EQ(report.covered.size(), bundle.internals().kernels.size());
  // The gate's own kernels are among those compared.
  test::expectKindsCompared(report, {"row_scale", "row_scale_grad",
                                     "finite_or_min", "finite_or_min_grad"});
  std::cout << report.format();
}

TEST_P(GateKernels, PassTheEmuChecks) {
  test::expectEmuChecksPass(gateBundle(GetParam(), "sm_80"));
}

TEST_P(GateKernels, CompileWithoutSpills) {
#ifndef MOEC_HAVE_NVRTC
  GTEST_SKIP() << "built without the CUDA toolkit";
#endif
  test::expectCompilesWithoutSpills(
      [&](const std::string &arch) { return gateBundle(GetParam(), arch); });
}

INSTANTIATE_TEST_SUITE_P(Storage, GateKernels, ::testing::Values("f32", "bf16"),
                         [](const auto &info) { return info.param; });

/// Normal values from a small LCG (Box-Muller): plenty beyond +-1 and 1.5,
/// where the gate module plants infinities and NaNs.
Tensor normal(Shape shape, uint64_t seed) {
  Tensor t(DType::F32, shape);
  uint64_t state = seed * 0x9e3779b97f4a7c15ull;
  auto uniform = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return ((state >> 11) + 0.5) * 0x1p-53;
  };
  for (int64_t i = 0; i < t.numel(); ++i) {
    double u = uniform(), v = uniform();
    t.set(i, std::sqrt(-2 * std::log(u)) * std::cos(2 * M_PI * v));
  }
  return t;
}

/// Inputs of the gate module's loss and train_step for [b, s] tokens.
std::map<std::string, Tensor> gateInputs(int64_t b, int64_t s, bool step) {
  Tensor targets(DType::I32, {b, s});
  for (int64_t i = 0; i < targets.numel(); ++i)
    targets.set(i, i % 4);
  std::map<std::string, Tensor> inputs{{"x", normal({b, s, 16}, 1)},
                                       {"z", normal({b, s, 4}, 2)},
                                       {"w", normal({b, s, 4}, 3)},
                                       {"targets", targets}};
  if (step) {
    Tensor one(DType::I64, {});
    one.set(0, 1);
    inputs["step"] = one;
  }
  return inputs;
}

TEST(GateScores, TrainStepOnEmuMatchesCpu) {
  // Three steps of the whole program (rescale, scores with planted
  // infinities, gradients, SGD) on each device.
  Bundle bundle = gateBundle("f32", "sm_80");
  SessionOptions emu;
  emu.device = "emu";
  Session cpu(bundle), device(bundle, emu);
  for (int step = 0; step < 3; ++step) {
    std::map<std::string, Tensor> a =
        cpu.run("train_step", gateInputs(3, 11, true));
    std::map<std::string, Tensor> b =
        device.run("train_step", gateInputs(3, 11, true));
    EXPECT_NEAR(a.at("loss").at(0), b.at("loss").at(0), 1e-5) << step;
  }
  for (const char *name : {"gate.wg", "gate.wred"}) {
    Tensor a = cpu.param(name), b = device.param(name);
    for (int64_t i = 0; i < a.numel(); ++i)
      EXPECT_NEAR(a.at(i), b.at(i), 1e-5) << name << " " << i;
  }
  // Each row of wg was rescaled to 1.5, then moved by the step.
  Tensor wg = cpu.param("gate.wg");
  for (int64_t e = 0; e < 4; ++e) {
    double sq = 0;
    for (int64_t c = 0; c < 16; ++c)
      sq += wg.at(e * 16 + c) * wg.at(e * 16 + c);
    EXPECT_NEAR(std::sqrt(sq), 1.5, 0.05) << e;
    EXPECT_GT(std::fabs(std::sqrt(sq) - 1.5), 1e-7) << e;
  }
}

TEST(GateScores, FillWithTheGlobalFiniteMinimum) {
  // The planted logits hold +inf, -inf and NaN among finite values; the
  // scores replace each with the smallest finite logit of the whole batch.
  Bundle bundle = gateBundle("f32", "sm_80");
  Session session(bundle);
  std::map<std::string, Tensor> out =
      session.run("loss", gateInputs(3, 11, false));
  const Tensor &planted = out.at("planted"), &scores = out.at("scores");
  int64_t posInf = 0, negInf = 0, nan = 0;
  double m = HUGE_VAL;
  for (int64_t i = 0; i < planted.numel(); ++i) {
    double v = planted.at(i);
    posInf += v == HUGE_VAL;
    negInf += v == -HUGE_VAL;
    nan += std::isnan(v);
    if (std::isfinite(v))
      m = std::min(m, v);
  }
  EXPECT_GT(posInf, 0);
  EXPECT_GT(negInf, 0);
  EXPECT_GT(nan, 0);
  EXPECT_LT(posInf + negInf + nan, planted.numel());
  for (int64_t i = 0; i < planted.numel(); ++i) {
    double v = planted.at(i);
    EXPECT_EQ(scores.at(i), std::isfinite(v) ? v : m) << i;
  }
  EXPECT_TRUE(std::isfinite(out.at("loss").at(0)));
}

} // namespace
