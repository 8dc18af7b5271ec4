//===- gemm.cuh - tiled matrix products -------------------------*- CUDA -*-===//
//
// One block computes a TM x TN tile of C = A B with A(m, k) and B(k, n)
// read through loader functors, so the same code multiplies row-major,
// transposed and gathered (expert) operands, and hands every output to a
// store functor that applies the fused epilogue. Each output is accumulated
// by one thread over k in increasing order: no split-K, so results are
// deterministic. fp32 FMA throughout (the bf16 path uses mma.cuh).
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

} // namespace moec

#endif // MOEC_DEVICE_GEMM_CUH
