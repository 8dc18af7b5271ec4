//===- experts.cuh - gathered expert FFNs ----------------------*- CUDA -*-===//
//
// Experts run as grouped GEMMs over the kept (token, choice) assignments,
// sorted by expert: the dispatch kernel turns the router's capacity
// positions into per-expert offsets and the assignment order (a scatter with
// no collisions: positions are unique per expert), the GEMMs gather token
// rows by index while loading and write gated outputs to one row per
// assignment, and a combine kernel sums each token's k rows in choice order.
// No padded [E, C, d] buffers, no atomics on data: deterministic.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_EXPERTS_CUH
#define MOEC_DEVICE_EXPERTS_CUH

namespace moec {

/// One block: offsets[e] (E + 1 entries) = first sorted row of expert e,
/// tileStart[e] = first GEMM row tile of expert e (tiles of TM rows),
/// order[offsets[e] + slot] = assignment t * K + j. `zero` (T * K floats,
/// may be null) is cleared for the gradient kernels.
template <int E, int K, int TM, int THREADS>
MOEC_DEVICE void expertDispatch(int64_t tokens, gptr<const int32_t> expert,
                                gptr<const int32_t> slot, gptr<int32_t> offsets,
                                gptr<int32_t> tileStart, gptr<int32_t> order,
                                gptr<float> zero) {
  MOEC_SHARED(int, counts, E);
  for (int e = threadIdx.x; e < E; e += THREADS)
    counts[e] = 0;
  __syncthreads();
  const int64_t n = tokens * K;
  for (int64_t a = threadIdx.x; a < n; a += THREADS) {
    if (zero)
      zero[a] = 0.0f;
    if (slot[a] >= 0)
      atomicAdd(&counts[expert[a]], 1); // integer: order-free
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int off = 0, tiles = 0;
    for (int e = 0; e < E; ++e) {
      offsets[e] = off;
      tileStart[e] = tiles;
      off += counts[e];
      tiles += (counts[e] + TM - 1) / TM;
    }
    offsets[E] = off;
    tileStart[E] = tiles;
  }
  __syncthreads();
  for (int64_t a = threadIdx.x; a < n; a += THREADS)
    if (slot[a] >= 0)
      order[offsets[expert[a]] + slot[a]] = static_cast<int32_t>(a);
}

/// The (expert, first sorted row, row count) of GEMM row tile `tile`;
/// false for a surplus block.
template <int E, int TM>
MOEC_DEVICE bool expertTile(gptr<const int32_t> offsets,
                            gptr<const int32_t> tileStart, int64_t tile,
                            int &e, int64_t &row0, int64_t &rows) {
  if (tile >= tileStart[E])
    return false;
  e = 0;
  while (tileStart[e + 1] <= tile)
    ++e;
  row0 = offsets[e] + (tile - tileStart[e]) * TM;
  int64_t end = offsets[e + 1];
  rows = end - row0 < TM ? end - row0 : TM;
  return true;
}

/// y[t] (+)= sum over kept j, in order, of rows[t * K + j]; `epilogue(i,
/// value)` stores element i of the token-major output. With D a multiple
/// of 4 and aligned rows, each thread reads four columns per 16-byte load;
/// every sum keeps its order, so both paths give the same bits.
template <int K, int D, typename Epilogue>
MOEC_DEVICE void expertCombine(int64_t tokens, gptr<const int32_t> slot,
                               gptr<const float> rows,
                               const Epilogue &epilogue) {
  const int64_t first =
      blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  if constexpr (D % 4 == 0) {
    if (aligned16(rows)) {
      for (int64_t q = first; q < tokens * (D / 4); q += stride) {
        const int64_t t = q / (D / 4), cq = q % (D / 4);
        float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int j = 0; j < K; ++j)
          if (slot[t * K + j] >= 0) {
            float4 v = load4(rows, (t * K + j) * (D / 4) + cq);
            sum.x += v.x;
            sum.y += v.y;
            sum.z += v.z;
            sum.w += v.w;
          }
        epilogue(4 * q, sum.x);
        epilogue(4 * q + 1, sum.y);
        epilogue(4 * q + 2, sum.z);
        epilogue(4 * q + 3, sum.w);
      }
      return;
    }
  }
  for (int64_t i = first; i < tokens * D; i += stride) {
    const int64_t t = i / D, c = i % D;
    float sum = 0.0f;
    for (int j = 0; j < K; ++j)
      if (slot[t * K + j] >= 0)
        sum += rows[(t * K + j) * D + c];
    epilogue(i, sum);
  }
}

/// The combine of top-1 routing for the tokens no expert kept: with one
/// row per token the grouped GEMM hands each kept token's row to the
/// epilogue itself, and here `epilogue(i, 0)` stores the others (what
/// expertCombine's empty sum would).
template <int D, typename Epilogue>
MOEC_DEVICE void expertDropped(int64_t tokens, gptr<const int32_t> slot,
                               const Epilogue &epilogue) {
  const int64_t first =
      blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = first; i < tokens * D; i += stride)
    if (slot[i / D] < 0)
      epilogue(i, 0.0f);
}

/// The gradient rows of the experts' hidden layer, one warp per sorted row:
/// dgates, and da (and du with GLU) from G = dy W2^T. hidden, da and du
/// are stored as H (bf16 when only tensor-core GEMMs read them); dgates
/// uses the unrounded hidden values.
template <int F, int D, int K, bool Glu, typename T, typename H, typename ActFn,
          typename ActGradFn>
MOEC_DEVICE void
expertHiddenGrad(gptr<const int32_t> offsets, int E, gptr<const int32_t> order,
                 gptr<const float> gates, gptr<const float> pre,
                 gptr<const float> up, gptr<const float> g, gptr<const T> dy,
                 gptr<const T> b2, gptr<float> dgates, gptr<H> hidden,
                 gptr<H> da, gptr<H> du, const ActFn &act,
                 const ActGradFn &actGrad, int rowsPerBlock) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * rowsPerBlock + warp;
  if (r >= offsets[E])
    return;
  int e = 0;
  while (offsets[e + 1] <= r)
    ++e;
  const int64_t a = order[r], t = a / K;
  const float gate = gates[a];
  float dot = 0.0f;
  for (int n = lane; n < F; n += 32) {
    const int64_t i = r * F + n;
    float h = act(pre[i]);
    float u = Glu ? up[i] : 1.0f;
    float hv = h * u;
    hidden[i] = hv;
    dot += g[i] * hv;
    da[i] = gate * g[i] * u * actGrad(pre[i]);
    if (Glu)
      du[i] = gate * g[i] * h;
  }
  if (b2)
    for (int c = lane; c < D; c += 32)
      dot += toFloat(dy[t * D + c]) * toFloat(b2[static_cast<int64_t>(e) * D + c]);
  dot = warpSum(dot);
  if (lane == 0)
    dgates[a] = dot;
}

/// Zeroes the W-wide row of every dropped assignment (slot < 0) of `rows`
/// ([T * K, W]), which no grouped GEMM writes.
template <int W, typename T>
MOEC_DEVICE void expertClearDropped(int64_t assignments,
                                    gptr<const int32_t> slot, gptr<T> rows) {
  const int64_t n = assignments * W;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    if (slot[i / W] < 0)
      rows[i] = T(0.0f);
}

/// The gradient rows of moe.expert_reduce, one warp per sorted row r (the
/// assignment a = order[r]): from G = dy W^T (H wide, in sorted rows),
/// dc[a] = gates[a] G and dgates[a] = <G, c[a]>.
template <int H, typename T>
MOEC_DEVICE void expertReduceRows(gptr<const int32_t> offsets, int E,
                                  gptr<const int32_t> order,
                                  gptr<const float> gates, gptr<const T> c,
                                  gptr<const float> g, gptr<T> dc,
                                  gptr<float> dgates, int rowsPerBlock) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * rowsPerBlock + warp;
  if (r >= offsets[E])
    return;
  const int64_t a = order[r];
  const float gate = gates[a];
  float dot = 0.0f;
  for (int n = lane; n < H; n += 32) {
    const float gv = g[r * H + n];
    dot += gv * toFloat(c[a * H + n]);
    if (dc)
      dc[a * H + n] = gate * gv;
  }
  dot = warpSum(dot);
  if (lane == 0 && dgates)
    dgates[a] = dot;
}

} // namespace moec

#endif // MOEC_DEVICE_EXPERTS_CUH
