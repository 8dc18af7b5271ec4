//===- BatchNormTest.cpp - moe.batch_norm through whole programs ----------===//
//
// inputs/batch_norm.mlir (the MAE gate's BatchNorm; no .moe syntax has it
// yet) compiled with f32 and bf16 storage: every generated kernel on the
// emu device against the cpu device, in emu's checking mode too, and
// through NVRTC for sm_80 and sm_90 without spills. Then the running
// statistics as state: train_step writes them back as torch's formula
// says (on the cpu and the emu device), eval programs read them,
// checkpoints keep them and a resumed run equals an unbroken one bit for
// bit; and a bundle whose updates are wrong is refused, naming the field.
//
//===----------------------------------------------------------------------===//

#include "BundleData.h"
#include "KernelCheck.h"
#include "ModuleKernelChecks.h"
#include "emu/EmuDevice.h"
#include "moec/Compiler.h"
#include "moec/Cuda.h"
#include "moec/Error.h"
#include "moec/Files.h"
#include "moec/KernelCheck.h"
#include "moec/Session.h"

#include <cmath>
#include <cstdio>
#include <gtest/gtest.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <unistd.h>

using namespace moec;

namespace {

constexpr int64_t kWidth = 8;
constexpr double kEps = 1e-5, kMomentum = 0.1;

/// The batch-norm module with `storage` (f32 or bf16) activations, tiled
/// for `arch`.
Bundle bnBundle(const std::string &storage, const std::string &arch = "sm_80") {
  return test::storageModuleBundle("batch_norm.mlir", storage, arch);
}

class BatchNormKernels : public ::testing::TestWithParam<std::string> {};

TEST_P(BatchNormKernels, MatchTheCpuDevice) {
  Bundle bundle = bnBundle(GetParam());
  ASSERT_FALSE(bundle.internals().kernels.empty()) << "no CUDA was generated";
  for (int64_t batch : {2, 64}) {
    // 64 x 37 rows spread over every row chunk of the statistics grid.
    SCOPED_TRACE(batch);
    KernelCheckOptions options;
    options.device = "emu";
    options.batch = batch;
    KernelCheckReport report = checkKernels(bundle, options);
    EXPECT_TRUE(report.passed()) << report.format();
    EXPECT_EQ(report.covered.size(), bundle.internals().kernels.size());
    test::expectKindsCompared(report, {"batch_norm", "batch_norm_grad"});
    if (batch == 2)
      std::cout << report.format();
  }
}

TEST_P(BatchNormKernels, PassTheEmuChecks) {
  test::expectEmuChecksPass(bnBundle(GetParam()));
}

TEST_P(BatchNormKernels, CompileWithoutSpills) {
#ifndef MOEC_HAVE_NVRTC
  GTEST_SKIP() << "built without the CUDA toolkit";
#endif
  test::expectCompilesWithoutSpills(
      [&](const std::string &arch) { return bnBundle(GetParam(), arch); });
}

INSTANTIATE_TEST_SUITE_P(Storage, BatchNormKernels,
                         ::testing::Values("f32", "bf16"),
                         [](const auto &info) { return info.param; });

/// Normal values from a small LCG (Box-Muller), shifted and scaled so
/// that the batch statistics are far from the running ones.
Tensor normal(Shape shape, uint64_t seed, double mean = 0, double sd = 1,
              DType dtype = DType::F32) {
  Tensor t(dtype, shape);
  uint64_t state = seed * 0x9e3779b97f4a7c15ull;
  auto uniform = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return ((state >> 11) + 0.5) * 0x1p-53;
  };
  for (int64_t i = 0; i < t.numel(); ++i) {
    double u = uniform(), v = uniform();
    t.set(i, mean + sd * std::sqrt(-2 * std::log(u)) * std::cos(2 * M_PI * v));
  }
  return t;
}

/// A [b, s] mask with `real[i]` real tokens in row i, then padding.
Tensor mask(int64_t b, int64_t s, const std::vector<int64_t> &real) {
  Tensor m(DType::I32, {b, s});
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < s; ++j)
      m.set(i * s + j, j < real[i] ? 1 : 0);
  return m;
}

Tensor scalarI64(int64_t v) {
  Tensor t(DType::I64, {});
  t.set(0, v);
  return t;
}

/// The inputs of the loss and train_step for step `step` (1-based), x
/// stored as `storage`.
std::map<std::string, Tensor> stepInputs(int64_t step,
                                         DType storage = DType::F32) {
  const int64_t b = 3, s = 5;
  Tensor targets(DType::I32, {b, s});
  for (int64_t i = 0; i < targets.numel(); ++i)
    targets.set(i, (i + step) % 4);
  return {{"x", normal({b, s, kWidth}, 10 + step, 0.5, 2.0, storage)},
          {"mask", mask(b, s, {5, 2, 4})},
          {"targets", targets},
          {"step", scalarI64(step)}};
}

/// The projection h of `inputs` under the session's current parameters:
/// what the batch norm of train_step normalises.
Tensor projection(Session &session, const std::map<std::string, Tensor> &in) {
  return session
      .run("forward", {{"x", in.at("x")}, {"dy", in.at("x")}})
      .at("h");
}

/// torch.nn.BatchNorm1d's update of the running statistics by the rows of
/// h whose mask is 1, in double as the cpu device computes it (two
/// passes, rows in order), rounded to f32.
void expectTorchUpdate(const Tensor &h, const Tensor &m,
                       const std::vector<float> &mean0,
                       const std::vector<float> &var0, const Tensor &mean1,
                       const Tensor &var1) {
  const int64_t rows = h.numel() / kWidth;
  for (int64_t c = 0; c < kWidth; ++c) {
    double n = 0, sum = 0, sq = 0;
    for (int64_t r = 0; r < rows; ++r)
      if (m.at(r) != 0) {
        n += 1;
        sum += h.at(r * kWidth + c);
      }
    double mu = sum / n;
    for (int64_t r = 0; r < rows; ++r)
      if (m.at(r) != 0) {
        double dev = h.at(r * kWidth + c) - mu;
        sq += dev * dev;
      }
    double var = sq / n;
    float expectMean =
        static_cast<float>((1 - kMomentum) * mean0[c] + kMomentum * mu);
    float expectVar = static_cast<float>((1 - kMomentum) * var0[c] +
                                         kMomentum * var * (n / (n - 1)));
    EXPECT_EQ(static_cast<float>(mean1.at(c)), expectMean) << "mean " << c;
    EXPECT_EQ(static_cast<float>(var1.at(c)), expectVar) << "var " << c;
  }
}

std::vector<float> floats(const Tensor &t) {
  std::vector<float> v;
  for (int64_t i = 0; i < t.numel(); ++i)
    v.push_back(static_cast<float>(t.at(i)));
  return v;
}

TEST(BatchNormTraining, TrainStepsUpdateTheRunningStatisticsAsTorchDoes) {
  Session session(bnBundle("f32"));
  std::vector<float> mean = floats(session.param("bn.running_mean"));
  std::vector<float> var = floats(session.param("bn.running_var"));
  EXPECT_EQ(mean, std::vector<float>(kWidth, 0.0f));
  EXPECT_EQ(var, std::vector<float>(kWidth, 1.0f));
  // Two steps: the second starts from the first's statistics and from
  // parameters the first step moved.
  for (int64_t step = 1; step <= 2; ++step) {
    SCOPED_TRACE(step);
    std::map<std::string, Tensor> in = stepInputs(step);
    Tensor h = projection(session, in);
    Tensor proj = session.param("proj");
    session.run("train_step", in);
    Tensor newMean = session.param("bn.running_mean");
    Tensor newVar = session.param("bn.running_var");
    expectTorchUpdate(h, in.at("mask"), mean, var, newMean, newVar);
    mean = floats(newMean);
    var = floats(newVar);
    // The optimizer moved the trainable parameters, not the statistics
    // (frozen: no moment, no gradient).
    EXPECT_NE(floats(session.param("proj")), floats(proj));
  }
  EXPECT_EQ(session.bundle().internals().findState("opt.m.bn.running_mean"),
            nullptr);
}

TEST(BatchNormTraining, NoRowOrOneRowLeavesTheRunningStatistics) {
  for (int64_t real : {0, 1}) {
    SCOPED_TRACE(real);
    Session session(bnBundle("f32"));
    std::map<std::string, Tensor> in = stepInputs(1);
    in["mask"] = mask(3, 5, {real, 0, 0});
    Tensor mean0 = session.param("bn.running_mean");
    Tensor var0 = session.param("bn.running_var");
    std::map<std::string, Tensor> out = session.run("train_step", in);
    EXPECT_TRUE(std::isfinite(out.at("loss").at(0)));
    EXPECT_EQ(floats(session.param("bn.running_mean")), floats(mean0));
    EXPECT_EQ(floats(session.param("bn.running_var")), floats(var0));
  }
}

TEST(BatchNormTraining, EvalProgramsUseTheRunningStatistics) {
  Session session(bnBundle("f32"));
  session.run("train_step", stepInputs(1));
  session.run("train_step", stepInputs(2));
  std::vector<float> mean = floats(session.param("bn.running_mean"));
  std::vector<float> var = floats(session.param("bn.running_var"));
  std::vector<float> gamma = floats(session.param("bn.gamma"));
  std::vector<float> beta = floats(session.param("bn.beta"));
  std::map<std::string, Tensor> in = stepInputs(3);
  Tensor dy = normal({3, 5, kWidth}, 99);
  std::map<std::string, Tensor> out =
      session.run("forward", {{"x", in.at("x")}, {"dy", dy}});
  const Tensor &h = out.at("h"), &y = out.at("y"), &dx = out.at("dx");
  double dgamma[kWidth] = {}, dbeta[kWidth] = {};
  for (int64_t i = 0; i < h.numel(); ++i) {
    int64_t c = i % kWidth;
    double rstd = 1 / std::sqrt(var[c] + kEps);
    double xh = (h.at(i) - mean[c]) * rstd;
    EXPECT_NEAR(y.at(i), xh * gamma[c] + beta[c], 1e-5) << i;
    // The eval gradient is the affine map's.
    EXPECT_NEAR(dx.at(i), dy.at(i) * gamma[c] * rstd, 1e-5) << i;
    dgamma[c] += dy.at(i) * xh;
    dbeta[c] += dy.at(i);
  }
  for (int64_t c = 0; c < kWidth; ++c) {
    EXPECT_NEAR(out.at("dgamma").at(c), dgamma[c], 1e-4) << c;
    EXPECT_NEAR(out.at("dbeta").at(c), dbeta[c], 1e-4) << c;
  }
  // Eval programs leave the statistics alone.
  in.erase("mask");
  in.erase("step");
  EXPECT_TRUE(std::isfinite(session.run("eval_loss", in).at("loss").at(0)));
  EXPECT_EQ(floats(session.param("bn.running_mean")), mean);
  EXPECT_EQ(floats(session.param("bn.running_var")), var);
}

/// A path in the test's temporary directory.
std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "/moec-bn-" + std::to_string(::getpid()) +
         "-" + name;
}

TEST(BatchNormTraining, CheckpointsKeepTheRunningStatistics) {
  Bundle bundle = bnBundle("f32");
  Session trained(bundle);
  trained.run("train_step", stepInputs(1));
  std::string path = tempPath("stats.safetensors");
  trained.saveCheckpoint(path);

  Session restored(bundle);
  EXPECT_NE(floats(restored.param("bn.running_var")),
            floats(trained.param("bn.running_var")));
  restored.loadCheckpoint(path);
  std::remove(path.c_str());
  for (const char *name : {"bn.running_mean", "bn.running_var", "bn.gamma",
                           "bn.beta", "proj", "head"})
    EXPECT_EQ(floats(restored.param(name)), floats(trained.param(name)))
        << name;
  std::map<std::string, Tensor> in = stepInputs(2);
  in.erase("mask");
  in.erase("step");
  EXPECT_EQ(restored.run("eval_loss", in).at("loss").at(0),
            trained.run("eval_loss", in).at("loss").at(0));
}

TEST(BatchNormTraining, AResumedRunEqualsAnUnbrokenOne) {
  Bundle bundle = bnBundle("f32");
  std::string path = tempPath("resume.safetensors");
  Session unbroken(bundle);
  for (int64_t step = 1; step <= 4; ++step) {
    unbroken.run("train_step", stepInputs(step));
    if (step == 2)
      unbroken.saveCheckpoint(path);
  }
  Session resumed(bundle);
  resumed.loadCheckpoint(path);
  std::remove(path.c_str());
  for (int64_t step = 3; step <= 4; ++step)
    resumed.run("train_step", stepInputs(step));
  for (const char *name : {"bn.running_mean", "bn.running_var", "bn.gamma",
                           "bn.beta", "proj", "head"})
    EXPECT_EQ(floats(resumed.param(name)), floats(unbroken.param(name)))
        << name;
}

TEST(BatchNormTraining, TheEmuDeviceWritesTheRunningStatisticsToo) {
  for (const char *storage : {"f32", "bf16"}) {
    SCOPED_TRACE(storage);
    Bundle bundle = bnBundle(storage);
    DType x = std::string(storage) == "f32" ? DType::F32 : DType::BF16;
    SessionOptions emu;
    emu.device = "emu";
    Session cpu(bundle), device(bundle, emu);
    double tol = std::string(storage) == "f32" ? 1e-5 : 2e-2;
    for (int64_t step = 1; step <= 2; ++step) {
      double a = cpu.run("train_step", stepInputs(step, x)).at("loss").at(0);
      double b =
          device.run("train_step", stepInputs(step, x)).at("loss").at(0);
      EXPECT_NEAR(a, b, tol) << step;
    }
    for (const char *name : {"bn.running_mean", "bn.running_var"}) {
      std::vector<float> a = floats(cpu.param(name)),
                         b = floats(device.param(name));
      for (int64_t c = 0; c < kWidth; ++c)
        EXPECT_NEAR(a[c], b[c], tol * (1 + std::fabs(a[c]))) << name << c;
    }
    // The statistics moved (x has mean 0.5 and deviation 2).
    EXPECT_NE(floats(device.param("bn.running_var")),
              std::vector<float>(kWidth, 1.0f));
  }
}

/// The bundle's JSON with `edit` applied to train_step's first update of
/// a running statistic, parsed again; the error it gives.
std::string editedUpdateError(
    const std::function<void(nlohmann::json &, nlohmann::json &)> &edit) {
  nlohmann::json b = nlohmann::json::parse(bnBundle("f32").json());
  nlohmann::json &program = b["programs"]["train_step"];
  for (nlohmann::json &u : program["updates"])
    if (u["target"] == "bn.running_mean") {
      edit(program, u);
      break;
    }
  try {
    Bundle::parse(b.dump(), "edited.json");
  } catch (const Error &e) {
    return e.what();
  }
  return "no error";
}

TEST(BatchNormBundle, UpdatesOfUnknownTargetsAreRefused) {
  std::string error = editedUpdateError(
      [](nlohmann::json &, nlohmann::json &u) { u["target"] = "bn.nope"; });
  EXPECT_NE(error.find("edited.json: programs.train_step.updates["),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("].target: no parameter or state named 'bn.nope'"),
            std::string::npos)
      << error;
}

TEST(BatchNormBundle, UpdatesOfAnotherShapeAreRefused) {
  // The update of running_mean [8] points at the loss's scalar buffer.
  std::string error =
      editedUpdateError([](nlohmann::json &program, nlohmann::json &u) {
        for (nlohmann::json &o : program["outputs"])
          if (o["name"] == "loss")
            u["buffer"] = o["buffer"];
      });
  EXPECT_NE(error.find("].buffer: buffer "), std::string::npos) << error;
  EXPECT_NE(error.find("has shape [] but 'bn.running_mean' has shape [8]"),
            std::string::npos)
      << error;
}

TEST(BatchNormBundle, TwoUpdatesOfOneTargetAreRefused) {
  std::string error =
      editedUpdateError([](nlohmann::json &program, nlohmann::json &u) {
        for (nlohmann::json &other : program["updates"])
          if (other["target"] == "bn.running_var")
            other["target"] = "bn.running_mean";
      });
  EXPECT_NE(error.find("].target: 'bn.running_mean' is updated twice by this "
                       "program"),
            std::string::npos)
      << error;
}

} // namespace
