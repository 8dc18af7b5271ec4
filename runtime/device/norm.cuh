//===- norm.cuh - layer and RMS norms ---------------------------*- CUDA -*-===//
//
// One warp per row: the row's D values live in registers (D / 32 per lane),
// statistics come from xor-butterfly warp sums (a fixed order). The input
// is read through a functor, so a residual add fuses in front of the norm.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_NORM_CUH
#define MOEC_DEVICE_NORM_CUH

namespace moec {

/// y = norm(x) * gamma (+ beta) for rows [blockIdx.x * RowsPerBlock, ...),
/// one warp per row. `loadX(row, col)` returns x; `store(row, col, y)`.
template <int D, bool Rms, int RowsPerBlock, typename G, typename LoadX,
          typename Store>
MOEC_DEVICE void normRows(int64_t rows, float eps, const LoadX &loadX,
                          gptr<const G> gamma, gptr<const G> beta,
                          const Store &store) {
  constexpr int kPer = (D + 31) / 32;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * RowsPerBlock + warp;
  if (row >= rows)
    return; // the whole warp leaves together
  float v[kPer];
  float sum = 0.0f;
  for (int j = 0; j < kPer; ++j) {
    int c = lane + 32 * j;
    v[j] = c < D ? loadX(row, c) : 0.0f;
    sum += v[j];
  }
  const float mean = Rms ? 0.0f : warpSum(sum) / D;
  float sq = 0.0f;
  for (int j = 0; j < kPer; ++j) {
    int c = lane + 32 * j;
    float d = c < D ? v[j] - mean : 0.0f;
    sq += d * d;
  }
  const float r = 1.0f / sqrtf(warpSum(sq) / D + eps);
  for (int j = 0; j < kPer; ++j) {
    int c = lane + 32 * j;
    if (c < D) {
      float y = (v[j] - mean) * r * toFloat(gamma[c]);
      if (!Rms)
        y += toFloat(beta[c]);
      store(row, c, y);
    }
  }
}

/// The row part of the norm gradient: dx for each row, and the per-row
/// contribution to dgamma (dy * x_hat) into `contrib` for columnSums.
template <int D, bool Rms, int RowsPerBlock, typename T>
MOEC_DEVICE void normGradRows(int64_t rows, float eps, gptr<const T> x,
                              gptr<const T> gamma, gptr<const T> dy,
                              gptr<T> dx, gptr<float> contrib) {
  constexpr int kPer = (D + 31) / 32;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * RowsPerBlock + warp;
  if (row >= rows)
    return;
  const int64_t base = row * D;
  float v[kPer], g[kPer];
  float sum = 0.0f;
  for (int j = 0; j < kPer; ++j) {
    int c = lane + 32 * j;
    v[j] = c < D ? toFloat(x[base + c]) : 0.0f;
    g[j] = c < D ? toFloat(dy[base + c]) * toFloat(gamma[c]) : 0.0f;
    sum += v[j];
  }
  const float mean = Rms ? 0.0f : warpSum(sum) / D;
  float sq = 0.0f;
  for (int j = 0; j < kPer; ++j) {
    int c = lane + 32 * j;
    float d = c < D ? v[j] - mean : 0.0f;
    sq += d * d;
  }
  const float r = 1.0f / sqrtf(warpSum(sq) / D + eps);
  float gSum = 0.0f, gxSum = 0.0f;
  for (int j = 0; j < kPer; ++j) {
    int c = lane + 32 * j;
    if (c < D) {
      float xh = (v[j] - mean) * r;
      gSum += g[j];
      gxSum += g[j] * xh;
    }
  }
  const float gMean = Rms ? 0.0f : warpSum(gSum) / D;
  const float gxMean = warpSum(gxSum) / D;
  for (int j = 0; j < kPer; ++j) {
    int c = lane + 32 * j;
    if (c < D) {
      float xh = (v[j] - mean) * r;
      // layer: r (g - mean(g) - xh mean(g xh)); rms: r g - xh r mean(g xh)
      dx[base + c] = r * (g[j] - gMean - xh * gxMean);
      if (contrib)
        contrib[base + c] = toFloat(dy[base + c]) * xh;
    }
  }
}

} // namespace moec

#endif // MOEC_DEVICE_NORM_CUH
