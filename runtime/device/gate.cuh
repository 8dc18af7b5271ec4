//===- gate.cuh - the X-MoE gate's row scaling and finite fill -*- CUDA -*-===//
//
// Row scaling (moe.normalize_rows, moe.rescale_rows and the gradient):
// rows are short (16 wide in X-MoE), so each takes an aligned group of
// Lanes lanes of a warp and its sums are xor butterflies inside the group.
//
// moe.finite_or_min: a fixed grid of blocks finds the smallest finite
// value (ties to the lower index) and, for the gradient, sums dy over the
// non-finite entries; each block combines its threads in a fixed tree and
// the last block combines the blocks in block order. A second launch fills.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_GATE_CUH
#define MOEC_DEVICE_GATE_CUH

namespace moec {

/// Sum over the aligned group of Lanes lanes (a power of two up to 32) that
/// holds this lane; every lane of the warp must call it.
template <int Lanes> MOEC_DEVICE float groupSum(float v) {
  for (int offset = Lanes / 2; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

/// The row of a [rows, D] tensor this lane works on, RowsPerBlock rows per
/// block, blockDim.x / RowsPerBlock lanes per row.
template <int Lanes, int RowsPerBlock> MOEC_DEVICE int64_t groupRow() {
  return static_cast<int64_t>(blockIdx.x) * RowsPerBlock + threadIdx.x / Lanes;
}

/// y = x * s(n) per row with n = ||x_row||: normalize, s = 1 / max(n,
/// param) (param = eps); rescale, s = param / n (param = the target norm),
/// rows of norm 0 unchanged.
template <int D, int Lanes, int RowsPerBlock, bool Rescale, typename T>
MOEC_DEVICE void scaleRows(int64_t rows, float param, gptr<const T> x,
                           gptr<T> y) {
  const int lane = threadIdx.x % Lanes;
  const int64_t row = groupRow<Lanes, RowsPerBlock>();
  const bool live = row < rows; // all lanes stay for the shuffles
  const int64_t base = live ? row * D : 0;
  float sq = 0.0f;
  if (live)
    for (int c = lane; c < D; c += Lanes) {
      const float v = toFloat(x[base + c]);
      sq += v * v;
    }
  const float n = sqrtf(groupSum<Lanes>(sq));
  if (!live)
    return;
  const float s = Rescale ? (n > 0.0f ? param / n : 1.0f)
                          : 1.0f / fmaxf(n, param);
  for (int c = lane; c < D; c += Lanes)
    y[base + c] = toFloat(x[base + c]) * s;
}

/// dx of moe.normalize_rows per row: (dy - xh <xh, dy>) / n when n > eps,
/// else dy / eps (xh = x / n).
template <int D, int Lanes, int RowsPerBlock, typename T>
MOEC_DEVICE void normalizeRowsGrad(int64_t rows, float eps, gptr<const T> x,
                                   gptr<const T> dy, gptr<T> dx) {
  const int lane = threadIdx.x % Lanes;
  const int64_t row = groupRow<Lanes, RowsPerBlock>();
  const bool live = row < rows;
  const int64_t base = live ? row * D : 0;
  float sq = 0.0f, dot = 0.0f;
  if (live)
    for (int c = lane; c < D; c += Lanes) {
      const float v = toFloat(x[base + c]), g = toFloat(dy[base + c]);
      sq += v * v;
      dot += v * g;
    }
  const float n = sqrtf(groupSum<Lanes>(sq));
  dot = groupSum<Lanes>(dot);
  if (!live)
    return;
  const bool above = n > eps;
  const float inv = above ? 1.0f / n : 1.0f / eps;
  const float along = above ? dot * inv * inv * inv : 0.0f;
  for (int c = lane; c < D; c += Lanes)
    dx[base + c] = toFloat(dy[base + c]) * inv - toFloat(x[base + c]) * along;
}

/// A candidate minimum: its value and flat index (-1: none yet), and the
/// running sum of dy over non-finite entries.
struct FiniteMin {
  float value;
  int64_t index;
  float sum;
};

/// Keeps the smaller candidate of `a` and `b` (ties to the lower index)
/// and adds the sums, a first.
MOEC_DEVICE FiniteMin combineFiniteMin(FiniteMin a, FiniteMin b) {
  const bool takeB = b.index >= 0 &&
                     (a.index < 0 || b.value < a.value ||
                      (b.value == a.value && b.index < a.index));
  return {takeB ? b.value : a.value, takeB ? b.index : a.index, a.sum + b.sum};
}

/// Step one of moe.finite_or_min (and its gradient, with dy): a fixed grid
/// of Threads-thread blocks scans grid-stride shares in index order; each
/// block leaves its candidate in part*[blockIdx.x], and the last block to
/// finish writes the whole tensor's to stats (min, dy sum) and arg.
template <int Threads, typename T>
MOEC_DEVICE void finiteMinPass(int64_t n, gptr<const T> x, gptr<const T> dy,
                               gptr<float> partValue, gptr<int64_t> partIndex,
                               gptr<float> partSum, gptr<float> stats,
                               gptr<int64_t> arg, gptr<unsigned> ticket) {
  MOEC_SHARED(float, values, Threads);
  MOEC_SHARED(int64_t, indices, Threads);
  MOEC_SHARED(float, sums, Threads);
  FiniteMin mine{0.0f, -1, 0.0f};
  for (int64_t i = blockIdx.x * static_cast<int64_t>(Threads) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * Threads) {
    const float v = toFloat(x[i]);
    if (isFiniteValue(v))
      mine = combineFiniteMin(mine, {v, i, 0.0f});
    else if (dy)
      mine.sum += toFloat(dy[i]);
  }
  const int t = threadIdx.x;
  values[t] = mine.value;
  indices[t] = mine.index;
  sums[t] = mine.sum;
  __syncthreads();
  for (int half = Threads / 2; half > 0; half >>= 1) {
    if (t < half) {
      FiniteMin c = combineFiniteMin({values[t], indices[t], sums[t]},
                                     {values[t + half], indices[t + half],
                                      sums[t + half]});
      values[t] = c.value;
      indices[t] = c.index;
      sums[t] = c.sum;
    }
    __syncthreads();
  }
  if (t == 0) {
    partValue[blockIdx.x] = values[0];
    partIndex[blockIdx.x] = indices[0];
    partSum[blockIdx.x] = sums[0];
  }
  if (!isLastBlock(ticket) || t != 0)
    return;
  FiniteMin all{0.0f, -1, 0.0f};
  for (int b = 0; b < static_cast<int>(gridDim.x); ++b)
    all = combineFiniteMin(all, {partValue[b], partIndex[b], partSum[b]});
  stats[0] = all.value;
  stats[1] = all.sum;
  arg[0] = all.index;
}

/// y = x where finite, else the minimum (0 everywhere when nothing is
/// finite); grid-stride.
template <typename T>
MOEC_DEVICE void finiteFill(int64_t n, gptr<const T> x,
                            gptr<const float> stats, gptr<const int64_t> arg,
                            gptr<T> y) {
  const float m = arg[0] >= 0 ? stats[0] : 0.0f;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = toFloat(x[i]);
    y[i] = isFiniteValue(v) ? v : m;
  }
}

/// dx = dy where x is finite, else 0, plus the dy sum at the arg-min (all 0
/// when nothing is finite); grid-stride.
template <typename T>
MOEC_DEVICE void finiteFillGrad(int64_t n, gptr<const T> x, gptr<const T> dy,
                                gptr<const float> stats,
                                gptr<const int64_t> arg, gptr<T> dx) {
  const int64_t a = arg[0];
  const float s = stats[1];
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float g = isFiniteValue(toFloat(x[i])) ? toFloat(dy[i]) : 0.0f;
    if (i == a)
      g += s;
    dx[i] = g;
  }
}

} // namespace moec

#endif // MOEC_DEVICE_GATE_CUH
