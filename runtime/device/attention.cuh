//===- attention.cuh - scaled dot-product attention ------------*- CUDA -*-===//
//
// Flash-style attention on CUDA cores: K and V are staged tile by tile in
// shared memory, each warp owns QPW queries and keeps their running max,
// normaliser and output in registers (online softmax), and the log-sum-exp
// is saved for the backward pass. The backward recomputes probabilities
// from it: dq in one kernel (per query tile, over keys) and dk, dv in
// another (per key tile, over the queries and query heads that see it), so
// every gradient is one thread's ordered sum: no atomics. These kernels
// compute in fp32 on CUDA cores whatever the storage type; the forward of
// a bf16 model with a head dim that is a multiple of 16 up to 128 (or of 32
// up to 256), and its dq up to 128, run on the tensor cores instead
// (attention_mma.cuh), delta and dk/dv here. A staged tile whose
// rows the lanes of a warp read side by side (lane = key or query) keeps
// rows an odd number of floats apart (kStagedRow), so that the 32 lanes
// read 32 different banks, not one bank 32 times as rows of HD = 32k
// floats would; a tile whose rows a warp reads one at a time (the same
// row for every lane: a broadcast) stays unpadded, so that its rows are
// 16-byte aligned and read four floats a load (broadcastDots). A thread's
// per-query (or per-key) accumulators stay in registers: loops over a
// lane's columns (j) are unrolled, and the main loop over a warp's queries
// or keys (r) stays rolled, so its body is compiled once, and reaches row
// r through a select chain (pickRow, putRow); indexing the arrays at run
// time would put them in local memory (ptxas's stack frame), unrolling the
// loop would cost compile time.
//
// Layouts: q, out [B, Sq, H*HD]; k, v [B, L, Hkv*HD] (L = rows per batch:
// Sk, or the cache length); lse, delta [B, H, Sq]. Query head h reads K/V
// head h / (H / Hkv). Key j is visible to query i when j < kvLen, if
// causal j <= i + offset, and with a key mask ([B, rowsPerBatch] i32) when
// keyMask[b, j] != 0.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_ATTENTION_CUH
#define MOEC_DEVICE_ATTENTION_CUH

namespace moec {

struct AttentionShape {
  int64_t batch, sq, rowsPerBatch, kvLen, offset;
  int heads, kvHeads;
  float scale;
  bool causal;
  /// Null, or [B, rowsPerBatch] with 0 at padding keys.
  gptr<const int32_t> keyMask;
};

MOEC_DEVICE bool visible(const AttentionShape &s, int64_t b, int64_t i,
                         int64_t j) {
  return j < s.kvLen && (!s.causal || j <= i + s.offset) &&
         (!s.keyMask || s.keyMask[b * s.rowsPerBatch + j] != 0);
}

/// The distance, in floats, between the rows of a staged tile: odd, so that
/// column d of 32 consecutive rows lies in 32 different banks.
template <int HD> constexpr int kStagedRow = HD % 2 ? HD : HD + 1;

/// Element r of a thread's per-query registers where r is known only at run
/// time: an unrolled select chain keeps the array in registers (indexing it
/// would move it to local memory), so the loop over a warp's queries can
/// stay rolled and its body be compiled once, not once per query.
template <int N> MOEC_DEVICE float pickRow(const float (&rows)[N], int r) {
  float value = rows[0];
#pragma unroll
  for (int i = 1; i < N; ++i)
    value = i == r ? rows[i] : value;
  return value;
}

template <int N>
MOEC_DEVICE void putRow(float (&rows)[N], int r, float value) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    rows[i] = i == r ? value : rows[i];
}

/// sums[c] += sum over n < N of bcast[c][n] * own[c][n * STRIDE], in the
/// order of n: bcast[c] is a row every lane of the warp reads (a
/// broadcast), own[c] the lane's own row (STRIDE 1) or column. Where N is a
/// multiple of 4 the broadcast rows must be 16-byte aligned and are read
/// four floats a load (a quarter of their shared-memory loads); the C sums
/// advance side by side, as independent chains of FMAs.
template <int N, int STRIDE, int C>
MOEC_DEVICE void broadcastDots(float (&sums)[C],
                               const sptr<const float> (&bcast)[C],
                               const sptr<const float> (&own)[C]) {
  if constexpr (N % 4 == 0) {
    for (int n = 0; n < N; n += 4) {
#pragma unroll
      for (int c = 0; c < C; ++c) {
        const float4 row = loadShared4(bcast[c] + n);
        sums[c] += row.x * own[c][n * STRIDE];
        sums[c] += row.y * own[c][(n + 1) * STRIDE];
        sums[c] += row.z * own[c][(n + 2) * STRIDE];
        sums[c] += row.w * own[c][(n + 3) * STRIDE];
      }
    }
  } else {
    for (int n = 0; n < N; ++n) {
#pragma unroll
      for (int c = 0; c < C; ++c)
        sums[c] += bcast[c][n] * own[c][n * STRIDE];
    }
  }
}

/// broadcastDots of one sum.
template <int N, int STRIDE>
MOEC_DEVICE float broadcastDot(float sum, sptr<const float> bcast,
                               sptr<const float> own) {
  float sums[1] = {sum};
  const sptr<const float> bcasts[1] = {bcast}, owns[1] = {own};
  broadcastDots<N, STRIDE>(sums, bcasts, owns);
  return sums[0];
}

/// One past the last key any query of the tile starting at i0 can see.
template <int TQ>
MOEC_DEVICE int64_t keyEnd(const AttentionShape &s, int64_t i0) {
  int64_t iLast = i0 + TQ - 1 < s.sq - 1 ? i0 + TQ - 1 : s.sq - 1;
  return s.causal && iLast + s.offset + 1 < s.kvLen ? iLast + s.offset + 1
                                                    : s.kvLen;
}

/// Stages keys and values j0 .. j0 + TK - 1 of K/V head g of batch b in
/// shared memory as float rows ROW apart (HD, or kStagedRow<HD> for rows
/// that lanes read side by side), zero past kvLen.
template <int HD, int ROW, int TK, int THREADS, typename T>
MOEC_DEVICE void stageKeys(const AttentionShape &s, gptr<const T> k,
                           gptr<const T> v, int64_t b, int g, int64_t j0,
                           sptr<float> Ks, sptr<float> Vs) {
  const int64_t kvStride = static_cast<int64_t>(s.kvHeads) * HD;
  for (int t = threadIdx.x; t < TK * HD; t += THREADS) {
    int64_t j = j0 + t / HD;
    int64_t at = (b * s.rowsPerBatch + j) * kvStride + g * HD + t % HD;
    const int staged = t / HD * ROW + t % HD;
    Ks[staged] = j < s.kvLen ? toFloat(k[at]) : 0.0f;
    Vs[staged] = j < s.kvLen ? toFloat(v[at]) : 0.0f;
  }
}

/// Stages queries and output gradients i0 .. i0 + TQ - 1 of head h of
/// batch b in shared memory as float rows ROW apart (as stageKeys), zero
/// past sq.
template <int HD, int ROW, int TQ, int THREADS, typename T>
MOEC_DEVICE void stageQueries(const AttentionShape &s, gptr<const T> q,
                              gptr<const T> dout, int64_t b, int h, int64_t i0,
                              sptr<float> Qs, sptr<float> Gs) {
  const int64_t qStride = static_cast<int64_t>(s.heads) * HD;
  for (int t = threadIdx.x; t < TQ * HD; t += THREADS) {
    int64_t i = i0 + t / HD;
    int64_t at = (b * s.sq + i) * qStride + h * HD + t % HD;
    const int staged = t / HD * ROW + t % HD;
    Qs[staged] = i < s.sq ? toFloat(q[at]) : 0.0f;
    Gs[staged] = i < s.sq ? toFloat(dout[at]) : 0.0f;
  }
}

/// grid (ceil(Sq / TQ), H, B), THREADS threads.
template <int HD, int TQ, int TK, int THREADS, typename T>
MOEC_DEVICE void attentionForward(const AttentionShape s, gptr<const T> q,
                                  gptr<const T> k, gptr<const T> v,
                                  gptr<T> out, gptr<float> lse) {
  constexpr int kWarps = THREADS / 32, QPW = TQ / kWarps;
  constexpr int kPer = (HD + 31) / 32;
  constexpr int HDP = kStagedRow<HD>;
  static_assert(TQ % kWarps == 0, "queries split evenly over warps");
  // A warp reads one query row (a broadcast): Qs is unpadded.
  MOEC_SHARED(float, Qs, TQ * HD);
  MOEC_SHARED(float, Ks, TK * HDP);
  MOEC_SHARED(float, Vs, TK * HDP);
  MOEC_SHARED(float, Ps, kWarps * TK);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t b = blockIdx.z, i0 = static_cast<int64_t>(blockIdx.x) * TQ;
  const int h = blockIdx.y, g = h / (s.heads / s.kvHeads);
  const int64_t qStride = static_cast<int64_t>(s.heads) * HD;

  for (int t = threadIdx.x; t < TQ * HD; t += THREADS) {
    int64_t i = i0 + t / HD;
    Qs[t] = i < s.sq ? toFloat(q[(b * s.sq + i) * qStride + h * HD + t % HD])
                     : 0.0f;
  }
  // o[j][r]: column lane + 32 j of query r, so that pickRow reads a row.
  float m[QPW], l[QPW], o[kPer][QPW];
#pragma unroll
  for (int r = 0; r < QPW; ++r) {
    m[r] = -3.0e38f;
    l[r] = 0.0f;
#pragma unroll
    for (int j = 0; j < kPer; ++j)
      o[j][r] = 0.0f;
  }
  const int64_t jEnd = keyEnd<TQ>(s, i0);
  for (int64_t j0 = 0; j0 < jEnd; j0 += TK) {
    __syncthreads();
    stageKeys<HD, HDP, TK, THREADS>(s, k, v, b, g, j0, Ks, Vs);
    __syncthreads();
#pragma unroll 1
    for (int r = 0; r < QPW; ++r) {
      const int qi = warp * QPW + r;
      const int64_t i = i0 + qi;
      if (i >= s.sq)
        break;
      float tileMax = -3.0e38f;
      for (int kk = lane; kk < TK; kk += 32) {
        float score = -3.0e38f;
        if (visible(s, b, i, j0 + kk))
          score =
              broadcastDot<HD, 1>(0.0f, Qs + qi * HD, Ks + kk * HDP) * s.scale;
        Ps[warp * TK + kk] = score;
        tileMax = score > tileMax ? score : tileMax;
      }
      tileMax = warpMax(tileMax);
      if (tileMax <= -3.0e38f)
        continue; // nothing visible in this tile
      const float mOld = pickRow(m, r);
      float mNew = mOld > tileMax ? mOld : tileMax;
      float correction = expf(mOld - mNew);
      float sum = 0.0f;
      for (int kk = lane; kk < TK; kk += 32) {
        float score = Ps[warp * TK + kk];
        float pj = score <= -3.0e38f ? 0.0f : expf(score - mNew);
        Ps[warp * TK + kk] = pj;
        sum += pj;
      }
      __syncwarp();
      putRow(l, r, pickRow(l, r) * correction + warpSum(sum));
      putRow(m, r, mNew);
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        int d = lane + 32 * j;
        float acc = pickRow(o[j], r) * correction;
        if (d < HD)
          acc = broadcastDot<TK, HDP>(acc, Ps + warp * TK, Vs + d);
        putRow(o[j], r, acc);
      }
      __syncwarp();
    }
  }
#pragma unroll
  for (int r = 0; r < QPW; ++r) {
    const int64_t i = i0 + warp * QPW + r;
    if (i >= s.sq)
      break;
    float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      int d = lane + 32 * j;
      if (d < HD)
        out[(b * s.sq + i) * qStride + h * HD + d] = o[j][r] * inv;
    }
    if (lane == 0 && lse)
      lse[(b * s.heads + h) * s.sq + i] =
          l[r] > 0.0f ? m[r] + logf(l[r]) : __int_as_float(0xff800000);
  }
}

/// delta[b, h, i] = <dout_i, out_i>; one warp per query row.
template <int HD, int THREADS, typename T>
MOEC_DEVICE void attentionDelta(const AttentionShape s, gptr<const T> out,
                                gptr<const T> dout, gptr<float> delta) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (THREADS / 32) + warp;
  const int64_t rows = s.batch * s.heads * s.sq;
  if (row >= rows)
    return;
  const int64_t i = row % s.sq, h = row / s.sq % s.heads,
                b = row / s.sq / s.heads;
  const int64_t base = (b * s.sq + i) * s.heads * HD + h * HD;
  float sum = 0.0f;
  for (int d = lane; d < HD; d += 32)
    sum += toFloat(out[base + d]) * toFloat(dout[base + d]);
  sum = warpSum(sum);
  if (lane == 0)
    delta[row] = sum;
}

/// dq: grid (ceil(Sq / TQ), H, B).
template <int HD, int TQ, int TK, int THREADS, typename T>
MOEC_DEVICE void attentionGradQ(const AttentionShape s, gptr<const T> q,
                                gptr<const T> k, gptr<const T> v,
                                gptr<const T> dout, gptr<const float> lse,
                                gptr<const float> delta, gptr<T> dq) {
  constexpr int kWarps = THREADS / 32, QPW = TQ / kWarps;
  constexpr int kPer = (HD + 31) / 32, HDP = kStagedRow<HD>;
  // A warp reads one query (and output gradient) row: Qs, Gs unpadded.
  MOEC_SHARED(float, Qs, TQ * HD);
  MOEC_SHARED(float, Gs, TQ * HD);
  MOEC_SHARED(float, Ks, TK * HDP);
  MOEC_SHARED(float, Vs, TK * HDP);
  MOEC_SHARED(float, Ds, kWarps * TK);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t b = blockIdx.z, i0 = static_cast<int64_t>(blockIdx.x) * TQ;
  const int h = blockIdx.y, g = h / (s.heads / s.kvHeads);
  const int64_t qStride = static_cast<int64_t>(s.heads) * HD;
  stageQueries<HD, HD, TQ, THREADS>(s, q, dout, b, h, i0, Qs, Gs);
  // acc[j][r]: column lane + 32 j of query r (pickRow reads a row).
  float acc[kPer][QPW];
#pragma unroll
  for (int j = 0; j < kPer; ++j)
#pragma unroll
    for (int r = 0; r < QPW; ++r)
      acc[j][r] = 0.0f;
  const int64_t jEnd = keyEnd<TQ>(s, i0);
  for (int64_t j0 = 0; j0 < jEnd; j0 += TK) {
    __syncthreads();
    stageKeys<HD, HDP, TK, THREADS>(s, k, v, b, g, j0, Ks, Vs);
    __syncthreads();
#pragma unroll 1
    for (int r = 0; r < QPW; ++r) {
      const int qi = warp * QPW + r;
      const int64_t i = i0 + qi;
      if (i >= s.sq)
        break;
      const int64_t row = (b * s.heads + h) * s.sq + i;
      const float li = lse[row], di = delta[row];
      for (int kk = lane; kk < TK; kk += 32) {
        float ds = 0.0f;
        if (visible(s, b, i, j0 + kk)) {
          // The score and dO . v of key kk.
          float dots[2] = {0.0f, 0.0f};
          const sptr<const float> rows[2] = {Qs + qi * HD, Gs + qi * HD};
          const sptr<const float> keys[2] = {Ks + kk * HDP, Vs + kk * HDP};
          broadcastDots<HD, 1>(dots, rows, keys);
          float pj = expf(dots[0] * s.scale - li);
          ds = pj * (dots[1] - di);
        }
        Ds[warp * TK + kk] = ds;
      }
      __syncwarp();
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        int d = lane + 32 * j;
        float sum = pickRow(acc[j], r);
        if (d < HD)
          sum = broadcastDot<TK, HDP>(sum, Ds + warp * TK, Ks + d);
        putRow(acc[j], r, sum);
      }
      __syncwarp();
    }
  }
#pragma unroll
  for (int r = 0; r < QPW; ++r) {
    const int64_t i = i0 + warp * QPW + r;
    if (i >= s.sq)
      break;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      int d = lane + 32 * j;
      if (d < HD)
        dq[(b * s.sq + i) * qStride + h * HD + d] = acc[j][r] * s.scale;
    }
  }
}

/// dk, dv: grid (ceil(Sk / TK), Hkv, B); each warp owns KPW keys and sums
/// over every query head of its group and every query that sees the key.
template <int HD, int TQ, int TK, int THREADS, typename T>
MOEC_DEVICE void attentionGradKV(const AttentionShape s, gptr<const T> q,
                                 gptr<const T> k, gptr<const T> v,
                                 gptr<const T> dout, gptr<const float> lse,
                                 gptr<const float> delta, gptr<T> dk,
                                 gptr<T> dv) {
  constexpr int kWarps = THREADS / 32, KPW = TK / kWarps;
  constexpr int kPer = (HD + 31) / 32, HDP = kStagedRow<HD>;
  // A warp reads one key (and value) row: Ks, Vs unpadded.
  MOEC_SHARED(float, Ks, TK * HD);
  MOEC_SHARED(float, Vs, TK * HD);
  MOEC_SHARED(float, Qs, TQ * HDP);
  MOEC_SHARED(float, Gs, TQ * HDP);
  MOEC_SHARED(float, Ls, TQ);
  MOEC_SHARED(float, Es, TQ);
  MOEC_SHARED(float, Ps, kWarps * TQ);
  MOEC_SHARED(float, Ds, kWarps * TQ);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t b = blockIdx.z, j0 = static_cast<int64_t>(blockIdx.x) * TK;
  const int g = blockIdx.y, group = s.heads / s.kvHeads;
  const int64_t kvStride = static_cast<int64_t>(s.kvHeads) * HD;
  stageKeys<HD, HD, TK, THREADS>(s, k, v, b, g, j0, Ks, Vs);
  // dkAcc[j][r], dvAcc[j][r]: column lane + 32 j of key r.
  float dkAcc[kPer][KPW], dvAcc[kPer][KPW];
#pragma unroll
  for (int j = 0; j < kPer; ++j)
#pragma unroll
    for (int r = 0; r < KPW; ++r)
      dkAcc[j][r] = dvAcc[j][r] = 0.0f;
  // The first query that can see key j0 (causal).
  int64_t iStart = s.causal ? j0 - s.offset : 0;
  iStart = iStart < 0 ? 0 : iStart / TQ * TQ;
  for (int hh = 0; hh < group; ++hh) {
    const int h = g * group + hh;
    for (int64_t i0 = iStart; i0 < s.sq; i0 += TQ) {
      __syncthreads();
      stageQueries<HD, HDP, TQ, THREADS>(s, q, dout, b, h, i0, Qs, Gs);
      for (int t = threadIdx.x; t < TQ; t += THREADS) {
        int64_t i = i0 + t;
        int64_t row = (b * s.heads + h) * s.sq + i;
        Ls[t] = i < s.sq ? lse[row] : 0.0f;
        Es[t] = i < s.sq ? delta[row] : 0.0f;
      }
      __syncthreads();
#pragma unroll 1
      for (int r = 0; r < KPW; ++r) {
        const int kk = warp * KPW + r;
        const int64_t j = j0 + kk;
        if (j >= s.kvLen)
          break;
        for (int qq = lane; qq < TQ; qq += 32) {
          const int64_t i = i0 + qq;
          float pj = 0.0f, ds = 0.0f;
          if (i < s.sq && visible(s, b, i, j)) {
            // The score and dO . v of query qq.
            float dots[2] = {0.0f, 0.0f};
            const sptr<const float> keys[2] = {Ks + kk * HD, Vs + kk * HD};
            const sptr<const float> rows[2] = {Qs + qq * HDP, Gs + qq * HDP};
            broadcastDots<HD, 1>(dots, keys, rows);
            pj = expf(dots[0] * s.scale - Ls[qq]);
            ds = pj * (dots[1] - Es[qq]);
          }
          Ps[warp * TQ + qq] = pj;
          Ds[warp * TQ + qq] = ds;
        }
        __syncwarp();
#pragma unroll
        for (int jj = 0; jj < kPer; ++jj) {
          int d = lane + 32 * jj;
          // dv and dk of column d: P and dS rows against dO and Q columns.
          float sums[2] = {pickRow(dvAcc[jj], r), pickRow(dkAcc[jj], r)};
          if (d < HD) {
            const sptr<const float> rows[2] = {Ps + warp * TQ, Ds + warp * TQ};
            const sptr<const float> columns[2] = {Gs + d, Qs + d};
            broadcastDots<TQ, HDP>(sums, rows, columns);
          }
          putRow(dvAcc[jj], r, sums[0]);
          putRow(dkAcc[jj], r, sums[1]);
        }
        __syncwarp();
      }
    }
  }
#pragma unroll
  for (int r = 0; r < KPW; ++r) {
    const int64_t j = j0 + warp * KPW + r;
    if (j >= s.kvLen)
      break;
#pragma unroll
    for (int jj = 0; jj < kPer; ++jj) {
      int d = lane + 32 * jj;
      if (d < HD) {
        int64_t at = (b * s.rowsPerBatch + j) * kvStride + g * HD + d;
        dk[at] = dkAcc[jj][r] * s.scale;
        dv[at] = dvAcc[jj][r];
      }
    }
  }
}

} // namespace moec

#endif // MOEC_DEVICE_ATTENTION_CUH
