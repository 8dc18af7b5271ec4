//===- gemm.cuh - tiled matrix products -------------------------*- CUDA -*-===//
//
// One block computes a TM x TN tile of C = A B with A(m, k) and B(k, n)
// read through loader functors, so the same code multiplies row-major,
// transposed and gathered (expert) operands, and hands every output to a
// store functor that applies the fused epilogue. Each output is accumulated
// by one thread over k in increasing order: no split-K, so results are
// deterministic. gemmTile multiplies with fp32 FMA; gemmTileBf16, for bf16
// models, rounds the operands to bf16 in shared memory and multiplies on
// the tensor cores (mma.cuh), accumulating in fp32.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_GEMM_CUH
#define MOEC_DEVICE_GEMM_CUH

namespace moec {

/// A(m, k) = p[m * ld + k]: k is contiguous.
template <typename T> struct RowMajor {
  gptr<const T> p;
  int64_t ld;
  static constexpr bool kContiguousFirst = false;
  MOEC_DEVICE float operator()(int64_t i, int64_t j) const {
    return static_cast<float>(p[i * ld + j]);
  }
};

/// A(m, k) = p[k * ld + m]: the transposed view; m is contiguous.
template <typename T> struct ColMajor {
  gptr<const T> p;
  int64_t ld;
  static constexpr bool kContiguousFirst = true;
  MOEC_DEVICE float operator()(int64_t i, int64_t j) const {
    return static_cast<float>(p[j * ld + i]);
  }
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
  MOEC_SHARED(float, As, TK * TM);
  MOEC_SHARED(float, Bs, TK * TN);
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
      As[kk * TM + mm] = m < M && k < K ? loadA(m, k) : 0.0f;
    }
    for (int i = threadIdx.x; i < TN * TK; i += THREADS) {
      int kk = LoadB::kContiguousFirst ? i % TK : i / TN;
      int nn = LoadB::kContiguousFirst ? i / TK : i % TN;
      int64_t k = k0 + kk, n = n0 + nn;
      Bs[kk * TN + nn] = k < K && n < N ? loadB(k, n) : 0.0f;
    }
    __syncthreads();
    for (int kk = 0; kk < TK; ++kk) {
      float a[RM], b[RN];
      for (int r = 0; r < RM; ++r)
        a[r] = As[kk * TM + ty + r * TY];
      for (int c = 0; c < RN; ++c)
        b[c] = Bs[kk * TN + tx + c * TX];
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

/// Two bf16 in one register, `lo` in the low half: an mma operand pair.
MOEC_DEVICE uint32_t packBf16(float lo, float hi) {
  return static_cast<uint32_t>(bf16(lo).bits) |
         static_cast<uint32_t>(bf16(hi).bits) << 16;
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
  MOEC_SHARED(uint32_t, As, TM * STRIDE);
  MOEC_SHARED(uint32_t, Bs, TN * STRIDE);
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
  for (int i = 0; i < FM; ++i)
    for (int j = 0; j < FN; ++j)
      for (int r = 0; r < 4; ++r) {
        int64_t m = m0 + wm + i * 16 + g + (r / 2) * 8;
        int64_t n = n0 + wn + j * 8 + 2 * t + r % 2;
        if (m < M && n < N)
          store(m, n, acc[i][j][r]);
      }
}

} // namespace moec

#endif // MOEC_DEVICE_GEMM_CUH
