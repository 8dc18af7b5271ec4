//===- norm.cuh - layer and RMS norms --------------------------*- CUDA -*-===//
//
// One warp per row: the row's D values live in registers (D / 32 per lane),
// statistics come from xor-butterfly warp sums (a fixed order). The input
// is read through a functor, so a residual add fuses in front of the norm.
// When their buffers are aligned, f32 rows whose width is a multiple of 4
// move four columns per 16-byte access and bf16 rows whose width is a
// multiple of 8 move eight (normRowsVector; the gradient checks for
// itself), gamma and beta too where aligned: lane l then holds the W
// columns from W (l + 32 j) on, so the sums run in another fixed order than
// the scalar kernels'.
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
template <typename T> struct IsBf16 {
  static constexpr bool value = false;
};
template <> struct IsBf16<bf16> {
  static constexpr bool value = true;
};

MOEC_DEVICE float sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

/// Column c of a float4 (c in 0..3).
MOEC_DEVICE float &lane4(float4 &v, int c) {
  return c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w;
}

/// The vectors of normRowsVector: a float4 (f32 rows) or a float8 (bf16
/// rows), with Width columns, column c of it and their sum. at() picks a
/// member by c: loops over c and over a lane's vectors are unrolled, or
/// the vectors go to the stack.
template <typename V> struct Vector;
template <> struct Vector<float4> {
  static constexpr int Width = 4;
  MOEC_DEVICE static float &at(float4 &v, int c) { return lane4(v, c); }
  MOEC_DEVICE static float sum(float4 v) { return sum4(v); }
  MOEC_DEVICE static float4 zero() {
    return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
};
template <> struct Vector<float8> {
  static constexpr int Width = 8;
  MOEC_DEVICE static float &at(float8 &v, int c) {
    return c < 4 ? lane4(v.lo, c) : lane4(v.hi, c - 4);
  }
  MOEC_DEVICE static float sum(float8 v) { return sum4(v.lo) + sum4(v.hi); }
  MOEC_DEVICE static float8 zero() {
    return {Vector<float4>::zero(), Vector<float4>::zero()};
  }
};

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

/// Columns W q .. W q + W - 1 of a parameter row as the vector V.
template <typename V, typename G>
MOEC_DEVICE V paramsVector(gptr<const G> p, int q) {
  if constexpr (Vector<V>::Width == 4) {
    return params4(p, q);
  } else {
    if constexpr (IsBf16<G>::value) {
      if (aligned16(p))
        return load8(p, q);
    }
    return {params4(p, 2 * q), params4(p, 2 * q + 1)};
  }
}

} // namespace detail

/// normRows for rows whose buffers are all f32 (D % 4 == 0) or all bf16
/// (D % 8 == 0), a 16-byte vector at a time: `loadV(row, q)` returns the
/// vector q of x (a float4 of columns 4q .. 4q + 3, or a float8 of
/// 8q .. 8q + 7), `storeV(row, q, y)` writes it (the caller checked that
/// its buffers are 16-byte aligned).
template <int D, bool Rms, int RowsPerBlock, typename G, typename LoadV,
          typename StoreV>
MOEC_DEVICE void normRowsVector(int64_t rows, float eps, const LoadV &loadV,
                                gptr<const G> gamma, gptr<const G> beta,
                                const StoreV &storeV) {
  using V = decltype(loadV(int64_t(0), 0));
  using Vec = detail::Vector<V>;
  static_assert(D % Vec::Width == 0, "whole vectors");
  constexpr int Q = D / Vec::Width, kPer = (Q + 31) / 32;
  const int lane = threadIdx.x % 32;
  const int64_t row = warpRow<RowsPerBlock>();
  if (row >= rows)
    return; // the whole warp leaves together
  V v[kPer];
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int q = lane + 32 * j;
    v[j] = q < Q ? loadV(row, q) : Vec::zero();
    sum += Vec::sum(v[j]);
  }
  const float mean = Rms ? 0.0f : warpSum(sum) / D;
  float sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    if (lane + 32 * j >= Q)
      continue;
#pragma unroll
    for (int c = 0; c < Vec::Width; ++c) {
      const float d = Vec::at(v[j], c) - mean;
      sq += d * d;
    }
  }
  const float r = 1.0f / sqrtf(warpSum(sq) / D + eps);
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int q = lane + 32 * j;
    if (q >= Q)
      continue;
    V y, g = detail::paramsVector<V>(gamma, q);
    V b = Rms ? Vec::zero() : detail::paramsVector<V>(beta, q);
#pragma unroll
    for (int c = 0; c < Vec::Width; ++c) {
      float out = (Vec::at(v[j], c) - mean) * r * Vec::at(g, c);
      if (!Rms)
        out += Vec::at(b, c);
      Vec::at(y, c) = out;
    }
    storeV(row, q, y);
  }
}

namespace detail {

/// Vector q of an f32 (4 columns) or bf16 (8 columns) row, and back.
MOEC_DEVICE float4 loadVector(gptr<const float> x, int64_t q) {
  return load4(x, q);
}
MOEC_DEVICE float8 loadVector(gptr<const bf16> x, int64_t q) {
  return load8(x, q);
}
MOEC_DEVICE void storeVector(gptr<float> x, int64_t q, float4 v) {
  store4(x, q, v);
}
MOEC_DEVICE void storeVector(gptr<bf16> x, int64_t q, const float8 &v) {
  store8(x, q, v);
}
/// Vector q of an f32 row whatever the vector's width.
MOEC_DEVICE void storeFloats(gptr<float> x, int64_t q, float4 v) {
  store4(x, q, v);
}
MOEC_DEVICE void storeFloats(gptr<float> x, int64_t q, const float8 &v) {
  store4(x, 2 * q, v.lo);
  store4(x, 2 * q + 1, v.hi);
}

/// normGradRows' row `row`, a 16-byte vector at a time: f32 rows of
/// D % 4 == 0 columns or bf16 rows of D % 8 == 0 (x, dy, dx and contrib
/// 16-byte aligned).
template <int D, bool Rms, typename T>
MOEC_DEVICE void normGradRowVector(int64_t row, float eps, gptr<const T> x,
                                   gptr<const T> gamma, gptr<const T> dy,
                                   gptr<T> dx, gptr<float> contrib) {
  using V = decltype(loadVector(x, 0));
  using Vec = Vector<V>;
  constexpr int Q = D / Vec::Width, kPer = (Q + 31) / 32;
  const int lane = threadIdx.x % 32;
  const int64_t base = row * Q;
  V v[kPer], g[kPer];
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int q = lane + 32 * j;
    v[j] = Vec::zero();
    g[j] = v[j];
    if (q >= Q)
      continue;
    v[j] = loadVector(x, base + q);
    g[j] = loadVector(dy, base + q);
    V gm = paramsVector<V>(gamma, q);
#pragma unroll
    for (int c = 0; c < Vec::Width; ++c)
      Vec::at(g[j], c) *= Vec::at(gm, c);
    sum += Vec::sum(v[j]);
  }
  const float mean = Rms ? 0.0f : warpSum(sum) / D;
  float sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    if (lane + 32 * j >= Q)
      continue;
#pragma unroll
    for (int c = 0; c < Vec::Width; ++c) {
      const float d = Vec::at(v[j], c) - mean;
      sq += d * d;
    }
  }
  const float r = 1.0f / sqrtf(warpSum(sq) / D + eps);
  float gSum = 0.0f, gxSum = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    if (lane + 32 * j >= Q)
      continue;
#pragma unroll
    for (int c = 0; c < Vec::Width; ++c) {
      const float xh = (Vec::at(v[j], c) - mean) * r;
      gSum += Vec::at(g[j], c);
      gxSum += Vec::at(g[j], c) * xh;
    }
  }
  const float gMean = Rms ? 0.0f : warpSum(gSum) / D;
  const float gxMean = warpSum(gxSum) / D;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int q = lane + 32 * j;
    if (q >= Q)
      continue;
    V out, dyx = Vec::zero();
    if (contrib)
      dyx = loadVector(dy, base + q);
#pragma unroll
    for (int c = 0; c < Vec::Width; ++c) {
      const float xh = (Vec::at(v[j], c) - mean) * r;
      Vec::at(out, c) = r * (Vec::at(g[j], c) - gMean - xh * gxMean);
      Vec::at(dyx, c) *= xh;
    }
    storeVector(dx, base + q, out);
    if (contrib)
      storeFloats(contrib, base + q, dyx);
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
  if constexpr ((D % 4 == 0 && detail::IsFloat<T>::value) ||
                (D % 8 == 0 && detail::IsBf16<T>::value)) {
    if (aligned16(x, dy, dx) && (!contrib || aligned16(contrib))) {
      detail::normGradRowVector<D, Rms>(row, eps, x, gamma, dy, dx, contrib);
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
