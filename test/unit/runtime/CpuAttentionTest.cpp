//===- CpuAttentionTest.cpp - attention and the KV cache ------------------===//

#include "KernelTestUtil.h"

#include "moec/Error.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

using namespace moec;
using namespace moec::test;

namespace {

Json attnAttrs(int64_t heads, int64_t kvHeads, double scale, bool causal) {
  Json attrs = {
      {"num_heads", heads}, {"num_kv_heads", kvHeads}, {"scale", scale}};
  if (causal)
    attrs["causal"] = true;
  return attrs;
}

/// Runs moe.attention; `past` may be absent.
std::pair<Tensor, Tensor> attend(const Tensor &q, const Tensor &k,
                                 const Tensor &v, const Tensor &past,
                                 const Json &attrs) {
  int64_t heads = attrs["num_heads"];
  std::vector<Tensor> out = runKernel(
      "moe.attention", {q, k, v, past},
      {like(q), zeros(q.dtype(), {q.shape()[0], heads, q.shape()[1]})}, attrs);
  return {out[0], out[1]};
}

/// Rows [begin, end) of the sequence dimension of a [B, S, w] tensor.
Tensor sliceSeq(const Tensor &t, int64_t begin, int64_t end) {
  int64_t b = t.shape()[0], s = t.shape()[1], w = t.shape()[2];
  Tensor out(t.dtype(), {b, end - begin, w});
  size_t elem = t.nbytes() / t.numel();
  for (int64_t i = 0; i < b; ++i)
    std::memcpy(static_cast<char *>(out.raw()) + i * (end - begin) * w * elem,
                static_cast<const char *>(t.raw()) + (i * s + begin) * w * elem,
                (end - begin) * w * elem);
  return out;
}

TEST(CpuAttention, CausalTwoPositions) {
  // One head of width 1: query 0 sees key 0 only; query 1 sees both with
  // scores [2, 0].
  Tensor q = Tensor::of<double>({1, 2, 1}, {1, 2});
  Tensor k = Tensor::of<double>({1, 2, 1}, {1, 0});
  Tensor v = Tensor::of<double>({1, 2, 1}, {10, 20});
  auto [out, lse] = attend(q, k, v, absent(), attnAttrs(1, 1, 1.0, true));
  double e2 = std::exp(2.0);
  expectValues(out, {10, (10 * e2 + 20) / (e2 + 1)}, 1e-13, "out");
  expectValues(lse, {1, std::log(e2 + 1)}, 1e-14, "lse");
  // Without causal query 0 sees key 1 too: scores [1, 0].
  auto [full, fullLse] = attend(q, k, v, absent(), attnAttrs(1, 1, 1.0, false));
  double e1 = std::exp(1.0);
  EXPECT_NEAR(full.at(0), (10 * e1 + 20) / (e1 + 1), 1e-13);
  EXPECT_NEAR(fullLse.at(0), std::log(e1 + 1), 1e-14);
}

TEST(CpuAttention, CausalOffsetWhenKeysOutnumberQueries) {
  // Sq = 1, Sk = 3 without past: offset 2, so the query sees all keys.
  Tensor q = Tensor::of<double>({1, 1, 1}, {0});
  Tensor k = Tensor::of<double>({1, 3, 1}, {1, 2, 3});
  Tensor v = Tensor::of<double>({1, 3, 1}, {3, 6, 9});
  auto [out, lse] = attend(q, k, v, absent(), attnAttrs(1, 1, 1.0, true));
  EXPECT_NEAR(out.at(0), 6, 1e-14);
  EXPECT_NEAR(lse.at(0), std::log(3.0), 1e-14);
}

TEST(CpuAttention, GroupedHeadsReadTheirKvHead) {
  // H = 2, Hkv = 1, dh = 1: both query heads read the single K/V head, so
  // with zero queries each averages v.
  Tensor q = Tensor::of<double>({1, 1, 2}, {0, 0});
  Tensor k = Tensor::of<double>({1, 2, 1}, {5, -5});
  Tensor v = Tensor::of<double>({1, 2, 1}, {1, 3});
  auto [out, lse] = attend(q, k, v, absent(), attnAttrs(2, 1, 1.0, false));
  expectValues(out, {2, 2}, 1e-15, "out");
  // H = 2, Hkv = 2: head 1 reads K/V head 1.
  Tensor k2 = Tensor::of<double>({1, 2, 2}, {0, 0, 0, 0});
  Tensor v2 = Tensor::of<double>({1, 2, 2}, {1, 10, 3, 30});
  auto [out2, lse2] = attend(q, k2, v2, absent(), attnAttrs(2, 2, 1.0, false));
  expectValues(out2, {2, 20}, 1e-15, "out");
}

TEST(CpuAttention, KvCacheDecodingMatchesFullCausalAttention) {
  const int64_t batch = 2, seq = 5, heads = 2, kvHeads = 1, dh = 3, maxLen = 8;
  Tensor q = randomTensor(DType::F64, {batch, seq, heads * dh}, 1);
  Tensor k = randomTensor(DType::F64, {batch, seq, kvHeads * dh}, 2);
  Tensor v = randomTensor(DType::F64, {batch, seq, kvHeads * dh}, 3);
  Json attrs = attnAttrs(heads, kvHeads, 0.6, true);
  auto [full, fullLse] = attend(q, k, v, absent(), attrs);

  Tensor kCache = zeros(DType::F64, {batch, maxLen, kvHeads * dh});
  Tensor vCache = like(kCache);
  // Prefill positions 0..2, then decode 3..4 in one call, then nothing.
  for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, 3}, {3, 5}}) {
    Tensor past = scalarI64(begin);
    // The plan writes in place: the result aliases the cache.
    runKernel("moe.kv_cache_write", {kCache, sliceSeq(k, begin, end), past},
              {kCache});
    runKernel("moe.kv_cache_write", {vCache, sliceSeq(v, begin, end), past},
              {vCache});
    auto [out, lse] =
        attend(sliceSeq(q, begin, end), kCache, vCache, past, attrs);
    expectClose(out, sliceSeq(full, begin, end), 1e-14, "decoded rows");
  }
  // Writing past max_len is an error.
  EXPECT_THROW(runKernel("moe.kv_cache_write",
                         {kCache, sliceSeq(k, 0, 2), scalarI64(7)}, {kCache}),
               Error);
  // So is a past that leaves no room for the queries in k.
  EXPECT_THROW(attend(sliceSeq(q, 0, 2), kCache, vCache, scalarI64(7), attrs),
               Error);
}

TEST(CpuAttention, KeyMaskEqualsAttendingToTheUnmaskedKeysOnly) {
  // Batch 0 masks its keys 1 and 3 (padding in the middle and at the end),
  // batch 1 masks nothing: each must equal attention over its kept keys.
  const int64_t sq = 3, sk = 4, heads = 2, dh = 2;
  Tensor q = randomTensor(DType::F64, {2, sq, heads * dh}, 1);
  Tensor k = randomTensor(DType::F64, {2, sk, dh}, 2);
  Tensor v = randomTensor(DType::F64, {2, sk, dh}, 3);
  Tensor mask = Tensor::of<int32_t>({2, sk}, {1, 0, 1, 0, 1, 1, 1, 1});
  Json attrs = attnAttrs(heads, 1, 0.7, false);
  int64_t h = heads;
  std::vector<Tensor> masked = runKernel(
      "moe.attention", {q, k, v, absent(), mask},
      {like(q), zeros(DType::F64, {2, h, sq})}, attrs);
  auto batchSlice = [](const Tensor &t, int64_t b) {
    Shape shape = t.shape();
    shape[0] = 1;
    Tensor out(t.dtype(), shape);
    size_t bytes = out.nbytes();
    std::memcpy(out.raw(), static_cast<const char *>(t.raw()) + b * bytes,
                bytes);
    return out;
  };
  // Batch 0 over keys {0, 2}.
  Tensor k0 = Tensor::of<double>({1, 2, dh}, {k.at(0), k.at(1), k.at(4), k.at(5)});
  Tensor v0 = Tensor::of<double>({1, 2, dh}, {v.at(0), v.at(1), v.at(4), v.at(5)});
  auto [out0, lse0] = attend(batchSlice(q, 0), k0, v0, absent(), attrs);
  expectClose(batchSlice(masked[0], 0), out0, 1e-14, "batch 0 out");
  expectClose(batchSlice(masked[1], 0), lse0, 1e-14, "batch 0 lse");
  auto [out1, lse1] = attend(batchSlice(q, 1), batchSlice(k, 1),
                             batchSlice(v, 1), absent(), attrs);
  expectClose(batchSlice(masked[0], 1), out1, 1e-14, "batch 1 out");

  // A query whose every key is masked outputs 0 with lse -inf.
  Tensor none = Tensor::of<int32_t>({2, sk}, {0, 0, 0, 0, 1, 1, 1, 1});
  std::vector<Tensor> empty = runKernel(
      "moe.attention", {q, k, v, absent(), none},
      {like(q), zeros(DType::F64, {2, h, sq})}, attrs);
  for (int64_t i = 0; i < sq * heads * dh; ++i)
    EXPECT_EQ(empty[0].at(i), 0.0);
  EXPECT_TRUE(std::isinf(empty[1].at(0)) && empty[1].at(0) < 0);
  // A mask of the wrong shape is refused.
  EXPECT_THROW(runKernel("moe.attention",
                         {q, k, v, absent(), Tensor::of<int32_t>({2, 1}, {1, 1})},
                         {like(q), zeros(DType::F64, {2, h, sq})}, attrs),
               Error);
}

/// An attention problem: sizes, scale, inputs and a key mask (1 keeps).
struct AttentionCase {
  int64_t batch, sq, sk, heads, kvHeads, dh;
  double scale;
  std::vector<double> q, k, v, dout, mask;
};

struct AttentionResult {
  std::vector<double> out, lse, dq, dk, dv;
};

/// Attention and its gradient by the definition, one (batch, head, query)
/// at a time in double: the reference for the blocked kernels. Causal, with
/// the queries aligned to the last keys.
AttentionResult naiveAttention(const AttentionCase &c) {
  AttentionResult r{std::vector<double>(c.q.size(), 0),
                    std::vector<double>(c.batch * c.heads * c.sq, -INFINITY),
                    std::vector<double>(c.q.size(), 0),
                    std::vector<double>(c.k.size(), 0),
                    std::vector<double>(c.v.size(), 0)};
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t i = 0; i < c.sq; ++i) {
        const int64_t g = h / (c.heads / c.kvHeads), n = i + c.sk - c.sq + 1;
        auto qAt = [&](int64_t col) {
          return ((b * c.sq + i) * c.heads + h) * c.dh + col;
        };
        auto kvAt = [&](int64_t j, int64_t col) {
          return ((b * c.sk + j) * c.kvHeads + g) * c.dh + col;
        };
        std::vector<double> p(n, -INFINITY);
        double m = -INFINITY;
        for (int64_t j = 0; j < n; ++j) {
          if (c.mask[b * c.sk + j] == 0)
            continue;
          p[j] = 0;
          for (int64_t col = 0; col < c.dh; ++col)
            p[j] += c.scale * c.q[qAt(col)] * c.k[kvAt(j, col)];
          m = std::max(m, p[j]);
        }
        if (m == -INFINITY)
          continue;
        double sum = 0;
        for (double &x : p)
          sum += (x = std::exp(x - m));
        for (double &x : p)
          x /= sum;
        r.lse[(b * c.heads + h) * c.sq + i] = m + std::log(sum);
        std::vector<double> dp(n, 0);
        double rowD = 0;
        for (int64_t j = 0; j < n; ++j)
          for (int64_t col = 0; col < c.dh; ++col) {
            r.out[qAt(col)] += p[j] * c.v[kvAt(j, col)];
            dp[j] += c.dout[qAt(col)] * c.v[kvAt(j, col)];
          }
        for (int64_t j = 0; j < n; ++j)
          rowD += p[j] * dp[j];
        for (int64_t j = 0; j < n; ++j) {
          double ds = p[j] * (dp[j] - rowD);
          for (int64_t col = 0; col < c.dh; ++col) {
            r.dq[qAt(col)] += c.scale * ds * c.k[kvAt(j, col)];
            r.dk[kvAt(j, col)] += c.scale * ds * c.q[qAt(col)];
            r.dv[kvAt(j, col)] += p[j] * c.dout[qAt(col)];
          }
        }
      }
  return r;
}

void expectNear(const Tensor &actual, const std::vector<double> &expected,
                double tol, const std::string &what) {
  std::vector<double> got = values(actual);
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::isinf(expected[i]))
      EXPECT_EQ(got[i], expected[i]) << what << " #" << i;
    else
      EXPECT_NEAR(got[i], expected[i], tol) << what << " #" << i;
}

TEST(CpuAttention, BlockedF32KernelsMatchTheDefinition) {
  // 150 queries span three query blocks; 170 keys make the causal window
  // start at 21; grouped heads and a key mask that empties the first
  // queries' windows in batch 1.
  const int64_t batch = 2, sq = 150, sk = 170, heads = 4, kvHeads = 2, dh = 16;
  Tensor q = randomTensor(DType::F32, {batch, sq, heads * dh}, 11);
  Tensor k = randomTensor(DType::F32, {batch, sk, kvHeads * dh}, 12);
  Tensor v = randomTensor(DType::F32, {batch, sk, kvHeads * dh}, 13);
  Tensor dout = randomTensor(DType::F32, {batch, sq, heads * dh}, 14);
  std::vector<int32_t> maskValues(batch * sk, 1);
  for (int64_t j = 0; j < 30; ++j)
    maskValues[sk + j] = 0;
  maskValues[77] = maskValues[sk + 100] = 0;
  Tensor mask = Tensor::of<int32_t>({batch, sk}, maskValues);
  Json attrs = attnAttrs(heads, kvHeads, 0.25, true);

  AttentionResult ref = naiveAttention(
      {batch, sq, sk, heads, kvHeads, dh, 0.25, values(q), values(k),
       values(v), values(dout),
       std::vector<double>(maskValues.begin(), maskValues.end())});
  std::vector<Tensor> fwd =
      runKernel("moe.attention", {q, k, v, absent(), mask},
                {like(q), zeros(DType::F32, {batch, heads, sq})}, attrs);
  expectNear(fwd[0], ref.out, 2e-6, "out");
  expectNear(fwd[1], ref.lse, 2e-6, "lse");
  std::vector<Tensor> grads =
      runKernel("moe.attention_grad", {q, k, v, fwd[0], fwd[1], dout, mask},
                {like(q), like(k), like(v)}, attrs);
  expectNear(grads[0], ref.dq, 2e-6, "dq");
  expectNear(grads[1], ref.dk, 2e-6, "dk");
  expectNear(grads[2], ref.dv, 2e-6, "dv");
}

TEST(CpuAttention, KvCacheWriteCopiesWhenNotAliased) {
  Tensor cache = Tensor::of<float>({1, 3, 1}, {1, 2, 3});
  Tensor update = Tensor::of<float>({1, 1, 1}, {9});
  Tensor result = runKernel1("moe.kv_cache_write",
                             {cache, update, scalarI64(1)}, like(cache));
  expectValues(result, {1, 9, 3}, 0, "result");
  expectValues(cache, {1, 2, 3}, 0, "cache untouched");
}

TEST(CpuAttention, RejectsInconsistentHeads) {
  Tensor q = zeros(DType::F32, {1, 2, 6});
  Tensor k = zeros(DType::F32, {1, 2, 4});
  EXPECT_THROW(attend(q, k, k, absent(), attnAttrs(3, 2, 1.0, false)), Error);
  EXPECT_THROW(attend(q, k, k, absent(), attnAttrs(2, 1, 1.0, false)), Error);
}

} // namespace
