//===- losses.cuh - cross-entropy ------------------------------*- CUDA -*-===//
//
// One block per row of logits. The forward leaves each row's loss in scratch
// and the last block adds them in row order; the backward divides by the
// number of counted targets, which a one-block launch computes first. A
// row's max and sum of exponentials come from one pass (an online softmax:
// each thread rescales its running sum when its max grows, and the block
// combines the threads' pairs), four logits per 16-byte load when the row
// is aligned and V is a multiple of 4; the backward then writes the row in
// a second pass. The forward can also count the rows whose target is the
// first index of the row's largest logit (accuracy, for evaluation): each
// thread keeps the first index of its own max, and the smallest such index
// among the threads that hold the row's max wins.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_LOSSES_CUH
#define MOEC_DEVICE_LOSSES_CUH

namespace moec {

namespace detail {

/// Calls f(v, row[v]) for this thread's share of the V values of `row`:
/// quads 4q .. 4q + 3 through 16-byte loads when V % 4 == 0 and `row` is
/// aligned, single values otherwise.
template <int V, int THREADS, typename F>
MOEC_DEVICE void forRowValues(gptr<const float> row, const F &f) {
  if constexpr (V % 4 == 0) {
    if (aligned16(row)) {
      for (int q = threadIdx.x; q < V / 4; q += THREADS) {
        const float4 x = load4(row, q);
        f(4 * q, x.x);
        f(4 * q + 1, x.y);
        f(4 * q + 2, x.z);
        f(4 * q + 3, x.w);
      }
      return;
    }
  }
  for (int v = threadIdx.x; v < V; v += THREADS)
    f(v, row[v]);
}

/// A running max and sum of exp(x - max).
struct SoftmaxStats {
  float max = -3.0e38f, sum = 0.0f;
  MOEC_DEVICE void add(float x) {
    if (x > max) {
      sum = sum * expf(max - x) + 1.0f;
      max = x;
    } else {
      sum += expf(x - max);
    }
  }
  /// The block's max and sum (every thread gets them).
  template <int THREADS> MOEC_DEVICE void combine(sptr<float> scratch) {
    const float blockMaxValue = blockMax<THREADS>(max, scratch);
    sum = blockSum<THREADS>(sum * expf(max - blockMaxValue), scratch);
    max = blockMaxValue;
  }
};

} // namespace detail

/// grid = rows; loss[0] = sum of row losses / max(1, counted rows),
/// count[0] (may be null) the counted rows, and correct[0] (may be null;
/// then so may rowHit) the counted rows whose target is the first index of
/// the row's largest logit (index 0 when no logit exceeds -3e38).
template <int V, int THREADS>
MOEC_DEVICE void crossEntropyForward(int64_t rows, float smoothing,
                                     gptr<const float> logits,
                                     gptr<const int32_t> targets,
                                     gptr<float> rowLoss, gptr<float> rowHit,
                                     gptr<float> loss, gptr<float> count,
                                     gptr<float> correct,
                                     gptr<unsigned> ticket) {
  MOEC_SHARED(float, scratch, THREADS / 32);
  MOEC_SHARED(int, indexScratch, THREADS / 32);
  const int64_t row = blockIdx.x;
  const int64_t base = row * V;
  detail::SoftmaxStats stats;
  float total = 0.0f;
  int first = V; // the first index of this thread's max (it reads in order)
  detail::forRowValues<V, THREADS>(logits + base, [&](int v, float l) {
    if (l > stats.max)
      first = v;
    stats.add(l);
    total += l;
  });
  const float threadMax = stats.max;
  stats.combine<THREADS>(scratch);
  total = blockSum<THREADS>(total, scratch);
  int argmax = 0;
  if (correct) {
    argmax = blockMin<THREADS>(threadMax == stats.max ? first : V,
                               indexScratch);
    argmax = argmax == V ? 0 : argmax;
  }
  if (threadIdx.x == 0) {
    const int32_t target = targets[row];
    float value = 0.0f;
    if (target >= 0) {
      const float lse = stats.max + logf(stats.sum);
      const float nll = lse - logits[base + target];
      const float uniform = lse - total / V;
      // Skipped without smoothing: a masked (-inf) logit makes it +inf.
      value = smoothing == 0.0f
                  ? nll
                  : (1.0f - smoothing) * nll + smoothing * uniform;
    }
    rowLoss[row] = value;
    if (correct)
      rowHit[row] = target >= 0 && target == argmax ? 1.0f : 0.0f;
  }
  if (!isLastBlock(ticket))
    return;
  float s = 0.0f;
  float counted = 0.0f;
  float hits = 0.0f;
  for (int64_t r = threadIdx.x; r < rows; r += THREADS) {
    s += rowLoss[r];
    counted += targets[r] >= 0 ? 1.0f : 0.0f;
    if (correct)
      hits += rowHit[r];
  }
  s = blockSum<THREADS>(s, scratch);
  counted = blockSum<THREADS>(counted, scratch);
  if (correct)
    hits = blockSum<THREADS>(hits, scratch);
  if (threadIdx.x == 0) {
    if (loss)
      loss[0] = s / fmaxf(counted, 1.0f);
    if (count)
      count[0] = counted;
    if (correct)
      correct[0] = hits;
  }
}

/// count[0] = max(1, number of targets >= 0); one block.
template <int THREADS>
MOEC_DEVICE void countTargets(int64_t rows, gptr<const int32_t> targets,
                              gptr<float> count) {
  MOEC_SHARED(float, scratch, THREADS / 32);
  float c = 0.0f;
  for (int64_t r = threadIdx.x; r < rows; r += THREADS)
    c += targets[r] >= 0 ? 1.0f : 0.0f;
  c = blockSum<THREADS>(c, scratch);
  if (threadIdx.x == 0)
    count[0] = fmaxf(c, 1.0f);
}

/// grid = rows: dlogits = dloss (softmax - (1 - a) onehot - a / V) / count.
template <int V, int THREADS>
MOEC_DEVICE void crossEntropyBackward(float smoothing, gptr<const float> logits,
                                      gptr<const int32_t> targets,
                                      gptr<const float> dloss,
                                      gptr<const float> count,
                                      gptr<float> dlogits) {
  MOEC_SHARED(float, scratch, THREADS / 32);
  const int64_t row = blockIdx.x;
  const int64_t base = row * V;
  const int32_t target = targets[row];
  const bool vector = V % 4 == 0 && aligned16(logits + base, dlogits + base);
  if (target < 0) {
    if (vector)
      for (int q = threadIdx.x; q < V / 4; q += THREADS)
        store4(dlogits + base, q, make_float4(0.0f, 0.0f, 0.0f, 0.0f));
    else
      for (int v = threadIdx.x; v < V; v += THREADS)
        dlogits[base + v] = 0.0f;
    return;
  }
  detail::SoftmaxStats stats;
  detail::forRowValues<V, THREADS>(logits + base,
                                   [&](int, float l) { stats.add(l); });
  stats.combine<THREADS>(scratch);
  const float scale = dloss[0] / count[0];
  auto grad = [&](int v, float l) {
    float g = expf(l - stats.max) / stats.sum - smoothing / V;
    if (v == target)
      g -= 1.0f - smoothing;
    return scale * g;
  };
  if constexpr (V % 4 == 0) {
    if (vector) {
      for (int q = threadIdx.x; q < V / 4; q += THREADS) {
        const float4 l = load4(logits + base, q);
        store4(dlogits + base, q,
               make_float4(grad(4 * q, l.x), grad(4 * q + 1, l.y),
                           grad(4 * q + 2, l.z), grad(4 * q + 3, l.w)));
      }
      return;
    }
  }
  for (int v = threadIdx.x; v < V; v += THREADS)
    dlogits[base + v] = grad(v, logits[base + v]);
}

} // namespace moec

#endif // MOEC_DEVICE_LOSSES_CUH
