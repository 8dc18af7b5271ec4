//===- gemm.cuh - tiled matrix products ------------------------*- CUDA -*-===//
//
// One block computes a TM x TN tile of C = A B with A(m, k) and B(k, n)
// read through loader functors, so the same code multiplies row-major,
// transposed and gathered (expert) operands, and hands every output to a
// store functor that applies the fused epilogue. Each output is accumulated
// by one thread over k in increasing order: no split-K, so results are
// deterministic (gemmRows, for decoding's launches of a few rows, splits k
// over lanes or warps and sums the parts in a fixed order). gemmTile
// multiplies with fp32 FMA; gemmTileTf32 and
// gemmTile3xTf32, for f32 models that opt in, multiply on the tensor cores
// with the operands rounded to tf32 or split into two tf32 halves;
// gemmTileBf16, for bf16 models, rounds the operands to bf16 in shared
// memory and multiplies on the tensor cores (mma.cuh); all accumulate in
// fp32. gemmTileBf16Async is the same product for bf16 operands that are
// contiguous in 16-byte chunks: a cp.async pipeline (async_copy.cuh) fills
// swizzled shared-memory stages that ldmatrix turns into fragments; it
// falls back to gemmTileBf16 for operands it cannot copy that way.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_GEMM_CUH
#define MOEC_DEVICE_GEMM_CUH

namespace moec {

/// Whether rows of `ld` elements from `p` start on 16-byte boundaries, so
/// that they can be copied in 16-byte chunks.
template <typename T>
MOEC_DEVICE bool rowsAligned16(gptr<const T> p, int64_t ld) {
  return reinterpret_cast<uint64_t>(static_cast<const T *>(p)) % 16 == 0 &&
         ld * static_cast<int64_t>(sizeof(T)) % 16 == 0;
}

/// A(m, k) = p[m * ld + k]: k is contiguous.
template <typename T> struct RowMajor {
  gptr<const T> p;
  int64_t ld;
  static constexpr bool kContiguousFirst = false;
  MOEC_DEVICE float operator()(int64_t i, int64_t j) const {
    return static_cast<float>(p[i * ld + j]);
  }
  /// The address of element (i, j): elements (i, j + 1), ... follow it.
  MOEC_DEVICE gptr<const T> address(int64_t i, int64_t j) const {
    return p + (i * ld + j);
  }
  MOEC_DEVICE bool chunked() const { return rowsAligned16(p, ld); }
};

/// A(m, k) = p[k * ld + m]: the transposed view; m is contiguous.
template <typename T> struct ColMajor {
  gptr<const T> p;
  int64_t ld;
  static constexpr bool kContiguousFirst = true;
  MOEC_DEVICE float operator()(int64_t i, int64_t j) const {
    return static_cast<float>(p[j * ld + i]);
  }
  /// The address of element (i, j): elements (i + 1, j), ... follow it.
  MOEC_DEVICE gptr<const T> address(int64_t i, int64_t j) const {
    return p + (j * ld + i);
  }
  MOEC_DEVICE bool chunked() const { return rowsAligned16(p, ld); }
};

/// Rows gathered by index: element (i, j) is p[(order[row0 + i] / div) *
/// ld + j], times scale[order[row0 + i]] when `scale` is set (the gate of an
/// expert assignment). j is contiguous.
template <typename T> struct GatherRows {
  gptr<const T> p;
  gptr<const int32_t> order;
  int64_t row0, div, ld;
  gptr<const float> scale;
  static constexpr bool kContiguousFirst = false;
  MOEC_DEVICE float operator()(int64_t i, int64_t j) const {
    const int64_t a = order[row0 + i];
    float v = static_cast<float>(p[(a / div) * ld + j]);
    return scale ? v * scale[a] : v;
  }
  /// The address of element (i, j) before scaling: (i, j + 1), ... follow.
  MOEC_DEVICE gptr<const T> address(int64_t i, int64_t j) const {
    return p + ((order[row0 + i] / div) * ld + j);
  }
  /// Scaled rows are not copies of memory.
  MOEC_DEVICE bool chunked() const { return !scale && rowsAligned16(p, ld); }
};

/// The transposed view of GatherRows: element (i, j) is row j's column i.
template <typename T> struct GatherCols {
  gptr<const T> p;
  gptr<const int32_t> order;
  int64_t row0, div, ld;
  static constexpr bool kContiguousFirst = true;
  MOEC_DEVICE float operator()(int64_t i, int64_t j) const {
    return static_cast<float>(p[(order[row0 + j] / div) * ld + i]);
  }
  /// The address of element (i, j): elements (i + 1, j), ... follow it.
  MOEC_DEVICE gptr<const T> address(int64_t i, int64_t j) const {
    return p + ((order[row0 + j] / div) * ld + i);
  }
  MOEC_DEVICE bool chunked() const { return rowsAligned16(p, ld); }
};

/// Loaders gemmTileBf16Async may copy with cp.async: bf16 in memory, with
/// address() and, at run time, chunked().
template <typename Load> struct ChunkedLoad {
  static constexpr bool value = false;
};
template <> struct ChunkedLoad<RowMajor<bf16>> {
  static constexpr bool value = true;
};
template <> struct ChunkedLoad<ColMajor<bf16>> {
  static constexpr bool value = true;
};
template <> struct ChunkedLoad<GatherRows<bf16>> {
  static constexpr bool value = true;
};
template <> struct ChunkedLoad<GatherCols<bf16>> {
  static constexpr bool value = true;
};

/// C(m, n) += sum_k A(m, k) B(k, n) for the tile at (m0, n0); `store(m, n,
/// value)` is called once for every in-range output. THREADS must be 256
/// (a 16 x 16 thread grid); TM and TN multiples of 16.
template <int TM, int TN, int TK, int THREADS, typename LoadA, typename LoadB,
          typename Store>
MOEC_DEVICE void gemmTile(int64_t m0, int64_t n0, int64_t M, int64_t N,
                          int64_t K, const LoadA &loadA, const LoadB &loadB,
                          const Store &store) {
  static_assert(THREADS == 256, "gemmTile uses a 16 x 16 thread grid");
  static_assert(TM % 16 == 0 && TN % 16 == 0, "tiles are multiples of 16");
  constexpr int TX = 16, TY = THREADS / TX;
  constexpr int RM = TM / TY, RN = TN / TX;
  // Rows along k are TM + 2 (TN + 2) floats apart: an operand whose k runs
  // fastest in memory is stored by a warp as 16 k times 2 rows, which then
  // land in 32 different banks (2 kk + mm), not 16 times in the same two.
  constexpr int SA = TM + 2, SB = TN + 2;
  MOEC_SHARED(float, As, TK * SA);
  MOEC_SHARED(float, Bs, TK * SB);
  float acc[RM][RN];
  for (int r = 0; r < RM; ++r)
    for (int c = 0; c < RN; ++c)
      acc[r][c] = 0.0f;
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;

  for (int64_t k0 = 0; k0 < K; k0 += TK) {
    // Consecutive threads read consecutive addresses of each operand.
    for (int i = threadIdx.x; i < TM * TK; i += THREADS) {
      int mm = LoadA::kContiguousFirst ? i % TM : i / TK;
      int kk = LoadA::kContiguousFirst ? i / TM : i % TK;
      int64_t m = m0 + mm, k = k0 + kk;
      As[kk * SA + mm] = m < M && k < K ? loadA(m, k) : 0.0f;
    }
    for (int i = threadIdx.x; i < TN * TK; i += THREADS) {
      int kk = LoadB::kContiguousFirst ? i % TK : i / TN;
      int nn = LoadB::kContiguousFirst ? i / TK : i % TN;
      int64_t k = k0 + kk, n = n0 + nn;
      Bs[kk * SB + nn] = k < K && n < N ? loadB(k, n) : 0.0f;
    }
    __syncthreads();
    for (int kk = 0; kk < TK; ++kk) {
      float a[RM], b[RN];
      for (int r = 0; r < RM; ++r)
        a[r] = As[kk * SA + ty + r * TY];
      for (int c = 0; c < RN; ++c)
        b[c] = Bs[kk * SB + tx + c * TX];
      for (int r = 0; r < RM; ++r)
        for (int c = 0; c < RN; ++c)
          acc[r][c] = __fmaf_rn(a[r], b[c], acc[r][c]);
    }
    __syncthreads();
  }
  for (int r = 0; r < RM; ++r)
    for (int c = 0; c < RN; ++c) {
      int64_t m = m0 + ty + r * TY, n = n0 + tx + c * TX;
      if (m < M && n < N)
        store(m, n, acc[r][c]);
    }
}

/// Shared memory a tensor-core tile may take for its operands' stages and
/// its staged epilogue: at 36 KiB a block, an SM of sm_80 or later still
/// holds the two blocks the kernels' launch bounds ask for, and the
/// kernel's other arrays have the rest of the 48 KiB of static shared
/// memory.
constexpr int kTileSharedBytes = 36 * 1024;

/// The rows storeTileStaged stages at a time: the most that fit in
/// `words` floats of rows `stride` apart, a multiple of 16 (whole
/// fragments) that divides tm; 0 if not even 16 fit.
__host__ __device__ constexpr int stagedRows(int tm, int stride, int words) {
  for (int rows = tm - tm % 16; rows >= 16; rows -= 16)
    if (tm % rows == 0 && rows * stride <= words)
      return rows;
  return 0;
}

/// Words of shared memory for a tile whose operands take `operandWords`,
/// with its staged epilogue: the whole tile's outputs where that is more
/// and fits in kTileSharedBytes (one pass of the epilogue instead of
/// several), else the operands' own.
__host__ __device__ constexpr int sharedWordsWithEpilogue(int tm, int tn,
                                                          int operandWords) {
  const int whole = tm * (tn + 8);
  return whole > operandWords && whole * 4 <= kTileSharedBytes ? whole
                                                               : operandWords;
}

/// The epilogue of the tensor-core tiles: stores a TM x TN tile's outputs,
/// held by its warps as FM x FN m16n8 accumulator fragments (mma.cuh's
/// layout) at (wm, wn), fragment (i, j) rows wm + 16 i .. + 15 and columns
/// wn + 8 j .. + 7, by store(m, n, value) for each output inside M x N.
/// The fragments are written to `staged` (WORDS floats, free to reuse:
/// every thread of the block must be past its last read of them), as many
/// rows at a time as fit, and read back by a rolled loop in which
/// consecutive threads store consecutive columns of a row, four each. The
/// store's code is in the kernel four times instead of once per fragment
/// element (a quarter of a tensor-core GEMM kernel's compile time went to
/// its 32 inlined copies), and a warp's stores cover one to four rows
/// (tiles 128 to 32 wide) instead of eight. Ends with the block
/// synchronized.
template <int TM, int TN, int THREADS, int WORDS, int FM, int FN,
          typename Store>
MOEC_DEVICE void storeTileStaged(const float (&acc)[FM][FN][4],
                                 sptr<float> staged, int64_t m0, int64_t n0,
                                 int wm, int wn, int64_t M, int64_t N,
                                 const Store &store) {
  // A row stride of 8 mod 32 words puts the 16 lanes of each half warp's
  // float2 stores (rows g, columns 2 t) in 32 different banks.
  constexpr int STRIDE = TN + 8;
  static_assert(TN % 32 == 0 && TM % 16 == 0, "whole fragments");
  constexpr int ROWS = stagedRows(TM, STRIDE, WORDS);
  static_assert(ROWS > 0, "the staging buffer holds 16 rows at least");
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll 1
  for (int r0 = 0; r0 < TM; r0 += ROWS) {
    // Unrolled: acc is indexed by constants only.
#pragma unroll
    for (int i = 0; i < FM; ++i) {
      const int first = wm + i * 16 - r0; // the fragments' first row
      if (first < 0 || first >= ROWS)
        continue;
#pragma unroll
      for (int j = 0; j < FN; ++j) {
        sptr<float> at = staged + (first + g) * STRIDE + wn + j * 8 + 2 * t;
        storeShared2(at, acc[i][j][0], acc[i][j][1]);
        storeShared2(at + 8 * STRIDE, acc[i][j][2], acc[i][j][3]);
      }
    }
    __syncthreads();
    // Four columns a thread and iteration: one 16-byte shared load (a
    // quarter warp reads 128 contiguous bytes) and a quarter of the loop's
    // index arithmetic per output.
    constexpr int QUADS = TN / 4;
#pragma unroll 1
    for (int e = threadIdx.x; e < ROWS * QUADS; e += THREADS) {
      const int r = e / QUADS, c = e % QUADS * 4;
      const int64_t m = m0 + r0 + r, n = n0 + c;
      if (m >= M)
        continue;
      const float4 v = loadShared4(staged + r * STRIDE + c);
      const float quad[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int q = 0; q < 4; ++q)
        if (n + q < N)
          store(m, n + q, quad[q]);
    }
    __syncthreads();
  }
}

/// The cache row of token m of a decoding step: position past + m % S of
/// batch m / S in a cache of maxLen rows a batch. Called, not inlined: an
/// epilogue unrolled over a thread's outputs (gemmTile's) has a copy of
/// the store per output, and a 64-bit division in each copy made ptxas
/// take seconds.
MOEC_DEVICE_CALLED int64_t cacheRow(int64_t m, int64_t S, int64_t maxLen,
                                    int64_t past) {
  return m / S * maxLen + past + m % S;
}

/// gemmTile on the tensor cores: the same operands, outputs and store calls,
/// with A and B rounded to bf16 and multiplied by mma.m16n8k16 with fp32
/// accumulation. The 8 warps form a 2 x 4 grid over the tile; each owns
/// (TM / 32) x (TN / 32) fragments of 16 x 8. THREADS must be 256, TM and
/// TN multiples of 32, TK of 16.
template <int TM, int TN, int TK, int THREADS, typename LoadA, typename LoadB,
          typename Store>
MOEC_DEVICE void gemmTileBf16(int64_t m0, int64_t n0, int64_t M, int64_t N,
                              int64_t K, const LoadA &loadA,
                              const LoadB &loadB, const Store &store) {
  static_assert(THREADS == 256, "gemmTileBf16 uses 8 warps");
  static_assert(TM % 32 == 0 && TN % 32 == 0 && TK % 16 == 0,
                "tiles are multiples of 32 x 32 x 16");
  constexpr int WARPS_M = 2, WARPS_N = 4;
  constexpr int FM = TM / (16 * WARPS_M), FN = TN / (8 * WARPS_N);
  // Rows of k pairs, padded by 4 words so that the 8 x 4 lanes of a
  // fragment load hit 32 different banks.
  constexpr int PAIRS = TK / 2, STRIDE = PAIRS + 4;
  // One array, which the epilogue reuses.
  constexpr int WORDS = sharedWordsWithEpilogue(TM, TN, (TM + TN) * STRIDE);
  MOEC_SHARED(uint32_t, operands, WORDS);
  const sptr<uint32_t> As = operands, Bs = operands + TM * STRIDE;
  float acc[FM][FN][4];
  for (int i = 0; i < FM; ++i)
    for (int j = 0; j < FN; ++j)
      for (int r = 0; r < 4; ++r)
        acc[i][j][r] = 0.0f;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int wm = (warp / WARPS_N) * FM * 16, wn = (warp % WARPS_N) * FN * 8;

  for (int64_t k0 = 0; k0 < K; k0 += TK) {
    // Consecutive threads read consecutive addresses of each operand.
    for (int i = threadIdx.x; i < TM * PAIRS; i += THREADS) {
      int mm = LoadA::kContiguousFirst ? i % TM : i / PAIRS;
      int kp = LoadA::kContiguousFirst ? i / TM : i % PAIRS;
      int64_t m = m0 + mm, k = k0 + 2 * kp;
      float lo = m < M && k < K ? loadA(m, k) : 0.0f;
      float hi = m < M && k + 1 < K ? loadA(m, k + 1) : 0.0f;
      As[mm * STRIDE + kp] = packBf16(lo, hi);
    }
    for (int i = threadIdx.x; i < TN * PAIRS; i += THREADS) {
      int nn = LoadB::kContiguousFirst ? i / PAIRS : i % TN;
      int kp = LoadB::kContiguousFirst ? i % PAIRS : i / TN;
      int64_t k = k0 + 2 * kp, n = n0 + nn;
      float lo = k < K && n < N ? loadB(k, n) : 0.0f;
      float hi = k + 1 < K && n < N ? loadB(k + 1, n) : 0.0f;
      Bs[nn * STRIDE + kp] = packBf16(lo, hi);
    }
    __syncthreads();
    for (int kp0 = 0; kp0 < PAIRS; kp0 += 8) {
      uint32_t a[FM][4], b[FN][2];
      for (int i = 0; i < FM; ++i) {
        const int row = wm + i * 16 + g;
        a[i][0] = As[row * STRIDE + kp0 + t];
        a[i][1] = As[(row + 8) * STRIDE + kp0 + t];
        a[i][2] = As[row * STRIDE + kp0 + 4 + t];
        a[i][3] = As[(row + 8) * STRIDE + kp0 + 4 + t];
      }
      for (int j = 0; j < FN; ++j) {
        const int col = wn + j * 8 + g;
        b[j][0] = Bs[col * STRIDE + kp0 + t];
        b[j][1] = Bs[col * STRIDE + kp0 + 4 + t];
      }
      for (int i = 0; i < FM; ++i)
        for (int j = 0; j < FN; ++j)
          mma_m16n8k16_bf16(acc[i][j], a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  // The k loop ended with every warp done with the operands.
  storeTileStaged<TM, TN, THREADS, WORDS>(acc, sharedAs<float>(operands), m0,
                                          n0, wm, wn, M, N, store);
}

namespace detail {

/// One O x TK operand tile of gemmTileTf32 in shared memory (O along m for
/// A, along n for B), a 32-bit word per element. The dimension that is
/// contiguous in global memory is contiguous here too, so consecutive
/// threads store to consecutive banks. Rows along k are padded by 4 words
/// and rows along O by 8, so the 8 x 4 lanes of a fragment load (o = g,
/// k = t) hit 32 different banks: g (TK + 4) + t or t (O + 8) + g mod 32.
template <int O, int TK, bool O_CONTIGUOUS> struct Tf32Operand {
  static constexpr int STRIDE = O_CONTIGUOUS ? O + 8 : TK + 4;
  static constexpr int WORDS = (O_CONTIGUOUS ? TK : O) * STRIDE;
  static MOEC_DEVICE int at(int o, int k) {
    return O_CONTIGUOUS ? k * STRIDE + o : o * STRIDE + k;
  }
  /// The tile coordinates of the i-th element in global-memory order.
  static MOEC_DEVICE int oOf(int i) { return O_CONTIGUOUS ? i % O : i / TK; }
  static MOEC_DEVICE int kOf(int i) { return O_CONTIGUOUS ? i / O : i % TK; }
};

/// Splits fp32 words into tf32 halves: big = tf32(x), small = tf32(x -
/// big), so that big + small is x to about 2^-22 relative.
template <int N>
MOEC_DEVICE void splitTf32(uint32_t (&big)[N], uint32_t (&small)[N]) {
  for (int r = 0; r < N; ++r) {
    const float x = __uint_as_float(big[r]);
    big[r] = cvtRnaTf32(x);
    // Infinities have no small part (inf - inf would be NaN).
    const bool finite = (big[r] & 0x7f800000u) != 0x7f800000u;
    small[r] = finite ? cvtRnaTf32(x - __uint_as_float(big[r])) : 0u;
  }
}

/// gemmTileTf32 (SPLIT false) and gemmTile3xTf32 (SPLIT true).
template <int TM, int TN, int TK, int THREADS, bool SPLIT, typename LoadA,
          typename LoadB, typename Store>
MOEC_DEVICE void gemmTileTf32Impl(int64_t m0, int64_t n0, int64_t M,
                                  int64_t N, int64_t K, const LoadA &loadA,
                                  const LoadB &loadB, const Store &store) {
  static_assert(THREADS == 256, "gemmTileTf32 uses 8 warps");
  static_assert(TM % 32 == 0 && TN % 32 == 0 && TK % 8 == 0,
                "tiles are multiples of 32 x 32 x 8");
  constexpr int WARPS_M = 2, WARPS_N = 4;
  constexpr int FM = TM / (16 * WARPS_M), FN = TN / (8 * WARPS_N);
  using OpA = Tf32Operand<TM, TK, LoadA::kContiguousFirst>;
  using OpB = Tf32Operand<TN, TK, !LoadB::kContiguousFirst>;
  // tf32 words, or for SPLIT the fp32 values: each warp splits the
  // fragments it reads (half the shared memory of two stored halves).
  // One array, which the epilogue reuses.
  constexpr int WORDS =
      sharedWordsWithEpilogue(TM, TN, OpA::WORDS + OpB::WORDS);
  MOEC_SHARED(uint32_t, operands, WORDS);
  const sptr<uint32_t> As = operands, Bs = operands + OpA::WORDS;
  float acc[FM][FN][4];
  for (int i = 0; i < FM; ++i)
    for (int j = 0; j < FN; ++j)
      for (int r = 0; r < 4; ++r)
        acc[i][j][r] = 0.0f;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int wm = (warp / WARPS_N) * FM * 16, wn = (warp % WARPS_N) * FN * 8;
  const auto word = [](float v) -> uint32_t {
    if constexpr (SPLIT)
      return __float_as_uint(v);
    else
      return cvtRnaTf32(v);
  };

  for (int64_t k0 = 0; k0 < K; k0 += TK) {
    // Consecutive threads read consecutive addresses of each operand.
    for (int i = threadIdx.x; i < TM * TK; i += THREADS) {
      const int mm = OpA::oOf(i), kk = OpA::kOf(i);
      const int64_t m = m0 + mm, k = k0 + kk;
      As[OpA::at(mm, kk)] = word(m < M && k < K ? loadA(m, k) : 0.0f);
    }
    for (int i = threadIdx.x; i < TN * TK; i += THREADS) {
      const int nn = OpB::oOf(i), kk = OpB::kOf(i);
      const int64_t k = k0 + kk, n = n0 + nn;
      Bs[OpB::at(nn, kk)] = word(k < K && n < N ? loadB(k, n) : 0.0f);
    }
    __syncthreads();
    for (int kk = 0; kk < TK; kk += 8) {
      uint32_t a[FM][4], b[FN][2];
      for (int i = 0; i < FM; ++i) {
        const int row = wm + i * 16 + g;
        a[i][0] = As[OpA::at(row, kk + t)];
        a[i][1] = As[OpA::at(row + 8, kk + t)];
        a[i][2] = As[OpA::at(row, kk + t + 4)];
        a[i][3] = As[OpA::at(row + 8, kk + t + 4)];
      }
      for (int j = 0; j < FN; ++j) {
        const int col = wn + j * 8 + g;
        b[j][0] = Bs[OpB::at(col, kk + t)];
        b[j][1] = Bs[OpB::at(col, kk + t + 4)];
      }
      if constexpr (SPLIT) {
        uint32_t aSmall[FM][4], bSmall[FN][2];
        for (int i = 0; i < FM; ++i)
          splitTf32(a[i], aSmall[i]);
        for (int j = 0; j < FN; ++j)
          splitTf32(b[j], bSmall[j]);
        // The small products first: they are added before the large one
        // can absorb them.
        for (int i = 0; i < FM; ++i)
          for (int j = 0; j < FN; ++j) {
            mma_m16n8k8_tf32(acc[i][j], aSmall[i], b[j], acc[i][j]);
            mma_m16n8k8_tf32(acc[i][j], a[i], bSmall[j], acc[i][j]);
            mma_m16n8k8_tf32(acc[i][j], a[i], b[j], acc[i][j]);
          }
      } else {
        for (int i = 0; i < FM; ++i)
          for (int j = 0; j < FN; ++j)
            mma_m16n8k8_tf32(acc[i][j], a[i], b[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
  // The k loop ended with every warp done with the operands.
  storeTileStaged<TM, TN, THREADS, WORDS>(acc, sharedAs<float>(operands), m0,
                                          n0, wm, wn, M, N, store);
}

} // namespace detail

/// gemmTile on the tensor cores for f32 models that opt in to tf32: the
/// same operands, outputs and store calls, with A and B rounded to tf32
/// (10 fraction bits, to nearest) in padded shared memory and multiplied by
/// mma.m16n8k8.tf32 with fp32 accumulation in increasing k order. Each
/// product is off by up to 2^-10 relative. 8 warps in a 2 x 4 grid, as
/// gemmTileBf16; THREADS must be 256, TM and TN multiples of 32, TK of 8.
template <int TM, int TN, int TK, int THREADS, typename LoadA, typename LoadB,
          typename Store>
MOEC_DEVICE void gemmTileTf32(int64_t m0, int64_t n0, int64_t M, int64_t N,
                              int64_t K, const LoadA &loadA,
                              const LoadB &loadB, const Store &store) {
  detail::gemmTileTf32Impl<TM, TN, TK, THREADS, false>(m0, n0, M, N, K, loadA,
                                                       loadB, store);
}

/// gemmTileTf32 with 3xTF32 products: each operand x is split into big =
/// tf32(x) and small = tf32(x - big), and acc += small_a big_b + big_a
/// small_b + big_a big_b (three mma; small_a small_b, about 2^-22 relative,
/// is left out), which is about as accurate as gemmTile's fp32 FMA.
template <int TM, int TN, int TK, int THREADS, typename LoadA, typename LoadB,
          typename Store>
MOEC_DEVICE void gemmTile3xTf32(int64_t m0, int64_t n0, int64_t M, int64_t N,
                                int64_t K, const LoadA &loadA,
                                const LoadB &loadB, const Store &store) {
  detail::gemmTileTf32Impl<TM, TN, TK, THREADS, true>(m0, n0, M, N, K, loadA,
                                                      loadB, store);
}

namespace detail {

/// One operand of gemmTileBf16Async in shared memory: an O x KT tile (O
/// along m for A, along n for B) stored as rows of 16-byte chunks of the
/// dimension that is contiguous in global memory: rows along O when k is
/// contiguous (KMAJOR), else rows along k. Chunk c of row r sits at
/// position c ^ f(r) of its row, which puts the eight rows one ldmatrix
/// phase reads (same chunk, eight consecutive rows) in eight different
/// 16-byte bank groups: with 4 chunks per row two rows share a 128-byte
/// line, so f(r) = (r / 2) % 4; with 8 or more, f(r) = r % 8.
template <int O, int KT, bool KMAJOR, bool IS_B, int THREADS>
struct AsyncOperand {
  static constexpr int ROWS = KMAJOR ? O : KT;
  static constexpr int CPR = (KMAJOR ? KT : O) / 8; // chunks per row
  static constexpr int CHUNKS = ROWS * CPR;         // per stage
  static constexpr int PER_THREAD = (CHUNKS + THREADS - 1) / THREADS;
  static_assert(CPR == 4 || CPR % 8 == 0, "rows of 4 or 8n chunks");

  static MOEC_DEVICE int position(int r, int c) {
    return r * CPR + (CPR == 4 ? c ^ ((r >> 1) & 3) : c ^ (r & 7));
  }

  /// Starts the copies of the tile at (o0, k0) into `stage`; elements
  /// outside O < OL, k < K are zero-filled. With `chunked` every chunk
  /// starts on a 16-byte boundary and is copied by cp.async; without, its
  /// elements are read one by one through the loader (rows of any length
  /// or alignment, scaled gathers) and stored at once, in the same layout.
  template <typename Load>
  static MOEC_DEVICE void load(sptr<uint4> stage, const Load &loader,
                               int64_t o0, int64_t k0, int64_t OL, int64_t K,
                               bool chunked) {
    if (chunked)
      forEachChunk(o0, k0, OL, K, [&](const Chunk &at) {
        // Nothing is read for an empty chunk, but the address must be
        // valid.
        gptr<const bf16> src = at.valid == 0 ? loader.p
                               : IS_B        ? loader.address(at.k, at.o)
                                             : loader.address(at.o, at.k);
        cpAsync16(stage + position(at.r, at.ch), src,
                  static_cast<int>(at.valid) * 2);
      });
    else
      forEachChunk(o0, k0, OL, K, [&](const Chunk &at) {
        stage[position(at.r, at.ch)] = readChunk(loader, at);
      });
  }

  /// Chunk c of the tile at (o0, k0): its row and column in the stage, its
  /// first element (o, k) and how many of its 8 elements lie inside
  /// O < OL, k < K.
  struct Chunk {
    int r, ch;
    int64_t o, k, valid;
    MOEC_DEVICE Chunk(int c, int64_t o0, int64_t k0, int64_t OL, int64_t K)
        : r(c / CPR), ch(c % CPR), o(KMAJOR ? o0 + r : o0 + ch * 8),
          k(KMAJOR ? k0 + ch * 8 : k0 + r) {
      valid = KMAJOR ? (o < OL ? K - k : 0) : (k < K ? OL - o : 0);
      valid = valid < 0 ? 0 : valid > 8 ? 8 : valid;
    }
  };

  /// Runs f(chunk) for this thread's chunks of the tile at (o0, k0): c =
  /// threadIdx.x + i THREADS for i < PER_THREAD, a loop of a known trip
  /// count, which unrolls into that many copies and no more (a loop from
  /// threadIdx.x unrolled into remainder copies that cost ptxas time and
  /// registers).
  template <typename F>
  static MOEC_DEVICE void forEachChunk(int64_t o0, int64_t k0, int64_t OL,
                                       int64_t K, F &&f) {
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) {
      const int c = threadIdx.x + i * THREADS;
      if (CHUNKS % THREADS != 0 && c >= CHUNKS)
        break;
      f(Chunk(c, o0, k0, OL, K));
    }
  }

  /// A chunk read element by element: its valid elements along the
  /// contiguous dimension, zeros after them, as bf16 pairs in memory order.
  template <typename Load>
  static MOEC_DEVICE uint4 readChunk(const Load &loader, const Chunk &at) {
    float v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int64_t o = KMAJOR ? at.o : at.o + e;
      const int64_t k = KMAJOR ? at.k + e : at.k;
      v[e] = e >= at.valid ? 0.0f : IS_B ? loader(k, o) : loader(o, k);
    }
    return uint4{packBf16(v[0], v[1]), packBf16(v[2], v[3]),
                 packBf16(v[4], v[5]), packBf16(v[6], v[7])};
  }

  /// The fragment registers of the 16 (along O) x 16 (along k) block at
  /// (ob, kb): for A, a[0..3] of mma.m16n8k16; for B, b[0..1] of the n
  /// block at ob, then b[0..1] of the one at ob + 8.
  static MOEC_DEVICE void fragment(uint32_t (&d)[4], sptr<uint4> stage, int ob,
                                   int kb) {
    const int lane = threadIdx.x % 32, matrix = lane / 8, row = lane % 8;
    const int oHalf = IS_B ? matrix / 2 : matrix % 2;
    const int kHalf = IS_B ? matrix % 2 : matrix / 2;
    if constexpr (KMAJOR)
      ldmatrixX4(d, stage + position(ob + oHalf * 8 + row, kb / 8 + kHalf));
    else
      ldmatrixX4Trans(d,
                      stage + position(kb + kHalf * 8 + row, ob / 8 + oHalf));
  }
};

/// The warp grid of gemmTileBf16Async: 2 x 4 warps, or 4 x 2 for tiles
/// 32 wide, so that every warp owns whole 16 x 16 blocks.
template <int TN> struct AsyncWarps {
  static constexpr int N = TN % 64 == 0 ? 4 : 2, M = 8 / N;
};

/// Whether gemmTileBf16Async's pipeline applies to these loaders and tiles.
template <int TM, int TN, int THREADS, typename LoadA, typename LoadB>
struct AsyncTileFits {
  static constexpr int WM = AsyncWarps<TN>::M, WN = AsyncWarps<TN>::N;
  // Rows of chunks along m or n are 4 or 8n chunks long.
  static constexpr bool rowsFit(int o, bool kMajor) {
    return kMajor || o == 32 || o % 64 == 0;
  }
  static constexpr bool value =
      ChunkedLoad<LoadA>::value && ChunkedLoad<LoadB>::value &&
      THREADS == 256 && TM % (16 * WM) == 0 && TN % (16 * WN) == 0 &&
      rowsFit(TM, !LoadA::kContiguousFirst) &&
      rowsFit(TN, LoadB::kContiguousFirst);
};

/// The run-time half of gemmTileBf16Async's choice, for loaders that
/// AsyncTileFits accepts: whether chunks start on 16-byte boundaries, so
/// that cp.async copies them (else the pipeline reads them element by
/// element).
template <typename LoadA, typename LoadB>
MOEC_DEVICE bool asyncTileApplies(int64_t m0, int64_t n0, const LoadA &loadA,
                                  const LoadB &loadB) {
  return loadA.chunked() && loadB.chunked() && m0 % 8 == 0 && n0 % 8 == 0;
}

/// The pipeline of gemmTileBf16Async (see there); `chunked` is
/// asyncTileApplies.
template <int TM, int TN, int THREADS, typename LoadA, typename LoadB,
          typename Store>
MOEC_DEVICE void gemmTileBf16Pipelined(int64_t m0, int64_t n0, int64_t M,
                                       int64_t N, int64_t K,
                                       const LoadA &loadA, const LoadB &loadB,
                                       const Store &store, bool chunked) {
  constexpr int KT = 32;
  constexpr int WARPS_M = AsyncWarps<TN>::M, WARPS_N = AsyncWarps<TN>::N;
  constexpr int FM = TM / (16 * WARPS_M), FN = TN / (8 * WARPS_N);
  using OpA = AsyncOperand<TM, KT, !LoadA::kContiguousFirst, false, THREADS>;
  using OpB = AsyncOperand<TN, KT, LoadB::kContiguousFirst, true, THREADS>;
  // Three stages where they fit in kTileSharedBytes, else two.
  constexpr int STAGE_BYTES = (OpA::CHUNKS + OpB::CHUNKS) * 16;
  constexpr int STAGES = 3 * STAGE_BYTES <= kTileSharedBytes ? 3 : 2;
  // One array, so that the epilogue can reuse all of it.
  constexpr int CHUNKS = STAGES * (OpA::CHUNKS + OpB::CHUNKS);
  MOEC_SHARED(uint4, stages, CHUNKS);
  const sptr<uint4> As = stages, Bs = stages + STAGES * OpA::CHUNKS;
  float acc[FM][FN][4];
  for (int i = 0; i < FM; ++i)
    for (int j = 0; j < FN; ++j)
      for (int r = 0; r < 4; ++r)
        acc[i][j][r] = 0.0f;
  const int warp = threadIdx.x / 32;
  const int wm = (warp / WARPS_N) * FM * 16, wn = (warp % WARPS_N) * FN * 8;
  const int tiles = static_cast<int>((K + KT - 1) / KT);
  const auto startTile = [&](int kt) {
    const int s = kt % STAGES;
    OpA::load(As + s * OpA::CHUNKS, loadA, m0, int64_t(kt) * KT, M, K,
              chunked);
    OpB::load(Bs + s * OpB::CHUNKS, loadB, n0, int64_t(kt) * KT, N, K,
              chunked);
  };

  // One commit group per k tile, empty past the end, so that waiting for
  // all but the newest STAGES - 2 groups means tile kt has landed. The
  // first STAGES - 1 rounds only start copies: one loop, so that the
  // loads' code (both paths) is in the kernel once, not also in a prologue.
#pragma unroll 1
  for (int kt = 1 - STAGES; kt < tiles; ++kt) {
    if (kt >= 0) {
      cpAsyncWait<STAGES - 2>();
      // Tile kt is visible to all, and every warp is done with tile
      // kt - 1, whose stage the next copies overwrite.
      __syncthreads();
    }
    if (kt + STAGES - 1 < tiles)
      startTile(kt + STAGES - 1);
    cpAsyncCommit();
    if (kt < 0)
      continue;
    const int s = kt % STAGES;
    for (int kk = 0; kk < KT; kk += 16) {
      uint32_t a[FM][4], b[FN][2];
      for (int i = 0; i < FM; ++i)
        OpA::fragment(a[i], As + s * OpA::CHUNKS, wm + i * 16, kk);
      for (int j = 0; j < FN; j += 2) {
        uint32_t pair[4];
        OpB::fragment(pair, Bs + s * OpB::CHUNKS, wn + j * 8, kk);
        b[j][0] = pair[0];
        b[j][1] = pair[1];
        b[j + 1][0] = pair[2];
        b[j + 1][1] = pair[3];
      }
      for (int i = 0; i < FM; ++i)
        for (int j = 0; j < FN; ++j)
          mma_m16n8k16_bf16(acc[i][j], a[i], b[j], acc[i][j]);
    }
  }
  // Every warp is done with the stages: the epilogue stages its outputs
  // there.
  __syncthreads();
  storeTileStaged<TM, TN, THREADS, CHUNKS * 4>(acc, sharedAs<float>(stages), m0,
                                               n0, wm, wn, M, N, store);
}

} // namespace detail

/// gemmTileBf16 with the operands streamed through shared memory by a
/// cp.async pipeline of k tiles of 32 (three stages, or two for the largest
/// tiles), read into fragments by ldmatrix from XOR-swizzled rows of
/// 16-byte chunks (no bank conflicts, no padding), and multiplied by
/// mma.m16n8k16 in fp32, in increasing k order: the same outputs and store
/// calls. It takes loaders of bf16 in memory (RowMajor, ColMajor,
/// GatherRows, GatherCols); cp.async copies their chunks where the base
/// pointers are 16-byte aligned, the leading dimensions a multiple of 8,
/// (m0, n0) multiples of 8 and a gather unscaled, and otherwise the same
/// pipeline reads them element by element. One mainloop and one epilogue
/// either way: a second tile for the unaligned case made each GEMM kernel
/// take a fifth longer to compile. Other loaders run gemmTileBf16.
template <int TM, int TN, int TK, int THREADS, typename LoadA, typename LoadB,
          typename Store>
MOEC_DEVICE void gemmTileBf16Async(int64_t m0, int64_t n0, int64_t M,
                                   int64_t N, int64_t K, const LoadA &loadA,
                                   const LoadB &loadB, const Store &store) {
  if constexpr (detail::AsyncTileFits<TM, TN, THREADS, LoadA, LoadB>::value)
    // The check gives every thread of the block the same answer.
    detail::gemmTileBf16Pipelined<TM, TN, THREADS>(
        m0, n0, M, N, K, loadA, loadB, store,
        detail::asyncTileApplies(m0, n0, loadA, loadB));
  else
    gemmTileBf16<TM, TN, TK, THREADS>(m0, n0, M, N, K, loadA, loadB, store);
}

/// The most rows gemmRows takes: a decoding step's products have one row a
/// sequence, and a tile of 64 or 128 rows would waste all but these.
constexpr int64_t kGemmRowsMax = 8;

/// How gemmRows rounds its operands: as the tile it stands in for does
/// (gemmTileBf16 to bf16, gemmTileTf32 to tf32; gemmTile and
/// gemmTile3xTf32 keep fp32), so that both compute the same products.
enum class RowsRounding { Fp32, Bf16, Tf32 };

namespace detail {

template <RowsRounding R> MOEC_DEVICE float roundOperand(float v) {
  if constexpr (R == RowsRounding::Bf16)
    return static_cast<float>(bf16(v));
  else if constexpr (R == RowsRounding::Tf32)
    return __uint_as_float(cvtRnaTf32(v));
  else
    return v;
}

/// gemmRows' inner loop: acc[r][c] = the sum over k = k0, k0 + step, ...
/// below K of A(r, k) B(k, column(c)), in that order, with the operands
/// rounded as `R` says. Rows at or past M and columns at or past N count 0.
template <int COLS, RowsRounding R, typename LoadA, typename LoadB,
          typename Column>
MOEC_DEVICE void accumulateRows(float (&acc)[kGemmRowsMax][COLS], int64_t k0,
                                int64_t step, int64_t M, int64_t N, int64_t K,
                                const LoadA &loadA, const LoadB &loadB,
                                const Column &column) {
  for (int r = 0; r < kGemmRowsMax; ++r)
    for (int c = 0; c < COLS; ++c)
      acc[r][c] = 0.0f;
  for (int64_t k = k0; k < K; k += step) {
    float x[kGemmRowsMax];
    for (int r = 0; r < kGemmRowsMax; ++r)
      x[r] = r < M ? roundOperand<R>(loadA(r, k)) : 0.0f;
    for (int c = 0; c < COLS; ++c) {
      const int64_t n = column(c);
      const float w = n < N ? roundOperand<R>(loadB(k, n)) : 0.0f;
      for (int r = 0; r < kGemmRowsMax; ++r)
        acc[r][c] = __fmaf_rn(x[r], w, acc[r][c]);
    }
  }
}

} // namespace detail

/// C = A B for at most kGemmRowsMax rows (all of them: m0 is 0), the block's
/// TN columns from n0, with the loaders and store calls of the tiles: a
/// matrix-vector product that reads B once, streaming it along its
/// contiguous dimension, without the tiles' shared-memory stages and their
/// barriers. Where B's columns are contiguous (k-major: a transposed
/// weight) each warp owns TN / 8 columns and its lanes split k, summed by a
/// butterfly; else the lanes own the columns and the 8 warps split k,
/// summed in warp order through shared memory. Each output's sum has a
/// fixed order: results are deterministic, in fp32 from operands rounded
/// as `R` says. THREADS must be 256, TN a multiple of 32.
template <int TN, int THREADS, RowsRounding R, typename LoadA, typename LoadB,
          typename Store>
MOEC_DEVICE void gemmRows(int64_t n0, int64_t M, int64_t N, int64_t K,
                          const LoadA &loadA, const LoadB &loadB,
                          const Store &store) {
  static_assert(THREADS == 256, "gemmRows uses 8 warps");
  static_assert(TN % 32 == 0 && TN <= 256,
                "gemmRows takes tiles of whole warps, at most a lane a "
                "column per warp");
  constexpr int WARPS = THREADS / 32, ROWS = static_cast<int>(kGemmRowsMax);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if constexpr (LoadB::kContiguousFirst) {
    constexpr int COLS = TN / WARPS;
    const auto column = [&](int c) -> int64_t { return n0 + warp + WARPS * c; };
    float acc[ROWS][COLS];
    detail::accumulateRows<COLS, R>(acc, lane, 32, M, N, K, loadA, loadB,
                                    column);
    // Constant bounds, so that the accumulators stay in registers (a loop
    // to M indexed them at run time: a stack frame).
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
      for (int c = 0; c < COLS; ++c)
        if (r < M) {
          const float sum = warpSum(acc[r][c]);
          const int64_t n = column(c);
          if (lane == c && n < N)
            store(r, n, sum);
        }
  } else {
    constexpr int COLS = TN / 32;
    MOEC_SHARED(float, sums, ROWS * TN);
    const auto column = [&](int c) -> int64_t { return n0 + lane + 32 * c; };
    float acc[ROWS][COLS];
    detail::accumulateRows<COLS, R>(acc, warp, WARPS, M, N, K, loadA, loadB,
                                    column);
    // The warps add their partial sums in turn, warp 0 first.
    for (int w = 0; w < WARPS; ++w) {
      if (warp == w)
        for (int r = 0; r < ROWS; ++r)
          for (int c = 0; c < COLS; ++c) {
            const int i = r * TN + lane + 32 * c;
            sums[i] = w == 0 ? acc[r][c] : sums[i] + acc[r][c];
          }
      __syncthreads();
    }
    for (int i = threadIdx.x; i < ROWS * TN; i += THREADS) {
      const int64_t m = i / TN, n = n0 + i % TN;
      if (m < M && n < N)
        store(m, n, sums[i]);
    }
  }
}

} // namespace moec

#endif // MOEC_DEVICE_GEMM_CUH
