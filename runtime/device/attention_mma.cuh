//===- attention_mma.cuh - tensor-core attention ---------------*- CUDA -*-===//
//
// FlashAttention-2's forward for bf16 models, and the dq and dk/dv kernels
// of its backward (at the end of this file; attention.cuh has the shapes,
// the masks and the CUDA-core kernels). Each warp owns 16 queries and keeps
// their Q fragments in registers for the whole key loop; S = Q K^T and
// O += P V run on mma.m16n8k16 with fp32 accumulation. The online softmax
// works on the accumulator fragments: a row's scores sit in the four lanes
// of a quad, so its max and sum take two shuffles, and P, rounded to bf16,
// is register for register the A fragment of P V. K and V tiles are staged
// as bf16 rows padded by 16 bytes (the eight rows an ldmatrix phase reads
// then hit eight different bank groups), double-buffered by cp.async when
// their rows start on 16-byte boundaries, by plain loads otherwise. The
// fragments a warp keeps in registers are loaded, and its outputs stored,
// two bf16 (one 4-byte word) at a time: a fragment's pairs start at even
// columns of rows of even length.
//
// It takes head dims that are multiples of 16 up to 128 and of 32 up to
// 256: a lane holds HD / 4 registers of Q fragments, OD / 2 of O and TK / 2
// of S, so the compiler tiles 64 keys up to head dim 64, 32 up to 128 (32 +
// 64 + 16 registers, and 35 KiB of staged K and V) and 16 beyond. Past 128
// dims a block computes O for OD = HD / 2 of them (blockIdx.y runs over
// heads x HD / OD):
// both blocks of a head compute the whole S, which costs the tensor cores
// half as much again, but O in one block would take 128 registers and
// spill; FlashAttention-2 keeps Q in shared memory instead, which the
// 48 KiB of static shared memory leave no room for. It runs
// attentionForward for anything else (AttentionPath.h). The backward's
// kernels split wide heads the same way: dq past 128 dims into two blocks
// of half the columns (four of a quarter at 256), dk/dv past 112 into
// blocks of 64 columns, every block computing the scores and dP whole.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_ATTENTION_MMA_CUH
#define MOEC_DEVICE_ATTENTION_MMA_CUH

namespace moec {

namespace detail {

/// Stages rows j0 .. j0 + ROWS - 1 of `src` (row r at src + r * rowStride:
/// the caller offsets it to its batch, head and first column), CPR 16-byte
/// chunks of each, as rows CPR + 1 chunks apart; rows from rowEnd on are
/// zero. With `async` the copies are cp.async (the caller commits).
template <int CPR, int ROWS, int THREADS>
MOEC_DEVICE void stageRowsBf16(gptr<const bf16> src, int64_t rowStride,
                               int64_t j0, int64_t rowEnd, sptr<uint4> dst,
                               bool async) {
  constexpr int STRIDE = CPR + 1;
  // Rolled: unrolled it put up to 16 copies of the body in each of the
  // kernel's staging calls, a fifth of the kernel's compile time, for
  // nothing the copies' latency does not hide.
#pragma unroll 1
  for (int c = threadIdx.x; c < ROWS * CPR; c += THREADS) {
    const int r = c / CPR, ch = c % CPR;
    const int64_t j = j0 + r;
    const bool valid = j < rowEnd;
    // Nothing is read for a row past rowEnd, but the address must be valid.
    const int64_t at = valid ? j * rowStride + ch * 8 : 0;
    if (async) {
      cpAsync16(dst + (r * STRIDE + ch), src + at, valid ? 16 : 0);
      continue;
    }
    uint32_t w[4] = {0, 0, 0, 0};
    if (valid)
      for (int i = 0; i < 4; ++i)
        w[i] = loadBf16x2(src + (at + 2 * i));
    dst[r * STRIDE + ch] = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

/// Stages keys j0 .. j0 + TK - 1 of K/V head g of batch b: all HD columns
/// of K, the OD columns of V from `vCol`.
template <int HD, int OD, int TK, int THREADS>
MOEC_DEVICE void stageKeysBf16(const AttentionShape &s, gptr<const bf16> k,
                               gptr<const bf16> v, int64_t b, int g, int vCol,
                               int64_t j0, sptr<uint4> Ks, sptr<uint4> Vs,
                               bool async) {
  const int64_t kvStride = static_cast<int64_t>(s.kvHeads) * HD;
  const int64_t head =
      b * s.rowsPerBatch * kvStride + static_cast<int64_t>(g) * HD;
  stageRowsBf16<HD / 8, TK, THREADS>(k + head, kvStride, j0, s.kvLen, Ks,
                                     async);
  stageRowsBf16<OD / 8, TK, THREADS>(v + (head + vCol), kvStride, j0, s.kvLen,
                                     Vs, async);
}

/// Runs stage(tile, buffer) and body(tile, buffer) over `tiles` tiles, two
/// buffers deep: the next tile is staged (cp.async, or plain stores) while
/// body works on this one. Every thread of the block calls it; the barriers
/// order a buffer's staging before its body and its body before it is
/// staged again.
template <typename Stage, typename Body>
MOEC_DEVICE void doubleBuffered(int tiles, Stage &&stage, Body &&body) {
  if (tiles > 0)
    stage(0, 0);
  cpAsyncCommit();
  for (int tile = 0; tile < tiles; ++tile) {
    // The other buffer was last read before the previous tile's barrier.
    if (tile + 1 < tiles)
      stage(tile + 1, (tile + 1) % 2);
    cpAsyncCommit();
    cpAsyncWait<1>();
    __syncthreads();
    body(tile, tile % 2);
    // Every warp is done with this buffer before it is staged again.
    __syncthreads();
  }
}

/// Runs body(j0, Kt, Vt) over the TK-key tiles of K/V head g of batch b
/// before jEnd, for a warp whose 16 rows start at iw and see the tile (past
/// sq, or before the tile when causal, it skips it; the skip is
/// warp-uniform). Every thread of the block calls it: the tiles are staged
/// by stageKeysBf16 (V's OD columns from vCol), double-buffered in Ks and
/// Vs.
template <int HD, int OD, int TK, int THREADS, typename Body>
MOEC_DEVICE void forEachKeyTile(const AttentionShape &s, gptr<const bf16> k,
                                gptr<const bf16> v, int64_t b, int g, int vCol,
                                int64_t jEnd, int64_t iw, sptr<uint4> Ks,
                                sptr<uint4> Vs, Body &&body) {
  constexpr int KSTAGE = TK * (HD / 8 + 1), VSTAGE = TK * (OD / 8 + 1);
  const int64_t kvStride = static_cast<int64_t>(s.kvHeads) * HD;
  // The same for every thread of the block.
  const bool async = rowsAligned16(k, kvStride) && rowsAligned16(v, kvStride);
  doubleBuffered(
      static_cast<int>((jEnd + TK - 1) / TK),
      [&](int tile, int buffer) {
        stageKeysBf16<HD, OD, TK, THREADS>(
            s, k, v, b, g, vCol, static_cast<int64_t>(tile) * TK,
            Ks + buffer * KSTAGE, Vs + buffer * VSTAGE, async);
      },
      [&](int tile, int buffer) {
        const int64_t j0 = static_cast<int64_t>(tile) * TK;
        if (iw < s.sq && (!s.causal || j0 <= iw + 15 + s.offset))
          body(j0, Ks + buffer * KSTAGE, Vs + buffer * VSTAGE);
      });
}

/// A fragments of rows[0], rows[1] of `x` (row r at x + r * stride, the
/// caller offsetting it to its batch and head; rows from rowEnd on are
/// zero), HD columns: a[kb][0], a[kb][2] row rows[0], a[kb][1], a[kb][3]
/// row rows[1]; a[kb][2], a[kb][3] 8 columns on.
template <int HD>
MOEC_DEVICE void loadRowFragments(gptr<const bf16> x, int64_t stride,
                                  const int64_t (&rows)[2], int64_t rowEnd,
                                  uint32_t (&a)[HD / 16][4]) {
  const int t = threadIdx.x % 4;
  for (int kb = 0; kb < HD / 16; ++kb)
    for (int r = 0; r < 4; ++r) {
      const int64_t i = rows[r % 2];
      const int d = kb * 16 + (r / 2) * 8 + 2 * t;
      a[kb][r] = i < rowEnd ? loadBf16x2(x + (i * stride + d)) : 0u;
    }
}

/// Zero accumulator fragments.
template <int N> MOEC_DEVICE void clearFragments(float (&acc)[N][4]) {
  for (int n = 0; n < N; ++n)
    for (int r = 0; r < 4; ++r)
      acc[n][r] = 0.0f;
}

/// acc = A B^T for the warp's 16 rows of A (fragments `a`, KB 16-column
/// blocks) and the rows of a staged tile as B (SN 8-row blocks, rows
/// STRIDE chunks apart): S = Q K^T, dP = dO V^T. One ldmatrix gives the B
/// fragments of two 8-row blocks (matrices: rows +0 / +8 by mat / 2,
/// columns +0 / +8 by mat % 2).
template <int KB, int SN, int STRIDE>
MOEC_DEVICE void multiplyByRows(float (&acc)[SN][4], const uint32_t (&a)[KB][4],
                                sptr<const uint4> tile) {
  const int lane = threadIdx.x % 32, mat = lane / 8, r8 = lane % 8;
  clearFragments(acc);
  for (int kb = 0; kb < KB; ++kb)
    for (int n = 0; n < SN; n += 2) {
      uint32_t f[4];
      ldmatrixX4(f,
                 tile + (n * 8 + mat / 2 * 8 + r8) * STRIDE + kb * 2 + mat % 2);
      const uint32_t b0[2] = {f[0], f[1]}, b1[2] = {f[2], f[3]};
      mma_m16n8k16_bf16(acc[n], a[kb], b0, acc[n]);
      mma_m16n8k16_bf16(acc[n + 1], a[kb], b1, acc[n + 1]);
    }
}

/// o += P X, 16 keys at a time: P the warp's 16 x 8 SN values in
/// accumulator layout (blocks 2 kk and 2 kk + 1, rounded to bf16, are the
/// A fragment), X the staged tile's rows (keys) over DN 8-column blocks:
/// O += P V, dQ += dS K. One ldmatrix.trans gives the B fragments of two
/// 8-wide column blocks (keys +0 / +8 by mat % 2, columns +0 / +8 by
/// mat / 2).
template <int SN, int DN, int STRIDE>
MOEC_DEVICE void accumulateProducts(float (&o)[DN][4], const float (&p)[SN][4],
                                    sptr<const uint4> tile) {
  const int lane = threadIdx.x % 32, mat = lane / 8, r8 = lane % 8;
  for (int kk = 0; kk < SN / 2; ++kk) {
    const uint32_t pa[4] = {packBf16(p[2 * kk][0], p[2 * kk][1]),
                            packBf16(p[2 * kk][2], p[2 * kk][3]),
                            packBf16(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                            packBf16(p[2 * kk + 1][2], p[2 * kk + 1][3])};
    for (int n = 0; n < DN; n += 2) {
      uint32_t f[4];
      ldmatrixX4Trans(f, tile + (kk * 16 + mat % 2 * 8 + r8) * STRIDE + n +
                             mat / 2);
      const uint32_t b0[2] = {f[0], f[1]}, b1[2] = {f[2], f[3]};
      mma_m16n8k16_bf16(o[n], pa, b0, o[n]);
      mma_m16n8k16_bf16(o[n + 1], pa, b1, o[n + 1]);
    }
  }
}

/// Scores of keys j0 .. j0 + 8 SN - 1 for rows[0], rows[1] (the warp's
/// rows start at iw) in log2 units, -inf where a key is not visible; masks
/// only where the tile crosses kvLen, the causal diagonal of the warp's
/// rows, or a key mask.
template <int SN>
MOEC_DEVICE void maskScores(float (&sc)[SN][4], const AttentionShape &s,
                            int64_t b, int64_t j0, int64_t iw,
                            const int64_t (&rows)[2], float scaleLog2) {
  const float kNegInf = __int_as_float(0xff800000);
  const int t = threadIdx.x % 4;
  const bool edge = j0 + 8 * SN > s.kvLen || s.keyMask ||
                    (s.causal && j0 + 8 * SN - 1 > iw + s.offset);
  for (int n = 0; n < SN; ++n)
    for (int e = 0; e < 2; ++e) {
      const int64_t j = j0 + n * 8 + 2 * t + e;
      const bool key =
          !edge || (j < s.kvLen &&
                    (!s.keyMask || s.keyMask[b * s.rowsPerBatch + j] != 0));
      for (int half = 0; half < 2; ++half) {
        float &x = sc[n][2 * half + e];
        x = key && (!edge || !s.causal || j <= rows[half] + s.offset)
                ? x * scaleLog2
                : kNegInf;
      }
    }
}

/// maskScores for the transposed scores S^T of the dk/dv kernel: rows
/// keys[0], keys[1] (the warp's keys start at jw), columns queries i0 ..
/// i0 + 8 SN - 1; -inf also for queries past sq.
template <int SN>
MOEC_DEVICE void maskScoresByKey(float (&sc)[SN][4], const AttentionShape &s,
                                 int64_t b, int64_t i0, int64_t jw,
                                 const int64_t (&keys)[2], float scaleLog2) {
  const float kNegInf = __int_as_float(0xff800000);
  const int t = threadIdx.x % 4;
  const bool edge = i0 + 8 * SN > s.sq || jw + 16 > s.kvLen || s.keyMask ||
                    (s.causal && jw + 15 > i0 + s.offset);
  bool key[2];
  for (int half = 0; half < 2; ++half)
    key[half] = !edge || (keys[half] < s.kvLen &&
                          (!s.keyMask ||
                           s.keyMask[b * s.rowsPerBatch + keys[half]] != 0));
  for (int n = 0; n < SN; ++n)
    for (int e = 0; e < 2; ++e) {
      const int64_t i = i0 + n * 8 + 2 * t + e;
      for (int half = 0; half < 2; ++half) {
        float &x = sc[n][2 * half + e];
        x = !edge || (key[half] && i < s.sq &&
                      (!s.causal || keys[half] <= i + s.offset))
                ? x * scaleLog2
                : kNegInf;
      }
    }
}

} // namespace detail

/// attentionForward for bf16 on the tensor cores: grid (ceil(Sq / TQ), H *
/// HD / OD, B), THREADS threads, TQ = 16 queries per warp, TK keys per
/// tile; each block writes OD of the HD output columns.
template <int HD, int TQ, int TK, int THREADS, int OD = HD>
MOEC_DEVICE void attentionForwardMma(const AttentionShape s, gptr<const bf16> q,
                                     gptr<const bf16> k, gptr<const bf16> v,
                                     gptr<bf16> out, gptr<float> lse) {
  constexpr int KB = HD / 16, DN = OD / 8, SN = TK / 8;
  constexpr int STRIDE = HD / 8 + 1, STAGE = TK * STRIDE;
  constexpr int VSTRIDE = OD / 8 + 1, VSTAGE = TK * VSTRIDE;
  static_assert(TQ == 16 * (THREADS / 32), "each warp owns 16 queries");
  static_assert(HD % 16 == 0 && HD <= 256,
                "head_dim a multiple of 16 up to 256");
  static_assert(OD % 16 == 0 && HD % OD == 0 && OD <= 128,
                "output columns a block: a divisor of HD, 16 to 128");
  static_assert(TK % 16 == 0, "key tiles of whole 16-key blocks");
  MOEC_SHARED(uint4, Ks, 2 * STAGE);
  MOEC_SHARED(uint4, Vs, 2 * VSTAGE);
  const float kNegInf = __int_as_float(0xff800000);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  // Fragment rows gr and gr + 8, columns 2 t and 2 t + 1 of each 8-block.
  const int gr = lane / 4, t = lane % 4;
  const int64_t b = blockIdx.z, i0 = static_cast<int64_t>(blockIdx.x) * TQ;
  const int h = blockIdx.y / (HD / OD), g = h / (s.heads / s.kvHeads);
  const int d0 = blockIdx.y % (HD / OD) * OD;
  const int64_t qStride = static_cast<int64_t>(s.heads) * HD;
  const int64_t iw = i0 + 16 * warp, rows[2] = {iw + gr, iw + gr + 8};

  const int64_t head = b * s.sq * qStride + static_cast<int64_t>(h) * HD;
  uint32_t qa[KB][4];
  detail::loadRowFragments<HD>(q + head, qStride, rows, s.sq, qa);
  // Running max (log2 units), this lane's share of the row sums, and O.
  float m[2] = {kNegInf, kNegInf}, l[2] = {0.0f, 0.0f}, o[DN][4];
  detail::clearFragments(o);
  const float scaleLog2 = s.scale * 1.4426950408889634f;

  detail::forEachKeyTile<HD, OD, TK, THREADS>(
      s, k, v, b, g, d0, keyEnd<TQ>(s, i0), iw, Ks, Vs,
      [&](int64_t j0, sptr<const uint4> Kt, sptr<const uint4> Vt) {
        float sc[SN][4];
        detail::multiplyByRows<KB, SN, STRIDE>(sc, qa, Kt);
        detail::maskScores<SN>(sc, s, b, j0, iw, rows, scaleLog2);
        // Row maxima over the quad; a row with nothing visible yet keeps
        // max -inf and subtracts 0, so that its P and correction are 0.
        float base[2];
        for (int half = 0; half < 2; ++half) {
          float mx = m[half];
          for (int n = 0; n < SN; ++n)
            mx = fmaxf(mx, fmaxf(sc[n][2 * half], sc[n][2 * half + 1]));
          mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 2));
          base[half] = mx == kNegInf ? 0.0f : mx;
          const float correction = exp2f(m[half] - base[half]);
          m[half] = mx;
          l[half] *= correction;
          for (int n = 0; n < DN; ++n) {
            o[n][2 * half] *= correction;
            o[n][2 * half + 1] *= correction;
          }
        }
        for (int n = 0; n < SN; ++n)
          for (int r = 0; r < 4; ++r) {
            sc[n][r] = exp2f(sc[n][r] - base[r / 2]);
            l[r / 2] += sc[n][r];
          }
        detail::accumulateProducts<SN, DN, VSTRIDE>(o, sc, Vt);
      });

  for (int half = 0; half < 2; ++half) {
    float sum = l[half];
    sum += __shfl_xor_sync(kFullMask, sum, 1);
    sum += __shfl_xor_sync(kFullMask, sum, 2);
    const int64_t i = rows[half];
    if (i >= s.sq)
      continue;
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    const int64_t at = (b * s.sq + i) * qStride + h * HD + d0 + 2 * t;
    for (int n = 0; n < DN; ++n)
      storeBf16x2(out + (at + n * 8), o[n][2 * half] * inv,
                  o[n][2 * half + 1] * inv);
    if (t == 0 && lse && d0 == 0)
      lse[(b * s.heads + h) * s.sq + i] =
          sum > 0.0f ? (m[half] + log2f(sum)) * 0.6931471805599453f : kNegInf;
  }
}

/// attentionGradQ for bf16 on the tensor cores: grid (ceil(Sq / TQ), H *
/// HD / OD, B), THREADS threads, TQ = 16 queries a warp, TK keys a tile;
/// each block writes OD of the HD columns of dq. Each warp keeps the Q and
/// dO fragments of its 16 queries and their dq accumulators in registers;
/// per key tile S = Q K^T and dP = dO V^T run on mma, P is recomputed from
/// the saved log-sum-exp, dS = P (dP - delta) is rounded to bf16 as the A
/// fragment of dq += dS K (as P is for P V in the forward). Past 128 dims
/// a block computes dq for some of the columns (the blocks of a head each
/// compute S and dP whole, as in the forward): Q and dO fragments of 256
/// dims take 128 registers a lane, a whole head's accumulators as many
/// again.
template <int HD, int TQ, int TK, int THREADS, int OD = HD>
MOEC_DEVICE void attentionGradQMma(const AttentionShape s, gptr<const bf16> q,
                                   gptr<const bf16> k, gptr<const bf16> v,
                                   gptr<const bf16> dout, gptr<const float> lse,
                                   gptr<const float> delta, gptr<bf16> dq) {
  constexpr int KB = HD / 16, DN = OD / 8, SN = TK / 8;
  constexpr int STRIDE = HD / 8 + 1, STAGE = TK * STRIDE;
  static_assert(TQ == 16 * (THREADS / 32), "each warp owns 16 queries");
  static_assert(HD % 16 == 0 && HD <= 256,
                "head_dim a multiple of 16 up to 256");
  static_assert(OD % 16 == 0 && HD % OD == 0 && OD <= 128,
                "output columns a block: a divisor of HD, 16 to 128");
  static_assert(TK % 16 == 0, "key tiles of whole 16-key blocks");
  MOEC_SHARED(uint4, Ks, 2 * STAGE);
  MOEC_SHARED(uint4, Vs, 2 * STAGE);
  const float kNegInf = __int_as_float(0xff800000);
  const float kLog2e = 1.4426950408889634f;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int gr = lane / 4, t = lane % 4;
  const int64_t b = blockIdx.z, i0 = static_cast<int64_t>(blockIdx.x) * TQ;
  const int h = blockIdx.y / (HD / OD), g = h / (s.heads / s.kvHeads);
  const int d0 = blockIdx.y % (HD / OD) * OD;
  const int64_t qStride = static_cast<int64_t>(s.heads) * HD;
  const int64_t iw = i0 + 16 * warp, rows[2] = {iw + gr, iw + gr + 8};

  const int64_t head = b * s.sq * qStride + static_cast<int64_t>(h) * HD;
  uint32_t qa[KB][4], ga[KB][4];
  detail::loadRowFragments<HD>(q + head, qStride, rows, s.sq, qa);
  detail::loadRowFragments<HD>(dout + head, qStride, rows, s.sq, ga);
  // Each row's log-sum-exp in log2 units (0 for a row that sees nothing:
  // its scores are all -inf, so P is 0) and its delta.
  float lseLog2[2] = {0.0f, 0.0f}, rowDelta[2] = {0.0f, 0.0f};
  for (int half = 0; half < 2; ++half)
    if (rows[half] < s.sq) {
      const int64_t row = (b * s.heads + h) * s.sq + rows[half];
      const float l = lse[row];
      lseLog2[half] = l == kNegInf ? 0.0f : l * kLog2e;
      rowDelta[half] = delta[row];
    }
  float acc[DN][4];
  detail::clearFragments(acc);
  const float scaleLog2 = s.scale * kLog2e;

  detail::forEachKeyTile<HD, HD, TK, THREADS>(
      s, k, v, b, g, 0, keyEnd<TQ>(s, i0), iw, Ks, Vs,
      [&](int64_t j0, sptr<const uint4> Kt, sptr<const uint4> Vt) {
        float sc[SN][4], dp[SN][4];
        detail::multiplyByRows<KB, SN, STRIDE>(sc, qa, Kt);
        detail::multiplyByRows<KB, SN, STRIDE>(dp, ga, Vt);
        detail::maskScores<SN>(sc, s, b, j0, iw, rows, scaleLog2);
        // dS = P (dP - delta), in place of the scores.
        for (int n = 0; n < SN; ++n)
          for (int r = 0; r < 4; ++r)
            sc[n][r] =
                exp2f(sc[n][r] - lseLog2[r / 2]) * (dp[n][r] - rowDelta[r / 2]);
        // Columns d0 .. d0 + OD - 1 of K: 16-byte chunks d0 / 8 on.
        detail::accumulateProducts<SN, DN, STRIDE>(acc, sc, Kt + d0 / 8);
      });

  for (int half = 0; half < 2; ++half) {
    const int64_t i = rows[half];
    if (i >= s.sq)
      continue;
    const int64_t at = (b * s.sq + i) * qStride + h * HD + d0 + 2 * t;
    for (int n = 0; n < DN; ++n)
      storeBf16x2(dq + (at + n * 8), acc[n][2 * half] * s.scale,
                  acc[n][2 * half + 1] * s.scale);
  }
}

/// attentionGradKV for bf16 on the tensor cores: grid (ceil(rows / TK),
/// Hkv * HD / OD, B), THREADS threads, TK = 16 keys a warp, TQ queries a
/// tile; each block writes OD of the HD columns of dk and dv. Each warp
/// keeps the K and V fragments of its 16 keys and their dk and dv
/// accumulators (OD columns) in registers and runs over the query tiles
/// of every query head of its K/V head (from the first query that sees
/// the block's keys when causal): S^T = K Q^T and dP^T = V dO^T on mma,
/// P^T from the saved log-sum-exp of each query, dS^T = P^T (dP^T -
/// delta); P^T and dS^T, rounded to bf16, are the A fragments of dv +=
/// P^T dO and dk += dS^T Q. Q and dO tiles are double-buffered by cp.async
/// (plain loads when their rows are not 16-byte aligned), each query's lse
/// and delta beside them.
template <int HD, int TQ, int TK, int THREADS, int OD = HD>
MOEC_DEVICE void attentionGradKVMma(const AttentionShape s, gptr<const bf16> q,
                                    gptr<const bf16> k, gptr<const bf16> v,
                                    gptr<const bf16> dout,
                                    gptr<const float> lse,
                                    gptr<const float> delta, gptr<bf16> dk,
                                    gptr<bf16> dv) {
  constexpr int KB = HD / 16, DN = OD / 8, SN = TQ / 8;
  constexpr int STRIDE = HD / 8 + 1, STAGE = TQ * STRIDE;
  static_assert(TK == 16 * (THREADS / 32), "each warp owns 16 keys");
  static_assert(HD % 16 == 0 && HD <= 256,
                "head_dim a multiple of 16 up to 256");
  static_assert(OD % 16 == 0 && HD % OD == 0 && OD <= 112,
                "output columns a block: a divisor of HD, 16 to 112 (the "
                "dk and dv accumulators take OD registers a lane)");
  static_assert(TQ % 16 == 0, "query tiles of whole 16-query blocks");
  MOEC_SHARED(uint4, Qs, 2 * STAGE);
  MOEC_SHARED(uint4, Gs, 2 * STAGE);
  MOEC_SHARED(float, Ls, 2 * TQ);
  MOEC_SHARED(float, Es, 2 * TQ);
  const float kNegInf = __int_as_float(0xff800000);
  const float kLog2e = 1.4426950408889634f;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int gr = lane / 4, t = lane % 4;
  const int64_t b = blockIdx.z, j0 = static_cast<int64_t>(blockIdx.x) * TK;
  const int g = blockIdx.y / (HD / OD), group = s.heads / s.kvHeads;
  const int d0 = blockIdx.y % (HD / OD) * OD;
  const int64_t qStride = static_cast<int64_t>(s.heads) * HD;
  const int64_t kvStride = static_cast<int64_t>(s.kvHeads) * HD;
  const int64_t jw = j0 + 16 * warp, keys[2] = {jw + gr, jw + gr + 8};

  const int64_t kvHead =
      b * s.rowsPerBatch * kvStride + static_cast<int64_t>(g) * HD;
  uint32_t ka[KB][4], va[KB][4];
  detail::loadRowFragments<HD>(k + kvHead, kvStride, keys, s.kvLen, ka);
  detail::loadRowFragments<HD>(v + kvHead, kvStride, keys, s.kvLen, va);
  float dkAcc[DN][4], dvAcc[DN][4];
  detail::clearFragments(dkAcc);
  detail::clearFragments(dvAcc);
  const float scaleLog2 = s.scale * kLog2e;

  // Causal, the queries before j0 - offset see none of the block's keys.
  int64_t iStart = s.causal ? j0 - s.offset : 0;
  iStart = iStart < 0 ? 0 : iStart / TQ * TQ;
  const int tilesPerHead =
      iStart < s.sq ? static_cast<int>((s.sq - iStart + TQ - 1) / TQ) : 0;
  // Query tile `tile` of the block: query head g * group + tile /
  // tilesPerHead, first query i0.
  auto queryTile = [&](int tile, int &h, int64_t &i0) {
    h = g * group + tile / tilesPerHead;
    i0 = iStart + static_cast<int64_t>(tile % tilesPerHead) * TQ;
  };
  // The same for every thread of the block.
  const bool async = rowsAligned16(q, qStride) && rowsAligned16(dout, qStride);
  detail::doubleBuffered(
      group * tilesPerHead,
      [&](int tile, int buffer) {
        int h;
        int64_t i0;
        queryTile(tile, h, i0);
        const int64_t head = b * s.sq * qStride + static_cast<int64_t>(h) * HD;
        detail::stageRowsBf16<HD / 8, TQ, THREADS>(
            q + head, qStride, i0, s.sq, Qs + buffer * STAGE, async);
        detail::stageRowsBf16<HD / 8, TQ, THREADS>(
            dout + head, qStride, i0, s.sq, Gs + buffer * STAGE, async);
        // Each query's log-sum-exp in log2 units (0 for a query past sq or
        // one that sees nothing: its scores here are -inf) and its delta.
        for (int x = threadIdx.x; x < TQ; x += THREADS) {
          const int64_t i = i0 + x, row = (b * s.heads + h) * s.sq + i;
          const float l = i < s.sq ? lse[row] : kNegInf;
          Ls[buffer * TQ + x] = l == kNegInf ? 0.0f : l * kLog2e;
          Es[buffer * TQ + x] = i < s.sq ? delta[row] : 0.0f;
        }
      },
      [&](int tile, int buffer) {
        int h;
        int64_t i0;
        queryTile(tile, h, i0);
        // Warp-uniform: none of the warp's keys, or none visible here.
        if (jw >= s.kvLen || (s.causal && i0 + TQ - 1 + s.offset < jw))
          return;
        const sptr<const uint4> Qt = Qs + buffer * STAGE,
                                Gt = Gs + buffer * STAGE;
        float sc[SN][4], dp[SN][4];
        detail::multiplyByRows<KB, SN, STRIDE>(sc, ka, Qt);
        detail::multiplyByRows<KB, SN, STRIDE>(dp, va, Gt);
        detail::maskScoresByKey<SN>(sc, s, b, i0, jw, keys, scaleLog2);
        // P^T into dp, dS^T = P^T (dP^T - delta) into sc.
        for (int n = 0; n < SN; ++n)
          for (int r = 0; r < 4; ++r) {
            const int x = buffer * TQ + n * 8 + 2 * t + r % 2;
            const float p = exp2f(sc[n][r] - Ls[x]);
            sc[n][r] = p * (dp[n][r] - Es[x]);
            dp[n][r] = p;
          }
        // Columns d0 .. d0 + OD - 1 of dO and Q: 16-byte chunks d0 / 8 on.
        detail::accumulateProducts<SN, DN, STRIDE>(dvAcc, dp, Gt + d0 / 8);
        detail::accumulateProducts<SN, DN, STRIDE>(dkAcc, sc, Qt + d0 / 8);
      });

  for (int half = 0; half < 2; ++half) {
    const int64_t j = keys[half];
    if (j >= s.kvLen)
      continue;
    const int64_t at =
        (b * s.rowsPerBatch + j) * kvStride + g * HD + d0 + 2 * t;
    for (int n = 0; n < DN; ++n) {
      storeBf16x2(dk + (at + n * 8), dkAcc[n][2 * half] * s.scale,
                  dkAcc[n][2 * half + 1] * s.scale);
      storeBf16x2(dv + (at + n * 8), dvAcc[n][2 * half],
                  dvAcc[n][2 * half + 1]);
    }
  }
}

} // namespace moec

#endif // MOEC_DEVICE_ATTENTION_MMA_CUH
