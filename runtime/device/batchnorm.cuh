//===- batchnorm.cuh - batch normalisation over rows -----------*- CUDA -*-===//
//
// moe.batch_norm's column statistics over up to ~1e5 rows: a grid of
// 32-column strips times `chunks` row chunks, each thread a Welford
// accumulator over every (chunks * 8)-th row of its chunk, merged (Chan's
// formula) over the block's 8 row lanes in lane order and then, by a
// per-column pass, over the chunks in chunk order. The merge order depends
// only on the static chunk count, so results are deterministic. The
// gradient's column sums (dy and dy * x_hat) take the same layout. Stats
// are [3 * D] floats: the mean, 1 / sqrt(var + eps) and the row count n.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_BATCHNORM_CUH
#define MOEC_DEVICE_BATCHNORM_CUH

namespace moec {

/// Row lanes of a statistics block (256 threads: 8 lanes x 32 columns).
constexpr int kBnLanes = 8;

/// Count, mean and sum of squared deviations of some values.
struct BnMoments {
  float n, mean, m2;
};

/// The moments of the union of two disjoint sets (Chan et al.).
MOEC_DEVICE BnMoments combineMoments(BnMoments a, BnMoments b) {
  if (b.n == 0.0f)
    return a;
  if (a.n == 0.0f)
    return b;
  const float n = a.n + b.n;
  const float delta = b.mean - a.mean;
  const float wb = b.n / n;
  return {n, a.mean + delta * wb, a.m2 + b.m2 + delta * delta * a.n * wb};
}

/// The statistics launch: block (blockIdx.x, blockIdx.y) accumulates the
/// 32 columns of strip x over rows blockIdx.y * 8 + lane + k * gridDim.y *
/// 8 whose mask is not 0 (all rows without a mask), and leaves its
/// moments in part*[blockIdx.y * D + c].
template <int D, typename T>
MOEC_DEVICE void bnMomentPartials(int64_t rows, gptr<const T> x,
                                  gptr<const int32_t> mask, gptr<float> partN,
                                  gptr<float> partMean, gptr<float> partM2) {
  MOEC_SHARED(float, sn, kBnLanes * 32);
  MOEC_SHARED(float, smean, kBnLanes * 32);
  MOEC_SHARED(float, sm2, kBnLanes * 32);
  const int col = threadIdx.x % 32, lane = threadIdx.x / 32;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + col;
  const int64_t stride = static_cast<int64_t>(gridDim.y) * kBnLanes;
  BnMoments m{0.0f, 0.0f, 0.0f};
  if (c < D)
    for (int64_t r = static_cast<int64_t>(blockIdx.y) * kBnLanes + lane;
         r < rows; r += stride) {
      if (mask && mask[r] == 0)
        continue;
      const float v = toFloat(x[r * D + c]);
      m.n += 1.0f;
      const float delta = v - m.mean;
      m.mean += delta / m.n;
      m.m2 += delta * (v - m.mean);
    }
  const int slot = lane * 32 + col;
  sn[slot] = m.n;
  smean[slot] = m.mean;
  sm2[slot] = m.m2;
  __syncthreads();
  if (lane != 0 || c >= D)
    return;
  BnMoments t = m;
  for (int l = 1; l < kBnLanes; ++l)
    t = combineMoments(t, {sn[l * 32 + col], smean[l * 32 + col],
                           sm2[l * 32 + col]});
  const int64_t out = static_cast<int64_t>(blockIdx.y) * D + c;
  partN[out] = t.n;
  partMean[out] = t.mean;
  partM2[out] = t.m2;
}

/// Training statistics: one thread per column merges the `Chunks`
/// partials in order into stats, and writes the running statistics'
/// update (unchanged when n <= 1) where new* are given.
template <int D, int Chunks, typename P>
MOEC_DEVICE void bnMomentsFinish(float eps, float momentum,
                                 gptr<const float> partN,
                                 gptr<const float> partMean,
                                 gptr<const float> partM2,
                                 gptr<const P> runMean, gptr<const P> runVar,
                                 gptr<float> stats, gptr<P> newMean,
                                 gptr<P> newVar) {
  const int64_t c =
      static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= D)
    return;
  BnMoments t{0.0f, 0.0f, 0.0f};
  for (int k = 0; k < Chunks; ++k)
    t = combineMoments(t, {partN[k * D + c], partMean[k * D + c],
                           partM2[k * D + c]});
  const float mean = t.n > 0.0f ? t.mean : 0.0f;
  const float var = t.n > 0.0f ? t.m2 / t.n : 0.0f;
  stats[c] = mean;
  stats[D + c] = 1.0f / sqrtf(var + eps);
  stats[2 * D + c] = t.n;
  const float rm = toFloat(runMean[c]), rv = toFloat(runVar[c]);
  const bool update = t.n > 1.0f;
  if (newMean)
    newMean[c] = update ? (1.0f - momentum) * rm + momentum * mean : rm;
  if (newVar)
    newVar[c] = update ? (1.0f - momentum) * rv +
                             momentum * (var * t.n / (t.n - 1.0f))
                       : rv;
}

/// Eval statistics: the running ones (n unused), and the unchanged running
/// statistics as new_mean / new_var where given.
template <int D, typename P>
MOEC_DEVICE void bnRunningStats(float eps, gptr<const P> runMean,
                                gptr<const P> runVar, gptr<float> stats,
                                gptr<P> newMean, gptr<P> newVar) {
  const int64_t c =
      static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= D)
    return;
  const float rm = toFloat(runMean[c]), rv = toFloat(runVar[c]);
  stats[c] = rm;
  stats[D + c] = 1.0f / sqrtf(rv + eps);
  stats[2 * D + c] = 0.0f;
  if (newMean)
    newMean[c] = rm;
  if (newVar)
    newVar[c] = rv;
}

/// y = (x - mean) * rstd * gamma + beta for all n elements (grid-stride).
template <int D, typename T, typename P>
MOEC_DEVICE void bnApply(int64_t n, gptr<const T> x, gptr<const float> stats,
                         gptr<const P> gamma, gptr<const P> beta, gptr<T> y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % D;
    y[i] = (toFloat(x[i]) - stats[c]) * stats[D + c] * toFloat(gamma[c]) +
           toFloat(beta[c]);
  }
}

/// The gradient's column sums over every row, in the layout of
/// bnMomentPartials: partA = sum dy, partB = sum dy * x_hat.
template <int D, typename T>
MOEC_DEVICE void bnGradPartials(int64_t rows, gptr<const T> x,
                                gptr<const T> dy, gptr<const float> stats,
                                gptr<float> partA, gptr<float> partB) {
  MOEC_SHARED(float, sa, kBnLanes * 32);
  MOEC_SHARED(float, sb, kBnLanes * 32);
  const int col = threadIdx.x % 32, lane = threadIdx.x / 32;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + col;
  const int64_t stride = static_cast<int64_t>(gridDim.y) * kBnLanes;
  float a = 0.0f, b = 0.0f;
  if (c < D) {
    const float mean = stats[c], rstd = stats[D + c];
    for (int64_t r = static_cast<int64_t>(blockIdx.y) * kBnLanes + lane;
         r < rows; r += stride) {
      const float g = toFloat(dy[r * D + c]);
      a += g;
      b += g * ((toFloat(x[r * D + c]) - mean) * rstd);
    }
  }
  const int slot = lane * 32 + col;
  sa[slot] = a;
  sb[slot] = b;
  __syncthreads();
  if (lane != 0 || c >= D)
    return;
  for (int l = 1; l < kBnLanes; ++l) {
    a += sa[l * 32 + col];
    b += sb[l * 32 + col];
  }
  const int64_t out = static_cast<int64_t>(blockIdx.y) * D + c;
  partA[out] = a;
  partB[out] = b;
}

/// One thread per column sums the `Chunks` partials in order into sums
/// ([2 * D]: A then B) and into dbeta = A, dgamma = B where given.
template <int D, int Chunks, typename P>
MOEC_DEVICE void bnGradFinish(gptr<const float> partA, gptr<const float> partB,
                              gptr<float> sums, gptr<P> dgamma,
                              gptr<P> dbeta) {
  const int64_t c =
      static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= D)
    return;
  float a = 0.0f, b = 0.0f;
  for (int k = 0; k < Chunks; ++k) {
    a += partA[k * D + c];
    b += partB[k * D + c];
  }
  sums[c] = a;
  sums[D + c] = b;
  if (dgamma)
    dgamma[c] = b;
  if (dbeta)
    dbeta[c] = a;
}

/// dx = gamma * rstd * dy, less gamma * rstd * (A + x_hat * B) / n at the
/// rows inside the batch statistics (Training; mask != 0, or every row
/// without a mask) when there are any (grid-stride).
template <int D, bool Training, typename T, typename P>
MOEC_DEVICE void bnGradApply(int64_t n, gptr<const T> x, gptr<const T> dy,
                             gptr<const int32_t> mask, gptr<const float> stats,
                             gptr<const float> sums, gptr<const P> gamma,
                             gptr<T> dx) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % D;
    const float scale = toFloat(gamma[c]) * stats[D + c];
    float g = toFloat(dy[i]);
    if (Training) {
      const float count = stats[2 * D + c];
      if (count > 0.0f && (!mask || mask[i / D] != 0)) {
        const float xh = (toFloat(x[i]) - stats[c]) * stats[D + c];
        g -= (sums[c] + xh * sums[D + c]) / count;
      }
    }
    dx[i] = scale * g;
  }
}

} // namespace moec

#endif // MOEC_DEVICE_BATCHNORM_CUH
