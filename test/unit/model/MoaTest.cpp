//===- MoaTest.cpp - mixture of attention heads, whole models -------------===//
//
// Identities that pin MoA down against ordinary attention on the same
// weights, and the promise that padding never changes a real position.
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

Tensor reshaped(const Tensor &t, const Shape &shape) {
  Tensor out(t.dtype(), shape);
  EXPECT_EQ(out.nbytes(), t.nbytes());
  std::memcpy(out.raw(), t.raw(), t.nbytes());
  return out;
}

Tensor scaled(const Tensor &t, double factor) {
  Tensor out(t.dtype(), t.shape());
  for (int64_t i = 0; i < t.numel(); ++i)
    out.set(i, t.at(i) * factor);
  return out;
}

Batch tokensBatch(int64_t rows, int64_t seq, uint64_t seed, int64_t vocab) {
  Batch b{Tensor(DType::I32, {rows, seq}), Tensor(DType::I32, {rows, seq}), {}};
  for (int64_t i = 0; i < rows * seq; ++i) {
    b.tokens.data<int32_t>()[i] =
        static_cast<int32_t>((i * 7 + seed * 13 + i * i) % vocab);
    b.targets.data<int32_t>()[i] = -1;
  }
  return b;
}

void expectClose(const Tensor &a, const Tensor &b, double tol) {
  ASSERT_EQ(a.shape(), b.shape());
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    worst = std::max(worst, std::fabs(a.at(i) - b.at(i)));
  EXPECT_LT(worst, tol);
}

// MoA with one expert selected per token out of one is single-query-head
// attention: the router's probability is 1 whatever its weights.
TEST(Moa, OneExpertIsSingleHeadAttention) {
  Session moa(compileSource(
      decoderSpec("moa(experts = 1, k = 1, head_dim = 8)"), "moa.moe"));
  Session attention(compileSource(
      decoderSpec("attention(heads = 1, head_dim = 8)"), "attn.moe"));
  for (int layer = 0; layer < 2; ++layer) {
    std::string m = "layers." + std::to_string(layer) + ".moa";
    std::string a = "layers." + std::to_string(layer) + ".attn";
    moa.setParam(m + ".router", randomWeights({16, 1}, 10 + layer, 0.3));
    for (const char *w : {".wk", ".wv"}) {
      Tensor value = randomWeights({16, 8}, 20 + layer + w[2], 0.3);
      moa.setParam(m + w, value);
      attention.setParam(a + w, value);
    }
    Tensor wq = randomWeights({16, 8}, 30 + layer, 0.3);
    Tensor wo = randomWeights({8, 16}, 40 + layer, 0.3);
    moa.setParam(m + ".wq", reshaped(wq, {1, 16, 8}));
    moa.setParam(m + ".wo", reshaped(wo, {1, 8, 16}));
    attention.setParam(a + ".wq", wq);
    attention.setParam(a + ".wo", wo);
    for (const char *n : {".norm.g", ".norm.b"})
      attention.setParam(a + n, moa.param(m + n));
  }
  Batch batch = tokensBatch(2, 12, 1, 40);
  expectClose(moa.logits(batch), attention.logits(batch), 1e-5);
}

// With k = E the output is the gated sum of every expert's attention; a
// zero router gates each of the E experts by 1/E, so the layer equals
// multi-query attention with E heads (one shared K/V head) whose output
// projection is scaled by 1/E.
TEST(Moa, AllExpertsAreTheGatedSumOfEveryHead) {
  const int64_t e = 3, d = 16, dh = 8;
  Session moa(compileSource(
      decoderSpec("moa(experts = 3, k = 3, head_dim = 8)"), "moa.moe"));
  Session mqa(compileSource(
      decoderSpec("attention(heads = 3, kv_heads = 1, head_dim = 8)"),
      "mqa.moe"));
  for (int layer = 0; layer < 2; ++layer) {
    std::string m = "layers." + std::to_string(layer) + ".moa";
    std::string a = "layers." + std::to_string(layer) + ".attn";
    for (const char *w : {".wk", ".wv"}) {
      Tensor value = randomWeights({d, dh}, 50 + layer + w[2], 0.3);
      moa.setParam(m + w, value);
      mqa.setParam(a + w, value);
    }
    // Expert q projections [E, d, dh] interleave into the heads' [d, E*dh].
    Tensor wq = randomWeights({e, d, dh}, 60 + layer, 0.3);
    Tensor heads(DType::F32, {d, e * dh});
    for (int64_t x = 0; x < e; ++x)
      for (int64_t i = 0; i < d; ++i)
        for (int64_t j = 0; j < dh; ++j)
          heads.set(i * e * dh + x * dh + j, wq.at((x * d + i) * dh + j));
    Tensor wo = randomWeights({e, dh, d}, 70 + layer, 0.3);
    moa.setParam(m + ".wq", wq);
    moa.setParam(m + ".wo", wo);
    mqa.setParam(a + ".wq", heads);
    mqa.setParam(a + ".wo", scaled(reshaped(wo, {e * dh, d}), 1.0 / e));
    for (const char *n : {".norm.g", ".norm.b"})
      mqa.setParam(a + n, moa.param(m + n));
  }
  Batch batch = tokensBatch(2, 12, 2, 40);
  expectClose(moa.logits(batch), mqa.logits(batch), 1e-5);
}

std::string encoderSpec() {
  return R"(moe 1
model enc {
  kind = encoder
  vocab = 262
  d_model = 16
  max_seq = 10
  segments = 2
  repeat 2 {
    moa(experts = 4, k = 2, head_dim = 8)
    ffn(hidden = 32)
  }
}
train {
  batch = 2
  seq_len = 10
}
data {
  source = lines("lines.txt")
}
)";
}

/// Rows of `lengths` real tokens, then padding with token `padToken`.
Batch paddedBatch(const std::vector<int64_t> &lengths, int64_t seq,
                  int32_t padToken, int64_t vocab = 256) {
  auto rows = static_cast<int64_t>(lengths.size());
  Batch b = tokensBatch(rows, seq, 3, vocab);
  Tensor mask(DType::I32, {rows, seq}), segments(DType::I32, {rows, seq});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t s = 0; s < seq; ++s) {
      bool real = s < lengths[r];
      mask.data<int32_t>()[r * seq + s] = real;
      segments.data<int32_t>()[r * seq + s] = real && s >= 3;
      if (!real)
        b.tokens.data<int32_t>()[r * seq + s] = padToken;
    }
  b.inputs["mask"] = mask;
  b.inputs["segments"] = segments;
  return b;
}

/// The logits of the first `length` positions of row `r`.
std::vector<double> realLogits(const Tensor &logits, int64_t r,
                               int64_t length) {
  int64_t seq = logits.shape()[1], vocab = logits.shape()[2];
  std::vector<double> out;
  for (int64_t i = 0; i < length * vocab; ++i)
    out.push_back(logits.at(r * seq * vocab + i));
  return out;
}

TEST(Moa, PaddingNeverChangesARealPosition) {
  std::string dir = ::testing::TempDir();
  {
    FILE *f = std::fopen((dir + "/lines.txt").c_str(), "w");
    std::fputs("some text\nmore text\n", f);
    std::fclose(f);
  }
  Session session(compileSource(encoderSpec(), "enc.moe", dir));
  // Non-zero routers, so that routing differs between tokens.
  for (int layer = 0; layer < 2; ++layer)
    session.setParam("layers." + std::to_string(layer) + ".moa.router",
                     randomWeights({16, 4}, 80 + layer, 1.0));
  Tensor a = session.logits(paddedBatch({6, 4}, 10, 256));
  Tensor b = session.logits(paddedBatch({6, 4}, 10, 97));
  Tensor tight = session.logits(paddedBatch({6}, 6, 256));
  for (int64_t r = 0; r < 2; ++r) {
    int64_t length = r == 0 ? 6 : 4;
    std::vector<double> x = realLogits(a, r, length),
                        y = realLogits(b, r, length);
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_NEAR(x[i], y[i], 1e-6) << "row " << r << " element " << i;
  }
  std::vector<double> x = realLogits(a, 0, 6), z = realLogits(tight, 0, 6);
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_NEAR(x[i], z[i], 1e-5) << "element " << i;
}

std::string translationSpec() {
  return R"(moe 1
model t {
  kind = encoder_decoder
  vocab = 96
  d_model = 16
  max_seq = 10
  positions = sinusoidal
  share_embeddings = true
  encoder {
    repeat 1 {
      moa(experts = 4, k = 2, head_dim = 8)
      ffn(hidden = 32)
    }
  }
  decoder {
    repeat 1 {
      moa(experts = 4, k = 2, head_dim = 8)
      cross_moa(experts = 4, k = 2, head_dim = 8)
      ffn(hidden = 32)
    }
  }
}
train {
  batch = 2
  seq_len = 10
}
data {
  source = synthetic("translate")
}
)";
}

/// Random routers for the translation spec's three MoA layers, so that
/// routing depends on the input; `seed` picks the set.
void setTranslationRouters(Session &session, uint64_t seed) {
  for (const char *layer :
       {"encoder.layers.0.moa", "decoder.layers.0.moa",
        "decoder.layers.0.cross_moa"})
    session.setParam(std::string(layer) + ".router",
                     randomWeights({16, 4}, layer[0] + layer[17] + seed, 1.0));
}

TEST(Moa, SourcePaddingNeverReachesTheDecoder) {
  Session session(compileSource(translationSpec(), "t.moe"));
  setTranslationRouters(session, 0);
  auto batchWith = [](int32_t padToken) {
    Batch b = paddedBatch({7, 5}, 10, 0, 90);
    Tensor source = tokensBatch(2, 10, 9, 90).tokens;
    Tensor sourceMask(DType::I32, {2, 10});
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t s = 0; s < 10; ++s) {
        bool real = s < (r == 0 ? 4 : 9);
        sourceMask.data<int32_t>()[r * 10 + s] = real;
        if (!real)
          source.data<int32_t>()[r * 10 + s] = padToken;
      }
    b.inputs.erase("segments");
    b.inputs["source"] = source;
    b.inputs["source_mask"] = sourceMask;
    return b;
  };
  Tensor a = session.logits(batchWith(0)), b = session.logits(batchWith(55));
  for (int64_t r = 0; r < 2; ++r) {
    int64_t length = r == 0 ? 7 : 5;
    std::vector<double> x = realLogits(a, r, length),
                        y = realLogits(b, r, length);
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_NEAR(x[i], y[i], 1e-6) << "row " << r << " element " << i;
  }
}

// Incremental decoding with the KV cache (a prefill, then one token at a
// time; the router sees only the new tokens) gives the full forward pass's
// logits.
TEST(Moa, KvCacheDecodingMatchesTheFullForward) {
  Session session(compileSource(
      decoderSpec("moa(experts = 4, k = 2, head_dim = 8)"), "moa.moe"));
  for (int layer = 0; layer < 2; ++layer)
    session.setParam("layers." + std::to_string(layer) + ".moa.router",
                     randomWeights({16, 4}, 90 + layer, 1.0));
  Batch batch = tokensBatch(1, 12, 4, 40);
  std::vector<double> full = tensorValues(session.logits(batch));
  const int32_t *ids = batch.tokens.data<int32_t>();
  expectAllClose(decodeIncrementally(session, {ids, ids + 12}, 5), full);
}

// An encoder-decoder decodes from the encoder's cached cross-attention keys
// and values exactly what teacher forcing computes.
TEST(Moa, CrossAttentionCacheMatchesTeacherForcing) {
  Session session(compileSource(translationSpec(), "t.moe"));
  setTranslationRouters(session, 1);
  Batch batch = tokensBatch(1, 6, 5, 90);
  Tensor source = tokensBatch(1, 8, 6, 90).tokens;
  Tensor sourceMask(DType::I32, {1, 8});
  Tensor mask(DType::I32, {1, 6});
  for (int64_t s = 0; s < 8; ++s)
    sourceMask.data<int32_t>()[s] = s < 7;
  for (int64_t s = 0; s < 6; ++s)
    mask.data<int32_t>()[s] = 1;
  batch.inputs = {{"source", source}, {"source_mask", sourceMask},
                  {"mask", mask}};
  std::vector<double> full = tensorValues(session.logits(batch));
  session.run("encode", {{"source", source}, {"source_mask", sourceMask}});
  const int32_t *ids = batch.tokens.data<int32_t>();
  expectAllClose(decodeIncrementally(session, {ids, ids + 6}, 1,
                                     {{"source_mask", sourceMask}}),
                 full);
}

} // namespace
