//===- Attention.cpp - grouped-query attention and the KV cache -----------===//
//
// Blocked attention per (batch, head): a block of queries is scored against
// every key it may see with one BLAS call, softmaxed in place (fast exp,
// sums in double) and multiplied by V with a second call; the backward does
// the same per block with five calls. Causality and the cache limit make the
// keys a query may see a prefix 0..n-1 of the keys; the key mask (padding)
// then removes keys from that prefix. Each (batch, head) or (batch, K/V
// head) is one task with a fixed order of operations, so the thread count
// never changes a result.
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "FastMath.h"
#include "Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <limits>
#include <optional>
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

constexpr double kNoScore = -std::numeric_limits<double>::infinity();

/// Queries per block: the block's scores (rows x visible keys) stay within
/// about 4 MiB of scratch, and at most 64 rows.
int64_t queryBlock(const AttnDims &dims) {
  return std::clamp<int64_t>((int64_t(1) << 20) / std::max<int64_t>(dims.sk, 1),
                             1, 64);
}

/// Row-major views of one head: row i of Q (or dO, O) and row j of K (or V).
struct HeadViews {
  int64_t qStride, kvStride;
  int64_t qRow(const AttnDims &d, int64_t b, int64_t h, int64_t i) const {
    return ((b * d.sq + i) * d.heads + h) * d.dh;
  }
  int64_t kvRow(const AttnDims &d, int64_t b, int64_t g, int64_t j) const {
    return ((b * d.sk + j) * d.kvHeads + g) * d.dh;
  }
};

HeadViews headViews(const AttnDims &dims) {
  return {dims.heads * dims.dh, dims.kvHeads * dims.dh};
}

/// The largest of s[0..n) (NaNs skipped), -inf for none. A maximum does not
/// depend on order, so eight running maxima give the one-chain loop's value
/// without waiting on each comparison.
template <typename T> double rowMax(const T *s, int64_t n) {
  constexpr int64_t kLanes = 8;
  T acc[kLanes];
  std::fill(acc, acc + kLanes, static_cast<T>(kNoScore));
  int64_t full = n - n % kLanes;
  for (int64_t j = 0; j < full; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l)
      acc[l] = std::max(acc[l], s[j + l]);
  for (int64_t j = full; j < n; ++j)
    acc[j - full] = std::max(acc[j - full], s[j]);
  return *std::max_element(acc, acc + kLanes);
}

/// Turns row `s` (the first `n` of `width` scores of a query of batch b)
/// into softmax weights exp(s - shift), zero for masked and invisible keys.
/// With `shift` unset it is the row's maximum; returns that shift, or -inf
/// when the query sees no key (then the row is all zero).
template <typename T>
double softmaxWeights(const AttnDims &dims, int64_t b, T *s, int64_t n,
                      int64_t width, std::optional<double> shift) {
  double m = kNoScore;
  if (dims.keyMask) {
    for (int64_t j = 0; j < n; ++j) {
      if (!dims.keyKept(b, j))
        s[j] = static_cast<T>(kNoScore);
      m = std::max(m, static_cast<double>(s[j]));
    }
  } else if (!shift) {
    m = rowMax(s, n);
  }
  if (shift)
    m = *shift;
  if (m == kNoScore) {
    std::fill(s, s + width, T(0));
    return m;
  }
  expShiftedInPlace(s, n, static_cast<T>(m));
  std::fill(s + n, s + width, T(0));
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
  if (!out.present() && !lse.present())
    return;
  const T *qp = q.as<T>(), *kp = k.as<T>(), *vp = v.as<T>();
  T *lp = lse.as<T>();
  const int64_t H = dims.heads, dh = dims.dh, block = queryBlock(dims);
  const HeadViews hv = headViews(dims);
  parallelFor(dims.batch * H, 4 * dims.sq * dims.sk * dh, [&](int64_t bh) {
    const int64_t b = bh / H, h = bh % H, g = dims.kvHead(h);
    Scratch scratch;
    T *s = scratch.get<T>(block * dims.sk);
    // Without an output tensor (lse alone) the products go to scratch.
    T *oScratch = out.present() ? nullptr : scratch.get<T>(block * dh);
    const int64_t oStride = out.present() ? hv.qStride : dh;
    std::vector<double> inverse(block);
    for (int64_t i0 = 0; i0 < dims.sq; i0 += block) {
      const int64_t rows = std::min(block, dims.sq - i0);
      const int64_t width = dims.visible(i0 + rows - 1);
      T *oBlock = out.present() ? out.as<T>() + hv.qRow(dims, b, h, i0)
                                : oScratch;
      if (width == 0) {
        for (int64_t r = 0; r < rows; ++r) {
          std::fill(oBlock + r * oStride, oBlock + r * oStride + dh, T(0));
          if (lp)
            lp[(b * H + h) * dims.sq + i0 + r] = static_cast<T>(kNoScore);
        }
        continue;
      }
      gemmSerial<T>(false, true, rows, width, dh, static_cast<T>(dims.scale),
                    qp + hv.qRow(dims, b, h, i0), hv.qStride,
                    kp + hv.kvRow(dims, b, g, 0), hv.kvStride, T(0), s, width);
      for (int64_t r = 0; r < rows; ++r) {
        T *row = s + r * width;
        const int64_t n = dims.visible(i0 + r);
        double m = softmaxWeights(dims, b, row, n, width, std::nullopt);
        double sum = laneSum(n, [&](int64_t j) -> double { return row[j]; });
        // A query that sees no key (causal with Sk < Sq, or every key
        // masked) outputs 0, lse -inf.
        inverse[r] = m == kNoScore ? 0.0 : 1.0 / sum;
        if (lp)
          lp[(b * H + h) * dims.sq + i0 + r] =
              static_cast<T>(m == kNoScore ? kNoScore : m + std::log(sum));
      }
      gemmSerial<T>(false, false, rows, dh, width, T(1), s, width,
                    vp + hv.kvRow(dims, b, g, 0), hv.kvStride, T(0), oBlock,
                    oStride);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < dh; ++c)
          oBlock[r * oStride + c] =
              static_cast<T>(oBlock[r * oStride + c] * inverse[r]);
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
  const int64_t H = dims.heads, Hkv = dims.kvHeads, dh = dims.dh;
  const int64_t sk = dims.sk, group = H / Hkv, block = queryBlock(dims);
  const HeadViews hv = headViews(dims);
  const T scale = static_cast<T>(dims.scale);
  // One task per (batch, K/V head): it owns dk and dv of that head and dq
  // of the query heads reading it, so every sum has a fixed order.
  parallelFor(dims.batch * Hkv, 8 * group * dims.sq * sk * dh, [&](int64_t bg) {
    const int64_t b = bg / Hkv, g = bg % Hkv;
    Scratch scratch;
    T *p = scratch.get<T>(block * sk), *ds = scratch.get<T>(block * sk);
    T *dkAcc = scratch.get<T>(sk * dh), *dvAcc = scratch.get<T>(sk * dh);
    T *dqScratch = dq.present() ? nullptr : scratch.get<T>(block * dh);
    std::fill(dkAcc, dkAcc + sk * dh, T(0));
    std::fill(dvAcc, dvAcc + sk * dh, T(0));
    const T *kHead = kp + hv.kvRow(dims, b, g, 0);
    const T *vHead = vp + hv.kvRow(dims, b, g, 0);
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      for (int64_t i0 = 0; i0 < dims.sq; i0 += block) {
        const int64_t rows = std::min(block, dims.sq - i0);
        const int64_t width = dims.visible(i0 + rows - 1);
        const int64_t row0 = hv.qRow(dims, b, h, i0);
        T *dqBlock = dq.present() ? dq.as<T>() + row0 : dqScratch;
        const int64_t dqStride = dq.present() ? hv.qStride : dh;
        if (width == 0) {
          for (int64_t r = 0; r < rows; ++r)
            std::fill(dqBlock + r * dqStride, dqBlock + r * dqStride + dh,
                      T(0));
          continue;
        }
        // p = softmax weights recomputed from lse; ds = dL/dscores.
        gemmSerial<T>(false, true, rows, width, dh, scale, qp + row0,
                      hv.qStride, kHead, hv.kvStride, T(0), p, width);
        gemmSerial<T>(false, true, rows, width, dh, T(1), gp + row0,
                      hv.qStride, vHead, hv.kvStride, T(0), ds, width);
        for (int64_t r = 0; r < rows; ++r) {
          T *pRow = p + r * width, *dsRow = ds + r * width;
          const int64_t n = dims.visible(i0 + r);
          const int64_t at = row0 + r * hv.qStride;
          double l = lp[(b * H + h) * dims.sq + i0 + r];
          softmaxWeights(dims, b, pRow, n, width, l);
          const double rowD = dot(gp + at, op + at, dh);
          for (int64_t j = 0; j < width; ++j)
            dsRow[j] = static_cast<T>(pRow[j] * (dsRow[j] - rowD));
        }
        gemmSerial<T>(false, false, rows, dh, width, scale, ds, width, kHead,
                      hv.kvStride, T(0), dqBlock, dqStride);
        gemmSerial<T>(true, false, width, dh, rows, scale, ds, width,
                      qp + row0, hv.qStride, T(1), dkAcc, dh);
        gemmSerial<T>(true, false, width, dh, rows, T(1), p, width, gp + row0,
                      hv.qStride, T(1), dvAcc, dh);
      }
    }
    for (int64_t j = 0; j < sk; ++j) {
      const int64_t row = hv.kvRow(dims, b, g, j);
      if (dk.present())
        std::copy(dkAcc + j * dh, dkAcc + (j + 1) * dh, dk.as<T>() + row);
      if (dv.present())
        std::copy(dvAcc + j * dh, dvAcc + (j + 1) * dh, dv.as<T>() + row);
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
