//===- MhMoeTest.cpp - multi-head mixture of experts, whole models --------===//
//
// Identities that pin MH-MoE down against the plain moe layer on the same
// weights, and the promise that generation with the KV cache equals a full
// forward under the (dropless) eval routing.
//
//===----------------------------------------------------------------------===//

#include "moec/Compiler.h"
#include "moec/Session.h"
#include "Decoding.h"
#include "RandomWeights.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

using namespace moec;
using moec::test::decodeIncrementally;
using moec::test::expectAllClose;
using moec::test::randomWeights;
using moec::test::tensorValues;

namespace {

std::string decoderSpec(const std::string &layer) {
  return R"(moe 1
model m {
  vocab = 40
  d_model = 16
  max_seq = 12
  norm = rms_norm(eps = 1e-5)
  repeat 2 {
    attention(heads = 2)
    )" + layer + R"(
  }
}
train {
  batch = 2
  seq_len = 12
  z_loss = 0
}
data {
  source = synthetic("markov")
}
)";
}

Batch tokensBatch(int64_t rows, int64_t seq, uint64_t seed, int64_t vocab) {
  Batch b{Tensor(DType::I32, {rows, seq}), Tensor(DType::I32, {rows, seq}), {}};
  for (int64_t i = 0; i < rows * seq; ++i) {
    b.tokens.data<int32_t>()[i] =
        static_cast<int32_t>((i * 7 + seed * 13 + i * i) % vocab);
    b.targets.data<int32_t>()[i] = static_cast<int32_t>((i * 3 + 1) % vocab);
  }
  return b;
}

/// Gives every parameter of `session` a random value; the routers large
/// enough that routing is far from uniform.
void randomise(Session &session, uint64_t seed) {
  for (const ParamInfo &p : session.bundle().params()) {
    bool router = p.name.find("router") != std::string::npos;
    session.setParam(p.name, randomWeights(p.shape, seed++, router ? 1.5 : 0.3));
  }
}

/// The parameter `name` of a model whose MoE sublayer is `from`, renamed
/// for one whose MoE sublayer is `to`.
std::string renamed(std::string name, const std::string &from,
                    const std::string &to) {
  size_t at = name.find("." + from + ".");
  if (at != std::string::npos)
    name.replace(at + 1, from.size(), to);
  return name;
}

// With one head and neither projection, MH-MoE is the plain moe layer:
// the same weights give the same logits (eval) and the same training loss
// and gradients (capacity in force), as long as both layers route the same
// way and neither adds a z-loss term the other lacks.
TEST(MhMoe, OneHeadWithoutProjectionsIsThePlainMoeLayer) {
  const std::string experts =
      "experts = 4, k = 2, hidden = 24, activation = silu, glu = true, "
      "capacity = tutel(factor = 0.75), balance = top1";
  Session plain(compileSource(decoderSpec("moe(" + experts + ")"), "p.moe"));
  Session multi(compileSource(
      decoderSpec("mh_moe(heads = 1, head_proj = false, merge_proj = false, " +
                  experts + ", eval_capacity = tutel(factor = 0.75))"),
      "m.moe"));
  randomise(multi, 5);
  for (const ParamInfo &p : multi.bundle().params())
    plain.setParam(renamed(p.name, "mh_moe", "moe"), multi.param(p.name));
  Batch batch = tokensBatch(2, 12, 3, 40);
  expectAllClose(tensorValues(multi.logits(batch)),
                 tensorValues(plain.logits(batch)));

  std::map<std::string, Tensor> inputs = {{"tokens", batch.tokens},
                                          {"targets", batch.targets}};
  std::map<std::string, Tensor> m = multi.run("backward", inputs);
  std::map<std::string, Tensor> p = plain.run("backward", inputs);
  EXPECT_NEAR(m.at("ce").at(0), p.at("ce").at(0), 1e-6);
  EXPECT_NEAR(m.at("balance_loss").at(0), p.at("balance_loss").at(0), 1e-6);
  EXPECT_EQ(m.count("z_loss"), 0u);
  for (const auto &[name, grad] : m)
    if (name.rfind("grad:", 0) == 0)
      expectAllClose(tensorValues(grad),
                     tensorValues(p.at(renamed(name, "mh_moe", "moe"))));
  // Capacity dropped something, so the comparison covered dropping.
  double kept = 0;
  for (double v : tensorValues(m.at("load:layers.1.mh_moe")))
    kept += v;
  EXPECT_LT(kept, 2 * 2 * 12 * 2);
}

// The projections are ordinary affine maps around the split: identity
// weights and zero biases leave the layer what it is without them.
TEST(MhMoe, IdentityProjectionsChangeNothing) {
  const std::string layer =
      "heads = 4, experts = 4, k = 2, hidden = 8, capacity = none";
  Session with(compileSource(decoderSpec("mh_moe(" + layer + ")"), "w.moe"));
  Session without(compileSource(
      decoderSpec("mh_moe(" + layer +
                  ", head_proj = false, merge_proj = false)"),
      "o.moe"));
  randomise(without, 7);
  for (const ParamInfo &p : without.bundle().params())
    with.setParam(p.name, without.param(p.name));
  Tensor identity(DType::F32, {16, 16}), zero(DType::F32, {16});
  for (int i = 0; i < 16; ++i)
    identity.set(i * 16 + i, 1.0);
  for (const char *layerIndex : {"0", "1"})
    for (const char *proj : {"head_proj", "merge_proj"}) {
      std::string p = std::string("layers.") + layerIndex + ".mh_moe." + proj;
      with.setParam(p + ".w", identity);
      with.setParam(p + ".b", zero);
    }
  Batch batch = tokensBatch(2, 12, 5, 40);
  expectAllClose(tensorValues(with.logits(batch)),
                 tensorValues(without.logits(batch)));
}

// Eval and generation route without capacity (the default eval_capacity),
// so decoding one token at a time with the KV cache reproduces the full
// forward, sub-tokens and all.
TEST(MhMoe, KvCacheDecodingMatchesTheFullForward) {
  Session session(compileSource(
      decoderSpec("mh_moe(heads = 4, experts = 4, k = 2, hidden = 8)"),
      "mh.moe"));
  randomise(session, 9);
  Batch batch = tokensBatch(1, 12, 4, 40);
  std::vector<double> full = tensorValues(session.logits(batch));
  const int32_t *ids = batch.tokens.data<int32_t>();
  expectAllClose(decodeIncrementally(session, {ids, ids + 12}, 5), full);
}

} // namespace
