//===- MaeTest.cpp - mixture of attentive experts, whole models -----------===//
//
// The identities that define MAE against plain multi-head attention on the
// same weights: uniform responsibilities are the attention itself, a
// responsibility of 1 on expert j is the attention with head j dropped and
// the others scaled by h / (h - 1), and the uniform baseline trains one
// such expert per sequence. Generation with the gate's causal windows
// reproduces a full forward.
//
//===----------------------------------------------------------------------===//

#include "moec/Compiler.h"
#include "moec/ModelData.h"
#include "moec/Session.h"
#include "Decoding.h"
#include "RandomWeights.h"

#include <cmath>
#include <filesystem>
#include <gtest/gtest.h>
#include <set>
#include <unistd.h>

using namespace moec;
using moec::test::decodeIncrementally;
using moec::test::expectAllClose;
using moec::test::randomWeights;
using moec::test::tensorValues;

namespace {

constexpr int64_t kHeads = 4, kWidth = 16, kHeadDim = kWidth / kHeads;

std::string decoderSpec(const std::string &layer) {
  return R"(moe 1
model m {
  vocab = 40
  d_model = 16
  max_seq = 12
  repeat 2 {
    )" + layer + R"(
    ffn(hidden = 32)
  }
}
train {
  batch = 2
  seq_len = 12
}
data {
  source = synthetic("markov")
}
)";
}

Batch tokensBatch(int64_t rows, int64_t seq, uint64_t seed) {
  Batch b{Tensor(DType::I32, {rows, seq}), Tensor(DType::I32, {rows, seq}), {}};
  for (int64_t i = 0; i < rows * seq; ++i) {
    b.tokens.data<int32_t>()[i] =
        static_cast<int32_t>((i * 7 + seed * 13 + i * i) % 40);
    b.targets.data<int32_t>()[i] = static_cast<int32_t>((i * 3 + 1) % 40);
  }
  return b;
}

/// Random values for every parameter; BatchNorm's running variance stays
/// positive.
void randomise(Session &session, uint64_t seed) {
  for (const ParamInfo &p : session.bundle().params()) {
    Tensor t = randomWeights(p.shape, seed++, 0.4);
    if (p.name.find(".bn.var") != std::string::npos)
      for (int64_t i = 0; i < t.numel(); ++i)
        t.set(i, 0.5 + std::abs(t.at(i)));
    session.setParam(p.name, t);
  }
}

std::string renamed(std::string name, const std::string &from,
                    const std::string &to) {
  size_t at = name.find("." + from + ".");
  if (at != std::string::npos)
    name.replace(at + 1, from.size(), to);
  return name;
}

/// Copies the attention weights of `mae` into `attention` (sublayer "attn").
void copyAttention(const Session &mae, Session &attention) {
  for (const ParamInfo &p : attention.bundle().params())
    attention.setParam(p.name, mae.param(renamed(p.name, "attn", "mae")));
}

/// Gives every gate of `session` constant logits `bias` (zero weights).
void fixGates(Session &session, const std::vector<double> &bias) {
  for (const ParamInfo &p : session.bundle().params()) {
    if (p.name.find(".gate.w2") != std::string::npos)
      session.setParam(p.name, Tensor(DType::F32, p.shape));
    if (p.name.find(".gate.b2") != std::string::npos) {
      Tensor b(DType::F32, p.shape);
      for (int64_t j = 0; j < b.numel(); ++j)
        b.set(j, bias[j]);
      session.setParam(p.name, b);
    }
  }
}

/// The output projection of the attention whose head `dropped` is left out
/// and whose other heads are scaled by h / (h - 1): expert `dropped`.
void makeExpert(Session &attention, int64_t dropped) {
  for (const char *layer : {"layers.0.attn.wo", "layers.1.attn.wo"}) {
    Tensor wo = attention.param(layer);
    for (int64_t row = 0; row < kWidth; ++row)
      for (int64_t col = 0; col < kWidth; ++col) {
        double scale = row / kHeadDim == dropped
                           ? 0.0
                           : double(kHeads) / double(kHeads - 1);
        wo.set(row * kWidth + col, wo.at(row * kWidth + col) * scale);
      }
    attention.setParam(layer, wo);
  }
}

// g = 1/h gives every head the scale h (1 - 1/h) / (h - 1) = 1: the
// layer is the multi-head attention, in eval and in (joint) training,
// gradients included.
TEST(Mae, UniformResponsibilitiesAreMultiHeadAttention) {
  Session mae(compileSource(
      decoderSpec("mae(heads = 4, gate_hidden = 8, gate_dropout = 0)"),
      "mae.moe"));
  Session attention(
      compileSource(decoderSpec("attention(heads = 4)"), "attn.moe"));
  randomise(mae, 3);
  copyAttention(mae, attention);
  fixGates(mae, {0.7, 0.7, 0.7, 0.7});
  Batch batch = tokensBatch(2, 12, 1);
  expectAllClose(tensorValues(mae.logits(batch)),
                 tensorValues(attention.logits(batch)));

  std::map<std::string, Tensor> inputs = {{"tokens", batch.tokens},
                                          {"targets", batch.targets}};
  std::map<std::string, Tensor> m = mae.run("backward", inputs);
  std::map<std::string, Tensor> a = attention.run("backward", inputs);
  EXPECT_NEAR(m.at("ce").at(0), a.at("ce").at(0), 1e-6);
  for (const auto &[name, grad] : a)
    if (name.rfind("grad:", 0) == 0)
      expectAllClose(tensorValues(m.at(renamed(name, "attn", "mae"))),
                     tensorValues(grad));
  // The statistics: uniform responsibilities, entropy log h.
  std::vector<double> stats = tensorValues(m.at("gate:layers.0.mae"));
  ASSERT_EQ(stats.size(), size_t(kHeads + 1));
  for (int64_t j = 0; j < kHeads; ++j)
    EXPECT_NEAR(stats[j], 0.25, 1e-6);
  EXPECT_NEAR(stats[kHeads], std::log(4.0), 1e-5);
}

// A responsibility of 1 on expert j: head j is dropped and the others are
// scaled by h / (h - 1).
TEST(Mae, OneHotResponsibilityIsThatExpertAlone) {
  Session mae(compileSource(decoderSpec("mae(heads = 4, gate_hidden = 8)"),
                            "mae.moe"));
  randomise(mae, 5);
  Batch batch = tokensBatch(2, 12, 2);
  for (int64_t j = 0; j < kHeads; ++j) {
    std::vector<double> bias(kHeads, 0.0);
    bias[j] = 80.0; // softmax: 1 in f32
    fixGates(mae, bias);
    Session attention(
        compileSource(decoderSpec("attention(heads = 4)"), "attn.moe"));
    copyAttention(mae, attention);
    makeExpert(attention, j);
    expectAllClose(tensorValues(mae.logits(batch)),
                   tensorValues(attention.logits(batch)));
  }
}

// The uniform baseline: no gate parameters; eval is the plain attention,
// and a training pass over one sequence is one of the h experts (the same
// head dropped in both layers' draws or not, so check each layer's draw
// through a one-layer model).
TEST(Mae, UniformBaselineTrainsOneExpertPerSequence) {
  auto spec = [](const std::string &layer) {
    return R"(moe 1
model m {
  vocab = 40
  d_model = 16
  max_seq = 12
  block {
    )" + layer + R"(
  }
}
train {
  batch = 1
  seq_len = 12
}
data {
  source = synthetic("markov")
}
)";
  };
  Session mae(compileSource(
      spec("mae(heads = 4, responsibilities = uniform)"), "u.moe"));
  for (const ParamInfo &p : mae.bundle().params())
    EXPECT_EQ(p.name.find(".gate."), std::string::npos) << p.name;
  randomise(mae, 11);
  Session attention(compileSource(spec("attention(heads = 4)"), "a.moe"));
  copyAttention(mae, attention);
  Batch batch = tokensBatch(1, 12, 4);
  expectAllClose(tensorValues(mae.logits(batch)),
                 tensorValues(attention.logits(batch)));

  std::vector<double> expertLoss;
  std::map<std::string, Tensor> inputs = {{"tokens", batch.tokens},
                                          {"targets", batch.targets}};
  Tensor wo = attention.param("layers.0.attn.wo");
  for (int64_t j = 0; j < kHeads; ++j) {
    Tensor scaled(DType::F32, wo.shape()); // Tensor copies share storage
    for (int64_t i = 0; i < scaled.numel(); ++i)
      scaled.set(i, (i / kWidth) / kHeadDim == j
                        ? 0.0
                        : wo.at(i) * kHeads / (kHeads - 1.0));
    attention.setParam("layers.0.attn.wo", scaled);
    expertLoss.push_back(attention.run("loss", inputs).at("loss").at(0));
  }
  std::set<int64_t> drawn;
  for (int64_t seed = 1; seed <= 24; ++seed) {
    inputs["rng"] = Tensor::of<int64_t>({}, {seed});
    double loss = mae.run("loss", inputs).at("loss").at(0);
    int64_t match = -1;
    for (int64_t j = 0; j < kHeads; ++j)
      if (std::abs(loss - expertLoss[j]) < 1e-5 * (1 + std::abs(loss)))
        match = j;
    ASSERT_GE(match, 0) << "seed " << seed << ": loss " << loss
                        << " is no expert's (" << expertLoss[0] << ", "
                        << expertLoss[1] << ", " << expertLoss[2] << ", "
                        << expertLoss[3] << ")";
    drawn.insert(match);
  }
  EXPECT_EQ(drawn.size(), size_t(kHeads)); // 24 draws reach every head
}

// Decoding reads the gate's window from the cache of the layer's inputs:
// one token at a time reproduces the full forward, for both causal
// windows.
TEST(Mae, KvCacheDecodingMatchesTheFullForward) {
  for (const char *pool : {"prefix", "last(size = 3)"}) {
    Session session(compileSource(
        decoderSpec(std::string("mae(heads = 4, gate_hidden = 8, pool = ") +
                    pool + ")"),
        "mae.moe"));
    randomise(session, 9);
    Batch batch = tokensBatch(1, 12, 6);
    std::vector<double> full = tensorValues(session.logits(batch));
    const int32_t *ids = batch.tokens.data<int32_t>();
    SCOPED_TRACE(pool);
    expectAllClose(decodeIncrementally(session, {ids, ids + 12}, 5), full);
  }
}

// An encoder-decoder with MAE everywhere: the encoder's gates pool the
// real source positions (padding changes nothing), the decoder's self- and
// cross-attention gates pool each prefix; decoding from the caches gives
// what teacher forcing computes.
TEST(Mae, EncoderDecoderDecodesWhatTeacherForcingComputes) {
  Bundle bundle = compileSource(R"(moe 1
model t {
  kind = encoder_decoder
  vocab = 96
  d_model = 16
  max_seq = 10
  share_embeddings = true
  encoder {
    repeat 1 {
      mae(heads = 4, gate_hidden = 8)
      ffn(hidden = 32)
    }
  }
  decoder {
    repeat 1 {
      mae(heads = 4, gate_hidden = 8)
      cross_mae(heads = 2, gate_hidden = 8, pool = last(size = 2))
      ffn(hidden = 32)
    }
  }
}
data {
  source = synthetic("translate")
}
)",
                                "t.moe");
  Session session(bundle);
  randomise(session, 21);
  std::vector<int32_t> ids = {1, 40, 7, 33, 12, 5},
                       src = {9, 21, 60, 2, 17, 44, 3, 0};
  Tensor source = Tensor::of<int32_t>({1, 8}, src);
  Tensor sourceMask = Tensor::of<int32_t>({1, 8}, {1, 1, 1, 1, 1, 1, 0, 0});
  Batch batch;
  batch.tokens = Tensor::of<int32_t>({1, 6}, ids);
  batch.inputs = {{"source", source},
                  {"source_mask", sourceMask},
                  {"mask", Tensor::of<int32_t>({1, 6}, {1, 1, 1, 1, 1, 1})}};
  std::vector<double> full = tensorValues(session.logits(batch));
  // Other tokens at the padding positions: the same logits.
  batch.inputs["source"] =
      Tensor::of<int32_t>({1, 8}, {9, 21, 60, 2, 17, 44, 70, 80});
  expectAllClose(tensorValues(session.logits(batch)), full);
  session.run("encode", {{"source", source}, {"source_mask", sourceMask}});
  expectAllClose(
      decodeIncrementally(session, ids, 2, {{"source_mask", sourceMask}}),
      full);
}

/// A decoder with MAE self-attention trained by block coordinate descent:
/// G steps in steps 3-4, 7-8, ... (after an F update too with then_f).
std::string coordinateDescentSpec(bool thenF) {
  return std::string(R"(moe 1
model m {
  vocab = 40
  d_model = 16
  max_seq = 12
  repeat 2 {
    mae(heads = 4, gate_hidden = 8)
    ffn(hidden = 32)
  }
}
train {
  batch = 2
  seq_len = 12
  steps = 12
  seed = 5
  optimizer = adam(lr = 1e-2)
  groups = [group("gate", params = ["*.gate.*"], optimizer = sgd(lr = 1.0))]
  phases = coordinate_descent(group = "gate", then_f = )") +
         (thenF ? "true" : "false") + R"(,
                              g_steps = every(period = 4, length = 2))
}
data {
  source = synthetic("markov")
}
)";
}

using Snapshot = std::map<std::string, std::vector<double>>;

Snapshot parameters(const Session &session) {
  Snapshot values;
  for (const ParamInfo &p : session.bundle().params())
    values[p.name] = tensorValues(session.param(p.name));
  return values;
}

bool isGate(const std::string &name) {
  return name.find(".gate.") != std::string::npos;
}

// A G step trains the gates alone (their BatchNorm statistics move too); an
// F step trains everything else and leaves every gate parameter, running
// statistics included, as it was.
TEST(Mae, GStepsTrainOnlyTheGatesAndFStepsNoneOfThem) {
  Bundle bundle = compileSource(coordinateDescentSpec(false), "bcd.moe");
  Session session(bundle);
  auto data = openDataSource(bundle.data(), 40, session.seed());
  const std::string expected = "FFGGF";
  for (int64_t i = 0; i < static_cast<int64_t>(expected.size()); ++i) {
    Snapshot before = parameters(session);
    StepResult result = session.trainStep(data->batch(i, 2, 12));
    Snapshot after = parameters(session);
    ASSERT_EQ(result.phase, std::string(1, expected[i])) << "step " << i + 1;
    bool gStep = expected[i] == 'G';
    for (const auto &[name, values] : before) {
      bool moved = values != after.at(name);
      if (isGate(name) == gStep)
        EXPECT_TRUE(moved) << "step " << i + 1 << " left " << name;
      else
        EXPECT_FALSE(moved) << "step " << i + 1 << " changed " << name;
    }
    // Statistics of both layers' gates: responsibilities sum to 1.
    ASSERT_EQ(result.gates.size(), 2u);
    for (const auto &[layer, stats] : result.gates) {
      double sum = 0;
      for (int64_t j = 0; j < kHeads; ++j)
        sum += stats[j];
      EXPECT_NEAR(sum, 1.0, 1e-5) << layer;
      EXPECT_GT(stats[kHeads], 0.0);
      EXPECT_LE(stats[kHeads], std::log(double(kHeads)) + 1e-6);
    }
  }
}

// With then_f, G steps take a G and then an F update on one batch; a run
// stopped inside a G window and resumed from its checkpoint repeats an
// unbroken run bit for bit (losses, parameters, running statistics).
TEST(Mae, ResumedInsideAGWindowRepeatsAnUnbrokenRun) {
  Bundle bundle = compileSource(coordinateDescentSpec(true), "bcd.moe");
  auto data = openDataSource(bundle.data(), 40, 5);
  const int64_t total = 10, stop = 3;
  Session unbroken(bundle);
  std::vector<double> losses;
  for (int64_t i = 0; i < total; ++i) {
    StepResult r = unbroken.trainStep(data->batch(i, 2, 12));
    EXPECT_EQ(r.scalars.count("g_loss"), r.phase == "G" ? 1u : 0u);
    losses.push_back(r.scalars.at("loss"));
  }
  // Steps 3, 4, 7, 8 took both updates: 10 F and 4 G updates.
  EXPECT_EQ(unbroken.updates(),
            (std::map<std::string, int64_t>{{"step", 10}, {"step:gate", 4}}));

  Session first(bundle);
  for (int64_t i = 0; i < stop; ++i)
    first.trainStep(data->batch(i, 2, 12));
  ASSERT_EQ(first.nextPhase(), "G");
  std::string path = (std::filesystem::temp_directory_path() /
                      ("moec-mae-" + std::to_string(::getpid()) + ".ckpt"))
                         .string();
  first.saveCheckpoint(path);
  // The same seed: it keys the per-step draws (dropout, sampled experts).
  Session resumed(bundle);
  resumed.loadCheckpoint(path);
  std::filesystem::remove(path);
  for (int64_t i = stop; i < total; ++i)
    EXPECT_EQ(resumed.trainStep(data->batch(i, 2, 12)).scalars.at("loss"),
              losses[i])
        << "step " << i + 1;
  EXPECT_EQ(parameters(resumed), parameters(unbroken));
}

} // namespace
