//===- Attention.cpp - grouped-query attention and the KV cache -----------===//
//
// Two-pass softmax per (batch, head, query) with scores, sums and outputs in
// double. Causality and the cache limit make the keys a query may see a
// prefix 0..n-1 of the keys; the key mask (padding) then removes keys from
// that prefix.
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <limits>
#include <tuple>

namespace moec::cpu {

namespace {

struct AttnDims {
  int64_t batch, sq, sk, heads, kvHeads, dh;
  double scale;
  bool causal;
  bool hasPast;
  int64_t past;
  /// key_mask [B, Sk] (nonzero: a real key), or null.
  const int32_t *keyMask = nullptr;

  /// Whether key j of batch b survives the key mask.
  bool keyKept(int64_t b, int64_t j) const {
    return !keyMask || keyMask[b * sk + j] != 0;
  }

  /// Query head h reads K/V head h / (H / Hkv).
  int64_t kvHead(int64_t h) const { return h / (heads / kvHeads); }

  /// How many keys query i sees; they are keys 0..n-1.
  int64_t visible(int64_t i) const {
    int64_t limit = hasPast ? past + sq : sk;
    if (causal)
      limit = std::min(limit, i + (hasPast ? past : sk - sq) + 1);
    return std::max<int64_t>(limit, 0);
  }
};

template <typename T>
AttnDims attnDims(const KernelContext &ctx, const TensorView &q,
                  const TensorView &k, const TensorView &v,
                  const TensorView &past, const TensorView &keyMask) {
  using Named = std::pair<const TensorView *, const char *>;
  for (Named operand : {Named{&q, "q"}, Named{&k, "k"}, Named{&v, "v"}}) {
    expectDType(ctx, *operand.first, dtypeOf<T>(), operand.second);
    expectRank(ctx, *operand.first, 3, operand.second);
  }
  AttnDims dims;
  // moe.attention and moe.attention_grad name their attributes alike.
  namespace attention = defs::ops::attention;
  dims.heads = ctx.attrs.getInt(attention::kNumHeads);
  dims.kvHeads = ctx.attrs.getInt(attention::kNumKvHeads);
  dims.scale = ctx.attrs.getFloat(attention::kScale);
  dims.causal = ctx.attrs.getFlag(attention::kCausal);
  if (dims.heads <= 0 || dims.kvHeads <= 0 || dims.heads % dims.kvHeads != 0)
    ctx.fail(fmt::format("num_heads = {} must be a positive multiple of "
                         "num_kv_heads = {}",
                         dims.heads, dims.kvHeads));
  if (q.dim(2) % dims.heads != 0)
    ctx.fail(fmt::format("q {} does not split into num_heads = {} heads",
                         shapeString(q.shape), dims.heads));
  dims.batch = q.dim(0);
  dims.sq = q.dim(1);
  dims.sk = k.dim(1);
  dims.dh = q.dim(2) / dims.heads;
  expectShape(ctx, k, {dims.batch, dims.sk, dims.kvHeads * dims.dh}, "k");
  expectShape(ctx, v, k.shape, "v");
  if (keyMask.present()) {
    expectDType(ctx, keyMask, DType::I32, "key_mask");
    expectShape(ctx, keyMask, {dims.batch, dims.sk}, "key_mask");
    dims.keyMask = keyMask.as<int32_t>();
  }
  dims.hasPast = past.present();
  dims.past = 0;
  if (dims.hasPast) {
    dims.past = scalarInt(ctx, past, "past");
    if (dims.past < 0 || dims.past + dims.sq > dims.sk)
      ctx.fail(fmt::format("past = {} with {} new queries needs keys [0, {}), "
                           "but k holds {} positions",
                           dims.past, dims.sq, dims.past + dims.sq, dims.sk));
  }
  return dims;
}

template <typename T> double dot(const T *a, const T *b, int64_t n) {
  double s = 0;
  for (int64_t c = 0; c < n; ++c)
    s += static_cast<double>(a[c]) * b[c];
  return s;
}

/// K/V head g of batch b, transposed to [dh, Sk] in double: scores against
/// all keys then loop over keys innermost (vectorisable), while each score
/// still sums over c in ascending order.
template <typename T>
void transposeHead(const T *src, int64_t b, int64_t g, const AttnDims &dims,
                   std::vector<double> &dst) {
  int64_t sk = dims.sk, dh = dims.dh;
  dst.resize(dh * sk);
  for (int64_t j = 0; j < sk; ++j) {
    const T *row = src + ((b * sk + j) * dims.kvHeads + g) * dh;
    for (int64_t c = 0; c < dh; ++c)
      dst[c * sk + j] = row[c];
  }
}

/// s[j] = scale * <x, kt[:, j]> for j < n.
template <typename T>
void rowScores(const T *x, const std::vector<double> &kt, const AttnDims &dims,
               int64_t n, double scale, double *s) {
  std::fill(s, s + n, 0.0);
  for (int64_t c = 0; c < dims.dh; ++c) {
    double xc = x[c];
    const double *kc = kt.data() + c * dims.sk;
    for (int64_t j = 0; j < n; ++j)
      s[j] += xc * kc[j];
  }
  for (int64_t j = 0; j < n; ++j)
    s[j] *= scale;
}

constexpr double kNoScore = -std::numeric_limits<double>::infinity();

/// Sets the scores of masked keys among the first n of batch b to -inf;
/// returns the largest remaining score (-inf when none is left).
double maskScores(const AttnDims &dims, int64_t b, int64_t n, double *s) {
  double m = kNoScore;
  for (int64_t j = 0; j < n; ++j) {
    if (!dims.keyKept(b, j))
      s[j] = kNoScore;
    m = std::max(m, s[j]);
  }
  return m;
}

template <typename T> void attention(KernelContext &ctx) {
  const TensorView &q = requireInput(ctx, 0, "q");
  const TensorView &k = requireInput(ctx, 1, "k");
  const TensorView &v = requireInput(ctx, 2, "v");
  AttnDims dims = attnDims<T>(ctx, q, k, v, ctx.in(3), ctx.in(4));
  const TensorView &out = ctx.out(0), &lse = ctx.out(1);
  if (out.present()) {
    expectDType(ctx, out, dtypeOf<T>(), "the result");
    expectShape(ctx, out, q.shape, "the result");
  }
  if (lse.present()) {
    expectDType(ctx, lse, dtypeOf<T>(), "lse");
    expectShape(ctx, lse, {dims.batch, dims.heads, dims.sq}, "lse");
  }
  const T *qp = q.as<T>(), *kp = k.as<T>(), *vp = v.as<T>();
  T *op = out.as<T>(), *lp = lse.as<T>();
  int64_t H = dims.heads, Hkv = dims.kvHeads, dh = dims.dh;
  parallelFor(dims.batch * H, 4 * dims.sq * dims.sk * dh, [&](int64_t bh) {
    int64_t b = bh / H, h = bh % H, g = dims.kvHead(h);
    std::vector<double> s(dims.sk), acc(dh), kt;
    transposeHead(kp, b, g, dims, kt);
    for (int64_t i = 0; i < dims.sq; ++i) {
      int64_t n = dims.visible(i);
      int64_t qRow = ((b * dims.sq + i) * H + h) * dh;
      double logSum = kNoScore;
      std::fill(acc.begin(), acc.end(), 0.0);
      rowScores(qp + qRow, kt, dims, n, dims.scale, s.data());
      double m = maskScores(dims, b, n, s.data());
      if (m != kNoScore) {
        double sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          if (s[j] == kNoScore)
            continue;
          double e = std::exp(s[j] - m);
          sum += e;
          const T *vj = vp + ((b * dims.sk + j) * Hkv + g) * dh;
          for (int64_t c = 0; c < dh; ++c)
            acc[c] += e * vj[c];
        }
        for (int64_t c = 0; c < dh; ++c)
          acc[c] /= sum;
        logSum = m + std::log(sum);
      }
      // A query that sees no key (causal with Sk < Sq, or every key
      // masked) outputs 0, lse -inf.
      if (op)
        for (int64_t c = 0; c < dh; ++c)
          op[qRow + c] = static_cast<T>(acc[c]);
      if (lp)
        lp[(b * H + h) * dims.sq + i] = static_cast<T>(logSum);
    }
  });
}

template <typename T> void attentionGrad(KernelContext &ctx) {
  const TensorView &q = requireInput(ctx, 0, "q");
  const TensorView &k = requireInput(ctx, 1, "k");
  const TensorView &v = requireInput(ctx, 2, "v");
  const TensorView &out = requireInput(ctx, 3, "out");
  const TensorView &lse = requireInput(ctx, 4, "lse");
  const TensorView &dout = requireInput(ctx, 5, "dout");
  AttnDims dims =
      attnDims<T>(ctx, q, k, v, KernelContext::absent(), ctx.in(6));
  expectDType(ctx, out, dtypeOf<T>(), "out");
  expectShape(ctx, out, q.shape, "out");
  expectDType(ctx, dout, dtypeOf<T>(), "dout");
  expectShape(ctx, dout, q.shape, "dout");
  expectDType(ctx, lse, dtypeOf<T>(), "lse");
  expectShape(ctx, lse, {dims.batch, dims.heads, dims.sq}, "lse");
  const TensorView &dq = ctx.out(0), &dk = ctx.out(1), &dv = ctx.out(2);
  using Grad = std::tuple<const TensorView *, const TensorView *, const char *>;
  for (auto [grad, like, name] :
       {Grad{&dq, &q, "dq"}, Grad{&dk, &k, "dk"}, Grad{&dv, &v, "dv"}}) {
    if (!grad->present())
      continue;
    expectDType(ctx, *grad, dtypeOf<T>(), name);
    expectShape(ctx, *grad, like->shape, name);
  }

  const T *qp = q.as<T>(), *kp = k.as<T>(), *vp = v.as<T>();
  const T *op = out.as<T>(), *lp = lse.as<T>(), *gp = dout.as<T>();
  int64_t H = dims.heads, Hkv = dims.kvHeads, dh = dims.dh, sk = dims.sk;
  int64_t group = H / Hkv;
  // One iteration per (batch, K/V head): it owns dk and dv of that head and
  // dq of the query heads reading it, so every sum has a fixed order.
  parallelFor(dims.batch * Hkv, 8 * group * dims.sq * sk * dh, [&](int64_t bg) {
    int64_t b = bg / Hkv, g = bg % Hkv;
    std::vector<double> dkAcc(sk * dh, 0.0), dvAcc(sk * dh, 0.0), dqAcc(dh);
    std::vector<double> kt, vt, p(sk), dp(sk);
    transposeHead(kp, b, g, dims, kt);
    transposeHead(vp, b, g, dims, vt);
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      for (int64_t i = 0; i < dims.sq; ++i) {
        int64_t n = dims.visible(i);
        int64_t qRow = ((b * dims.sq + i) * H + h) * dh;
        std::fill(dqAcc.begin(), dqAcc.end(), 0.0);
        double l = lp[(b * H + h) * dims.sq + i];
        double rowD = dot(gp + qRow, op + qRow, dh);
        rowScores(qp + qRow, kt, dims, n, dims.scale, p.data());
        rowScores(gp + qRow, vt, dims, n, 1.0, dp.data());
        for (int64_t j = 0; j < n; ++j) {
          if (!dims.keyKept(b, j))
            continue;
          int64_t kvRow = ((b * sk + j) * Hkv + g) * dh;
          double pj = std::exp(p[j] - l);
          double ds = pj * (dp[j] - rowD);
          for (int64_t c = 0; c < dh; ++c) {
            dqAcc[c] += ds * kp[kvRow + c];
            dkAcc[j * dh + c] += dims.scale * ds * qp[qRow + c];
            dvAcc[j * dh + c] += pj * gp[qRow + c];
          }
        }
        if (dq.present())
          for (int64_t c = 0; c < dh; ++c)
            dq.as<T>()[qRow + c] = static_cast<T>(dims.scale * dqAcc[c]);
      }
    }
    for (int64_t j = 0; j < sk; ++j) {
      int64_t kvRow = ((b * sk + j) * Hkv + g) * dh;
      for (int64_t c = 0; c < dh; ++c) {
        if (dk.present())
          dk.as<T>()[kvRow + c] = static_cast<T>(dkAcc[j * dh + c]);
        if (dv.present())
          dv.as<T>()[kvRow + c] = static_cast<T>(dvAcc[j * dh + c]);
      }
    }
  });
}

template <typename T> void kvCacheWrite(KernelContext &ctx) {
  const TensorView &cache = requireInput(ctx, 0, "cache");
  const TensorView &update = requireInput(ctx, 1, "update");
  const TensorView &result = ctx.out(0);
  expectRank(ctx, cache, 3, "cache");
  expectRank(ctx, update, 3, "update");
  expectDType(ctx, update, dtypeOf<T>(), "update");
  int64_t batch = cache.dim(0), maxLen = cache.dim(1), w = cache.dim(2);
  int64_t seq = update.dim(1);
  expectShape(ctx, update, {batch, seq, w}, "update");
  int64_t past = scalarInt(ctx, ctx.in(2), "past");
  if (past < 0 || past + seq > maxLen)
    ctx.fail(fmt::format("writing positions [{}, {}) overflows the cache of "
                         "max_len {} (past = {}, S = {})",
                         past, past + seq, maxLen, past, seq));
  if (!result.present())
    return;
  expectDType(ctx, result, dtypeOf<T>(), "the result");
  expectShape(ctx, result, cache.shape, "the result");
  T *dst = result.as<T>();
  // The plan aliases result with cache; otherwise copy the old cache first.
  if (result.data != cache.data)
    std::memcpy(dst, cache.data, cache.nbytes());
  const T *src = update.as<T>();
  parallelFor(batch * seq, w, [&](int64_t bs) {
    int64_t b = bs / seq, s = bs % seq;
    std::memcpy(dst + (b * maxLen + past + s) * w, src + bs * w, w * sizeof(T));
  });
}

} // namespace

void attentionKernel(KernelContext &ctx) {
  checkArity(ctx, 3, 5, 1, 2);
  dispatchFloat(ctx, requireInput(ctx, 0, "q"), "q",
                [&](auto tag) { attention<decltype(tag)>(ctx); });
}

void attentionGradKernel(KernelContext &ctx) {
  checkArity(ctx, 6, 7, 3, 3);
  dispatchFloat(ctx, requireInput(ctx, 0, "q"), "q",
                [&](auto tag) { attentionGrad<decltype(tag)>(ctx); });
}

void kvCacheWriteKernel(KernelContext &ctx) {
  checkArity(ctx, 3, 3, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "cache"), "cache",
                [&](auto tag) { kvCacheWrite<decltype(tag)>(ctx); });
}

} // namespace moec::cpu
