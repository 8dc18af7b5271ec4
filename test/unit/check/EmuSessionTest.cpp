//===- EmuSessionTest.cpp - the emu device behind the Session API ---------===//
//
// What an embedding program sees with SessionOptions::device = "emu": the
// same results as the cpu device for generation and checkpoints, and clear
// errors for inputs the generated kernels would read out of bounds.
//
//===----------------------------------------------------------------------===//

#include "ErrorOf.h"
#include "moec/Compiler.h"
#include "moec/Error.h"
#include "moec/ModelData.h"
#include "moec/Session.h"

#include <cmath>
#include <filesystem>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <map>

using namespace moec;
using moec::test::errorOf;
using ::testing::AllOf;
using ::testing::HasSubstr;

namespace {

const char *kSpec = R"moe(moe 1
model tiny {
  vocab = 64
  d_model = 32
  max_seq = 16
  repeat 2 as i {
    attention(heads = 2)
    moe(experts = 4, k = 2, hidden = 48)
  }
}
train {
  batch = 2
  seq_len = 16
  seed = 5
  balance_loss = 0.01
}
data {
  source = synthetic("markov")
}
)moe";

Session sessionOn(const std::string &device, const std::string &dtype = "") {
  SessionOptions options;
  options.device = device;
  CompileOptions compile;
  compile.dtype = dtype;
  return Session(compileSource(kSpec, "tiny.moe", ".", compile), options);
}

TEST(EmuSession, GeneratesWhatTheCpuDeviceGenerates) {
  Session cpu = sessionOn("cpu"), emu = sessionOn("emu");
  EXPECT_EQ(emu.deviceName(), "emu");
  GenerateOptions options;
  options.maxNewTokens = 10;
  options.temperature = 0; // greedy: the KV cache path, token by token
  std::vector<int32_t> prompt = {3, 14, 15, 9, 26};
  EXPECT_EQ(emu.generate(prompt, options), cpu.generate(prompt, options));
}

// Fused groups count at the location of their first located step: the
// attention (line 7) and moe (line 8) statements get time in the forward
// and the backward pass, and every launch is counted once.
TEST(EmuSession, ProfileByLayerCountsEachLaunchAtItsStatement) {
  Session emu = sessionOn("emu");
  emu.setProfiling(true);
  Batch batch;
  batch.tokens = Tensor::of<int32_t>({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  batch.targets = Tensor::of<int32_t>({2, 4}, {2, 3, 4, 5, 6, 7, 8, 9});
  emu.trainStep(batch);
  int64_t launches = 0, located = 0;
  for (const Session::OpTime &t : emu.profile())
    launches += t.calls;
  std::map<std::string, std::pair<int64_t, int64_t>> byLine;
  for (const Session::LayerTime &t : emu.layerProfile()) {
    located += t.calls;
    std::string line = t.loc.substr(0, t.loc.rfind(':'));
    (t.backward ? byLine[line].second : byLine[line].first) += t.calls;
  }
  EXPECT_EQ(located, launches);
  for (const char *line : {"tiny.moe:7", "tiny.moe:8"}) {
    SCOPED_TRACE(line);
    ASSERT_TRUE(byLine.count(line));
    EXPECT_GT(byLine[line].first, 0);
    EXPECT_GT(byLine[line].second, 0);
  }
}

TEST(EmuSession, CheckpointsMoveBetweenDevices) {
  Session emu = sessionOn("emu");
  Batch batch;
  batch.tokens = Tensor::of<int32_t>({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  batch.targets = Tensor::of<int32_t>({2, 4}, {2, 3, 4, 5, 6, 7, 8, 9});
  for (int i = 0; i < 3; ++i)
    emu.trainStep(batch);
  std::string path =
      (std::filesystem::temp_directory_path() / "moec-emu-session.safetensors")
          .string();
  emu.saveCheckpoint(path);
  Session cpu = sessionOn("cpu");
  cpu.loadCheckpoint(path);
  std::filesystem::remove(path);
  EXPECT_EQ(cpu.step(), 3);
  std::map<std::string, double> a = emu.evaluate(batch), b = cpu.evaluate(batch);
  EXPECT_NEAR(a.at("ce"), b.at("ce"), 1e-5 * std::abs(b.at("ce")));
}

TEST(EmuSession, Bf16TrainingTracksTheCpuDevice) {
  // bf16 activations round at every kernel boundary on both devices, but
  // sums run in different orders: the losses agree to bf16 precision, not
  // bit for bit.
  Session cpu = sessionOn("cpu", "bf16"), emu = sessionOn("emu", "bf16");
  auto data = openDataSource(cpu.bundle().data(), 64, cpu.seed());
  for (int i = 0; i < 4; ++i) {
    Batch batch = data->batch(i, 2, 16);
    double a = emu.trainStep(batch).scalars.at("ce");
    double b = cpu.trainStep(batch).scalars.at("ce");
    EXPECT_NEAR(a, b, 1e-3 * std::abs(b)) << "step " << i + 1;
  }
  // The updated parameters agree: a held-out batch scores the same.
  Batch held = data->batch(100, 2, 16);
  double a = emu.evaluate(held).at("ce"), b = cpu.evaluate(held).at("ce");
  EXPECT_NEAR(a, b, 1e-3 * std::abs(b));
  EXPECT_NE(a, 0.0);
}

TEST(EmuSession, RejectsTokensOutsideTheVocabulary) {
  Session emu = sessionOn("emu");
  Batch batch;
  batch.tokens = Tensor::of<int32_t>({1, 3}, {1, 64, 2});
  batch.targets = Tensor::of<int32_t>({1, 3}, {1, 2, 3});
  EXPECT_THAT(errorOf([&] { emu.trainStep(batch); }),
              HasSubstr("tokens[0, 1] = 64 is outside the vocabulary [0, 64)"));
  batch.tokens = Tensor::of<int32_t>({1, 3}, {1, -3, 2});
  EXPECT_THAT(errorOf([&] { emu.evaluate(batch); }),
              HasSubstr("tokens[0, 1] = -3 is outside the vocabulary"));
  batch.tokens = Tensor::of<int32_t>({1, 3}, {1, 2, 3});
  batch.targets = Tensor::of<int32_t>({1, 3}, {-1, 2, 99});
  EXPECT_THAT(errorOf([&] { emu.trainStep(batch); }),
              HasSubstr("targets[0, 2] = 99 is outside the vocabulary [0, 64) "
                        "(negative targets are ignored)"));
  // An ignored target is fine.
  batch.targets = Tensor::of<int32_t>({1, 3}, {-1, 2, 3});
  EXPECT_NO_THROW(emu.trainStep(batch));
}

TEST(EmuSession, RejectsPositionsBeyondMaxSeq) {
  Session emu = sessionOn("emu");
  std::vector<int32_t> long_(17, 1);
  EXPECT_THAT(errorOf([&] {
                emu.run("forward",
                        {{"tokens", Tensor::of<int32_t>({1, 17}, long_)}});
              }),
              HasSubstr("17 positions reach beyond the model's max_seq of 16"));
  EXPECT_THAT(errorOf([&] {
                emu.run("decode",
                        {{"tokens", Tensor::of<int32_t>({1, 2}, {1, 2})},
                         {"past", Tensor::of<int64_t>({}, {15})}});
              }),
              HasSubstr("2 positions after 15 cached ones reach beyond the "
                        "model's max_seq of 16"));
}

// A token whose router logits are NaN has no ranking. The cpu device stops
// at the router; the generated router reports the token through the status
// words, routes it as a masked token meanwhile (so later kernels read valid
// experts), the optimizer skips its update, and the device raises the cpu's
// error once the step has run. Token 9 is the first of sequence 1, which
// every later position of it attends to: tokens [1, 0..3] are NaN from the
// first router on, and [1, 0] is the first.
TEST(EmuSession, StopsWhereTheCpuStopsOnLogitsItCannotRank) {
  Batch batch;
  batch.tokens = Tensor::of<int32_t>({2, 4}, {1, 2, 3, 4, 9, 6, 7, 8});
  batch.targets = Tensor::of<int32_t>({2, 4}, {2, 3, 4, 5, 6, 7, 8, 9});
  for (const char *dtype : {"f32", "bf16"})
    for (const char *device : {"cpu", "emu"}) {
      SCOPED_TRACE(std::string(device) + " " + dtype);
      Session session = sessionOn(device, dtype);
      Tensor embed = session.param("embed.tokens");
      Tensor poisoned = embed.to(DType::F32);
      for (int64_t j = 0; j < 32; ++j)
        poisoned.set(9 * 32 + j, std::nan(""));
      session.setParam("embed.tokens", poisoned);
      Tensor w2 = session.param("layers.1.moe.w2");
      EXPECT_THAT(errorOf([&] { session.trainStep(batch); }),
                  AllOf(HasSubstr("moe.topk_router: the logits of token [1, 0] "
                                  "contain NaN or +inf, or are all -inf; the "
                                  "router cannot rank them"),
                        HasSubstr("tiny.moe:8:")));
      // No update reached the parameters.
      Tensor after = session.param("layers.1.moe.w2");
      ASSERT_EQ(after.numel(), w2.numel());
      for (int64_t i = 0; i < w2.numel(); ++i)
        ASSERT_EQ(after.at(i), w2.at(i)) << "element " << i;
      // Generation stops too: the prompt's token 9 reaches the router.
      GenerateOptions greedy;
      greedy.maxNewTokens = 3;
      greedy.temperature = 0;
      EXPECT_THAT(errorOf([&] {
                    session.generate({3, 9, 4}, greedy);
                  }),
                  HasSubstr("the router cannot rank them"));
      // The report does not outlive the step: with the row mended, it trains.
      session.setParam("embed.tokens", embed);
      StepResult result = session.trainStep(batch);
      EXPECT_TRUE(std::isfinite(result.scalars.at("ce")));
      EXPECT_EQ(session.step(), 1);
    }
}

} // namespace

namespace {

/// The first three training steps of `bundle` on the emu device (the
/// generated CUDA) give the cpu device's losses; returns both sessions,
/// trained.
std::pair<Session, Session> expectFirstStepsTrack(const Bundle &bundle,
                                                  const std::string &name) {
  ModelData run = openModelData(bundle, "", 1);
  SessionOptions emuOptions;
  emuOptions.device = "emu";
  Session cpu(bundle), emu(bundle, emuOptions);
  const TrainingConfig &c = bundle.training();
  for (int64_t i = 0; i < 3; ++i) {
    Batch batch = run.source->batch(i, c.batch, c.seqLen);
    double a = cpu.trainStep(batch).scalars.at("loss");
    double b = emu.trainStep(batch).scalars.at("loss");
    EXPECT_NEAR(b, a, 1e-4 * std::fabs(a)) << name << " step " << i + 1;
  }
  return {std::move(cpu), std::move(emu)};
}

// The MH-MoE example's first steps on the emu device follow the cpu
// device's: sub-token views, capacity, rotary positions and all.
TEST(EmuSession, MhMoeExampleTracksTheCpuDevice) {
  expectFirstStepsTrack(
      compileFile(MOEC_SOURCE_DIR "/examples/mhmoe_lm.moe"), "mhmoe_lm");
}

// The MAE example's first steps (coordinate descent: G steps, then F
// steps with an expert drawn per sequence) on the emu device follow the
// cpu device's.
TEST(EmuSession, MaeExampleTracksTheCpuDevice) {
  expectFirstStepsTrack(compileFile(MOEC_SOURCE_DIR "/examples/mae_lm.moe"),
                        "mae_lm");
}

// The MoA examples' first steps on the emu device (the generated CUDA)
// follow the cpu device's, and the trained translator decodes the same
// sentences on both.
TEST(EmuSession, MoaExamplesTrackTheCpuDevice) {
  for (const char *name : {"moa_mlm", "moa_translate"}) {
    Bundle bundle =
        compileFile(MOEC_SOURCE_DIR "/examples/" + std::string(name) + ".moe");
    auto [cpu, emu] = expectFirstStepsTrack(bundle, name);
    if (bundle.model().kind != "encoder_decoder")
      continue;
    ModelData run = openModelData(bundle, "", 1);
    const TrainingConfig &c = bundle.training();
    std::vector<std::vector<int32_t>> sources;
    for (const TranslationPair &p : run.source->pairs())
      if (sources.size() < 6)
        sources.push_back(p.source);
    if (sources.empty())
      for (int64_t r = 0; r < 6; ++r) {
        Tensor src = run.source->batch(r, 1, c.seqLen).inputs.at("source");
        std::vector<int32_t> ids;
        for (int64_t j = 0; j < src.numel(); ++j)
          if (src.data<int32_t>()[j] > 3)
            ids.push_back(src.data<int32_t>()[j]);
        sources.push_back(ids);
      }
    TranslateOptions options;
    options.beam = 2;
    EXPECT_EQ(emu.translate(sources, run.tokenizer->specials(), options),
              cpu.translate(sources, run.tokenizer->specials(), options));
  }
}

} // namespace
