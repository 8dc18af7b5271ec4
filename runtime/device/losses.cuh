//===- losses.cuh - cross-entropy -------------------------------*- CUDA -*-===//
//
// One block per row of logits. The forward leaves each row's loss in scratch
// and the last block adds them in row order; the backward divides by the
// number of counted targets, which a one-block launch computes first.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_LOSSES_CUH
#define MOEC_DEVICE_LOSSES_CUH

namespace moec {

/// grid = rows; loss[0] = sum of row losses / max(1, counted rows) and
/// count[0] (may be null) the counted rows.
template <int V, int THREADS>
MOEC_DEVICE void crossEntropyForward(int64_t rows, float smoothing,
                                     gptr<const float> logits,
                                     gptr<const int32_t> targets,
                                     gptr<float> rowLoss, gptr<float> loss,
                                     gptr<float> count,
                                     gptr<unsigned> ticket) {
  MOEC_SHARED(float, scratch, THREADS / 32);
  const int64_t row = blockIdx.x;
  const int64_t base = row * V;
  float mx = -3.0e38f;
  for (int v = threadIdx.x; v < V; v += THREADS)
    mx = fmaxf(mx, logits[base + v]);
  mx = blockMax<THREADS>(mx, scratch);
  float sum = 0.0f, total = 0.0f;
  for (int v = threadIdx.x; v < V; v += THREADS) {
    float l = logits[base + v];
    sum += expf(l - mx);
    total += l;
  }
  sum = blockSum<THREADS>(sum, scratch);
  total = blockSum<THREADS>(total, scratch);
  if (threadIdx.x == 0) {
    const int32_t target = targets[row];
    float value = 0.0f;
    if (target >= 0) {
      const float lse = mx + logf(sum);
      const float nll = lse - logits[base + target];
      const float uniform = lse - total / V;
      value = (1.0f - smoothing) * nll + smoothing * uniform;
    }
    rowLoss[row] = value;
  }
  if (!isLastBlock(ticket))
    return;
  float s = 0.0f;
  float counted = 0.0f;
  for (int64_t r = threadIdx.x; r < rows; r += THREADS) {
    s += rowLoss[r];
    counted += targets[r] >= 0 ? 1.0f : 0.0f;
  }
  s = blockSum<THREADS>(s, scratch);
  counted = blockSum<THREADS>(counted, scratch);
  if (threadIdx.x == 0) {
    if (loss)
      loss[0] = s / fmaxf(counted, 1.0f);
    if (count)
      count[0] = counted;
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
  if (target < 0) {
    for (int v = threadIdx.x; v < V; v += THREADS)
      dlogits[base + v] = 0.0f;
    return;
  }
  float mx = -3.0e38f;
  for (int v = threadIdx.x; v < V; v += THREADS)
    mx = fmaxf(mx, logits[base + v]);
  mx = blockMax<THREADS>(mx, scratch);
  float sum = 0.0f;
  for (int v = threadIdx.x; v < V; v += THREADS)
    sum += expf(logits[base + v] - mx);
  sum = blockSum<THREADS>(sum, scratch);
  const float scale = dloss[0] / count[0];
  for (int v = threadIdx.x; v < V; v += THREADS) {
    float g = expf(logits[base + v] - mx) / sum - smoothing / V;
    if (v == target)
      g -= 1.0f - smoothing;
    dlogits[base + v] = scale * g;
  }
}

} // namespace moec

#endif // MOEC_DEVICE_LOSSES_CUH
