//===- norm.cuh - layer and RMS norms ---------------------------*- CUDA -*-===//
//
// One warp per row: the row's D values live in registers (D / 32 per lane),
// statistics come from xor-butterfly warp sums (a fixed order). The input
// is read through a functor, so a residual add fuses in front of the norm.
// f32 rows whose width is a multiple of 4 move four columns per 16-byte
// access when their buffers are aligned (normRows4; the gradient checks
// for itself), gamma and beta too when they are f32 and aligned: lane l
// then holds columns 4 (l + 32 j) .. + 3, so the sums run in another fixed
// order than the scalar kernels'.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_NORM_CUH
#define MOEC_DEVICE_NORM_CUH

namespace moec {

/// The row this warp works on: warp w of block b takes row b R + w.
template <int RowsPerBlock> MOEC_DEVICE int64_t warpRow() {
  return static_cast<int64_t>(blockIdx.x) * RowsPerBlock + threadIdx.x / 32;
}

/// y = norm(x) * gamma (+ beta) for rows [blockIdx.x * RowsPerBlock, ...),
/// one warp per row. `loadX(row, col)` returns x; `store(row, col, y)`.
template <int D, bool Rms, int RowsPerBlock, typename G, typename LoadX,
          typename Store>
MOEC_DEVICE void normRows(int64_t rows, float eps, const LoadX &loadX,
                          gptr<const G> gamma, gptr<const G> beta,
                          const Store &store) {
  constexpr int kPer = (D + 31) / 32;
  const int lane = threadIdx.x % 32;
  const int64_t row = warpRow<RowsPerBlock>();
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

namespace detail {

template <typename T> struct IsFloat {
  static constexpr bool value = false;
};
template <> struct IsFloat<float> {
  static constexpr bool value = true;
};

MOEC_DEVICE float sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

/// Column c of a float4 (c in 0..3).
MOEC_DEVICE float &lane4(float4 &v, int c) {
  return c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w;
}

/// Columns 4q .. 4q + 3 of a parameter row (gamma, beta): one 16-byte load
/// where the row is f32 and aligned, else four.
template <typename G> MOEC_DEVICE float4 params4(gptr<const G> p, int q) {
  if constexpr (IsFloat<G>::value) {
    if (aligned16(p))
      return load4(p, q);
  }
  return make_float4(toFloat(p[4 * q]), toFloat(p[4 * q + 1]),
                     toFloat(p[4 * q + 2]), toFloat(p[4 * q + 3]));
}

} // namespace detail

/// normRows for f32 rows of D % 4 == 0 columns, four at a time:
/// `loadX4(row, q)` returns columns 4q .. 4q + 3 of x, `store4(row, q, y)`
/// writes them (the caller checked that its buffers are 16-byte aligned).
template <int D, bool Rms, int RowsPerBlock, typename G, typename LoadX4,
          typename Store4>
MOEC_DEVICE void normRows4(int64_t rows, float eps, const LoadX4 &loadX4,
                           gptr<const G> gamma, gptr<const G> beta,
                           const Store4 &store4) {
  static_assert(D % 4 == 0, "four columns at a time");
  constexpr int Q = D / 4, kPer = (Q + 31) / 32;
  const int lane = threadIdx.x % 32;
  const int64_t row = warpRow<RowsPerBlock>();
  if (row >= rows)
    return; // the whole warp leaves together
  float4 v[kPer];
  float sum = 0.0f;
  for (int j = 0; j < kPer; ++j) {
    const int q = lane + 32 * j;
    v[j] = q < Q ? loadX4(row, q) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    sum += detail::sum4(v[j]);
  }
  const float mean = Rms ? 0.0f : warpSum(sum) / D;
  float sq = 0.0f;
  for (int j = 0; j < kPer; ++j) {
    if (lane + 32 * j >= Q)
      continue;
    for (int c = 0; c < 4; ++c) {
      const float d = detail::lane4(v[j], c) - mean;
      sq += d * d;
    }
  }
  const float r = 1.0f / sqrtf(warpSum(sq) / D + eps);
  for (int j = 0; j < kPer; ++j) {
    const int q = lane + 32 * j;
    if (q >= Q)
      continue;
    float4 y, g = detail::params4(gamma, q);
    float4 b = Rms ? make_float4(0.0f, 0.0f, 0.0f, 0.0f)
                   : detail::params4(beta, q);
    for (int c = 0; c < 4; ++c) {
      float out = (detail::lane4(v[j], c) - mean) * r * detail::lane4(g, c);
      if (!Rms)
        out += detail::lane4(b, c);
      detail::lane4(y, c) = out;
    }
    store4(row, q, y);
  }
}

namespace detail {

/// normGradRows' row `row` for f32 rows of D % 4 == 0 columns, four at a
/// time (x, dy, dx and contrib 16-byte aligned).
template <int D, bool Rms>
MOEC_DEVICE void normGradRow4(int64_t row, float eps, gptr<const float> x,
                              gptr<const float> gamma, gptr<const float> dy,
                              gptr<float> dx, gptr<float> contrib) {
  constexpr int Q = D / 4, kPer = (Q + 31) / 32;
  const int lane = threadIdx.x % 32;
  const int64_t base = row * Q;
  float4 v[kPer], g[kPer];
  float sum = 0.0f;
  for (int j = 0; j < kPer; ++j) {
    const int q = lane + 32 * j;
    v[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    g[j] = v[j];
    if (q >= Q)
      continue;
    v[j] = load4(x, base + q);
    g[j] = load4(dy, base + q);
    float4 gm = params4(gamma, q);
    for (int c = 0; c < 4; ++c)
      lane4(g[j], c) *= lane4(gm, c);
    sum += sum4(v[j]);
  }
  const float mean = Rms ? 0.0f : warpSum(sum) / D;
  float sq = 0.0f;
  for (int j = 0; j < kPer; ++j) {
    if (lane + 32 * j >= Q)
      continue;
    for (int c = 0; c < 4; ++c) {
      const float d = lane4(v[j], c) - mean;
      sq += d * d;
    }
  }
  const float r = 1.0f / sqrtf(warpSum(sq) / D + eps);
  float gSum = 0.0f, gxSum = 0.0f;
  for (int j = 0; j < kPer; ++j) {
    if (lane + 32 * j >= Q)
      continue;
    for (int c = 0; c < 4; ++c) {
      const float xh = (lane4(v[j], c) - mean) * r;
      gSum += lane4(g[j], c);
      gxSum += lane4(g[j], c) * xh;
    }
  }
  const float gMean = Rms ? 0.0f : warpSum(gSum) / D;
  const float gxMean = warpSum(gxSum) / D;
  for (int j = 0; j < kPer; ++j) {
    const int q = lane + 32 * j;
    if (q >= Q)
      continue;
    float4 out, c4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (contrib)
      c4 = load4(dy, base + q);
    for (int c = 0; c < 4; ++c) {
      const float xh = (lane4(v[j], c) - mean) * r;
      lane4(out, c) = r * (lane4(g[j], c) - gMean - xh * gxMean);
      lane4(c4, c) *= xh;
    }
    store4(dx, base + q, out);
    if (contrib)
      store4(contrib, base + q, c4);
  }
}

} // namespace detail

/// The row part of the norm gradient: dx for each row, and the per-row
/// contribution to dgamma (dy * x_hat) into `contrib` for columnSums.
template <int D, bool Rms, int RowsPerBlock, typename T>
MOEC_DEVICE void normGradRows(int64_t rows, float eps, gptr<const T> x,
                              gptr<const T> gamma, gptr<const T> dy,
                              gptr<T> dx, gptr<float> contrib) {
  constexpr int kPer = (D + 31) / 32;
  const int lane = threadIdx.x % 32;
  const int64_t row = warpRow<RowsPerBlock>();
  if (row >= rows)
    return; // the whole warp leaves together
  const int64_t base = row * D;
  if constexpr (D % 4 == 0 && detail::IsFloat<T>::value) {
    if (aligned16(x, dy, dx) && (!contrib || aligned16(contrib))) {
      detail::normGradRow4<D, Rms>(row, eps, x, gamma, dy, dx, contrib);
      return;
    }
  }
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
