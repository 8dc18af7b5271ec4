//===- mae.cuh - MAE's summary, head mixture and sampling ------*- CUDA -*-===//
//
// moe.window_mean and its gradient: one thread per (sequence, feature)
// column walks the sequence with a compensated f32 running sum, so a
// window of any length costs O(1) per output and long sums stay within a
// few ulps of the cpu device's double ones. The walk reads kWindowAhead
// positions before it adds and stores them: the stores may alias the reads
// as far as the compiler knows, so one position at a time would wait out a
// full load latency per position. moe.head_mixture_grad: one
// block per (row group, head) sums <dy, context> in a fixed tree.
// moe.sample_expert: one row per thread, the uniform from the Philox
// stream moe.dropout uses. moe.gate_stats: one block.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_MAE_CUH
#define MOEC_DEVICE_MAE_CUH

namespace moec {

/// A compensated (Kahan) f32 sum. Terms that are added and later removed
/// (a sliding window) are removed as the same float.
struct KahanSum {
  float sum, carry;
  MOEC_DEVICE void add(float v) {
    const float y = v - carry;
    const float t = sum + y;
    carry = (t - sum) - y;
    sum = t;
  }
};

/// The (sequence, feature) column of this thread over batch * D threads,
/// or false past the end.
template <int D>
MOEC_DEVICE bool windowColumn(int64_t batch, int64_t &b, int &c) {
  const int64_t col =
      blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (col >= batch * D)
    return false;
  b = col / D;
  c = static_cast<int>(col % D);
  return true;
}

/// A quiet NaN: what a window past the end of its history averages.
MOEC_DEVICE float windowNaN() { return __uint_as_float(0x7fc00000u); }

/// Positions a window walk loads ahead of its sums.
constexpr int kWindowAhead = 8;

/// moe.window_mean. `src` is [batch, len, D]: x (len = seq, past = 0) or
/// the history with `past` positions before x's first. y is [batch, 1, D]
/// for the sequence window, else [batch, seq, D]; `mask` (sequence only)
/// may be null.
template <int D, PoolWindow W, typename T>
MOEC_DEVICE void windowMean(int64_t batch, int64_t seq, int64_t len,
                            int64_t past, int64_t size, gptr<const T> src,
                            gptr<const int32_t> mask, gptr<T> y) {
  int64_t b;
  int c;
  if (!windowColumn<D>(batch, b, c))
    return;
  const int64_t base = b * len * D + c;
  KahanSum acc{0.0f, 0.0f};
  if (W == PoolWindow::Sequence) {
    int64_t count = 0;
    for (int64_t s = 0; s < seq; ++s)
      if (!mask || mask[b * seq + s] != 0) {
        acc.add(toFloat(src[base + s * D]));
        ++count;
      }
    y[b * D + c] = count > 0 ? acc.sum / static_cast<float>(count) : 0.0f;
    return;
  }
  const bool last = W == PoolWindow::Last;
  // The window of t = 0 without its last position; then position p
  // enters and, for `last`, position p - size leaves.
  const int64_t first = last && past - size + 1 > 0 ? past - size + 1 : 0;
  for (int64_t q = first; q < past && q < len; ++q)
    acc.add(toFloat(src[base + q * D]));
  for (int64_t t0 = 0; t0 < seq; t0 += kWindowAhead) {
    // Position p = past + t enters and, for `last`, p - size leaves; no
    // read past the end of the history (the cpu device reports that).
    float enter[kWindowAhead], leave[kWindowAhead];
#pragma unroll
    for (int i = 0; i < kWindowAhead; ++i) {
      const int64_t t = t0 + i, p = past + t;
      const bool inside = t < seq && p < len;
      enter[i] = inside ? toFloat(src[base + p * D]) : 0.0f;
      leave[i] = inside && last && t > 0 && p - size >= 0
                     ? toFloat(src[base + (p - size) * D])
                     : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kWindowAhead; ++i) {
      const int64_t t = t0 + i, p = past + t;
      if (t >= seq)
        break;
      const int64_t out = (b * seq + t) * D + c;
      if (p >= len) {
        y[out] = windowNaN();
        continue;
      }
      acc.add(enter[i]);
      if (last && t > 0 && p - size >= 0)
        acc.add(-leave[i]);
      const int64_t from = last && p - size + 1 > 0 ? p - size + 1 : 0;
      y[out] = acc.sum / static_cast<float>(p - from + 1);
    }
  }
}

/// dy[t] / count(t) of the column starting at `column`, count(t) the
/// positions in output t's window.
template <int D, typename T>
MOEC_DEVICE float windowTerm(gptr<const T> dy, int64_t column, int64_t t,
                             bool last, int64_t size) {
  const int64_t count = last && t + 1 > size ? size : t + 1;
  return toFloat(dy[column + t * D]) / static_cast<float>(count);
}

/// moe.window_mean_grad: dx [batch, seq, D] from dy ([batch, 1, D] for the
/// sequence window, else [batch, seq, D]).
template <int D, PoolWindow W, typename T>
MOEC_DEVICE void windowMeanGrad(int64_t batch, int64_t seq, int64_t size,
                                gptr<const T> dy, gptr<const int32_t> mask,
                                gptr<T> dx) {
  int64_t b;
  int c;
  if (!windowColumn<D>(batch, b, c))
    return;
  if (W == PoolWindow::Sequence) {
    int64_t count = 0;
    for (int64_t s = 0; s < seq; ++s)
      count += !mask || mask[b * seq + s] != 0 ? 1 : 0;
    const float share =
        count > 0 ? toFloat(dy[b * D + c]) / static_cast<float>(count) : 0.0f;
    for (int64_t s = 0; s < seq; ++s)
      dx[(b * seq + s) * D + c] =
          !mask || mask[b * seq + s] != 0 ? share : 0.0f;
    return;
  }
  const bool last = W == PoolWindow::Last;
  const int64_t column = b * seq * D + c;
  // dx[s] sums dy[t] / count(t) over t = s.. (prefix) or s..s+size-1
  // (last): walking s down, t = s enters and t = s + size leaves.
  KahanSum acc{0.0f, 0.0f};
  for (int64_t s0 = seq - 1; s0 >= 0; s0 -= kWindowAhead) {
    float enter[kWindowAhead], leave[kWindowAhead];
#pragma unroll
    for (int i = 0; i < kWindowAhead; ++i) {
      const int64_t s = s0 - i;
      enter[i] = s >= 0 ? windowTerm<D>(dy, column, s, last, size) : 0.0f;
      leave[i] = s >= 0 && last && s + size < seq
                     ? windowTerm<D>(dy, column, s + size, last, size)
                     : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kWindowAhead; ++i) {
      const int64_t s = s0 - i;
      if (s < 0)
        break;
      acc.add(enter[i]);
      if (last && s + size < seq)
        acc.add(-leave[i]);
      dx[column + s * D] = acc.sum;
    }
  }
}

/// The scale moe.head_mixture gives flat element i of a context of H heads
/// of DH features: H (1 - g) / (H - 1), g of the element's head in the g
/// row of its row group (rowsPerGroup = S for one gate per sequence, 1 for
/// one per position).
template <int H, int DH, typename G>
MOEC_DEVICE float headMixtureScale(gptr<const G> g, int64_t i,
                                   int64_t rowsPerGroup) {
  const int64_t row = i / (H * DH);
  const int head = static_cast<int>(i % (H * DH)) / DH;
  const float gj = toFloat(g[row / rowsPerGroup * H + head]);
  return static_cast<float>(H) * (1.0f - gj) / static_cast<float>(H - 1);
}

/// moe.head_mixture_grad: block (group, head) of groups * H blocks writes
/// dcontext for the head's columns of the group's rowsPerGroup rows and
/// dg[group, head] = -H / (H - 1) <dy, context> over them.
template <int H, int DH, int Threads, typename T, typename G>
MOEC_DEVICE void headMixtureGrad(int64_t groups, int64_t rowsPerGroup,
                                 gptr<const T> dy, gptr<const T> context,
                                 gptr<const G> g, gptr<T> dcontext,
                                 gptr<G> dg) {
  MOEC_SHARED(float, scratch, Threads / 32);
  const int64_t group = blockIdx.x / H;
  const int head = static_cast<int>(blockIdx.x % H);
  if (group >= groups)
    return;
  const float scale = static_cast<float>(H) *
                      (1.0f - toFloat(g[group * H + head])) /
                      static_cast<float>(H - 1);
  const int64_t count = rowsPerGroup * DH;
  float dot = 0.0f;
  for (int64_t e = threadIdx.x; e < count; e += Threads) {
    const int64_t row = group * rowsPerGroup + e / DH;
    const int64_t at = row * (H * DH) + head * DH + e % DH;
    const float d = toFloat(dy[at]);
    dot += d * toFloat(context[at]);
    dcontext[at] = d * scale;
  }
  dot = blockSum<Threads>(dot, scratch);
  if (threadIdx.x == 0)
    dg[group * H + head] =
        -static_cast<float>(H) / static_cast<float>(H - 1) * dot;
}

/// moe.sample_expert: row `row` of rows = batch * groups (one thread each)
/// draws uniform number row / groups of the stream (seed, stream) and
/// writes a one-hot row of N. p is [rows, width] (width = N unless
/// Uniform, which ignores it).
template <int N, bool Uniform, typename T>
MOEC_DEVICE void sampleExpert(int64_t rows, int64_t groups, int64_t width,
                              uint64_t seed, uint64_t stream,
                              gptr<const T> p, gptr<float> y) {
  const int64_t row =
      blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (row >= rows)
    return;
  const double u =
      philoxUniform(seed, stream, static_cast<uint64_t>(row / groups));
  int pick = -1;
  if (Uniform) {
    const int j = static_cast<int>(u * N); // u >= 0: truncation is floor
    pick = j < N - 1 ? j : N - 1;
  } else {
    // u has 24 bits: exact as a float. The running sum is f32 in index
    // order, as on the cpu device.
    const float uf = static_cast<float>(u);
    float running = 0.0f;
    int lastPositive = N - 1;
    for (int j = 0; j < N; ++j) {
      const float v = toFloat(p[row * width + j]);
      running += v;
      if (pick < 0 && uf < running)
        pick = j;
      if (v > 0.0f)
        lastPositive = j;
    }
    if (pick < 0)
      pick = lastPositive;
  }
  for (int j = 0; j < N; ++j)
    y[row * N + j] = j == pick ? 1.0f : 0.0f;
}

/// moe.gate_stats in one block: the mean of every column of g [rows, H],
/// then the mean entropy of the rows (0 log 0 = 0).
template <int H, int Threads, typename T>
MOEC_DEVICE void gateStats(int64_t rows, gptr<const T> g, gptr<float> stats) {
  MOEC_SHARED(float, scratch, Threads / 32);
  const float inverse = rows > 0 ? 1.0f / static_cast<float>(rows) : 0.0f;
  float entropy = 0.0f;
  for (int64_t r = threadIdx.x; r < rows; r += Threads)
    for (int j = 0; j < H; ++j) {
      const float v = toFloat(g[r * H + j]);
      if (v > 0.0f)
        entropy -= v * logf(v);
    }
  entropy = blockSum<Threads>(entropy, scratch);
  for (int j = 0; j < H; ++j) {
    float sum = 0.0f;
    for (int64_t r = threadIdx.x; r < rows; r += Threads)
      sum += toFloat(g[r * H + j]);
    sum = blockSum<Threads>(sum, scratch);
    if (threadIdx.x == 0)
      stats[j] = sum * inverse;
  }
  if (threadIdx.x == 0)
    stats[H] = entropy * inverse;
}

} // namespace moec

#endif // MOEC_DEVICE_MAE_CUH
