//===- cvloss.cuh - MoA's coefficient-of-variation loss --------*- CUDA -*-===//
//
// One block. Warp w sums the gates of every assignment to expert w, w + W,
// ... with a fixed lane split and warpSum, so the importance, the loss and
// its gradient do not depend on timing.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_CVLOSS_CUH
#define MOEC_DEVICE_CVLOSS_CUH

namespace moec {

/// The importance I_e = sum of the gates routed to e, into `importance`.
template <int E, int THREADS>
MOEC_DEVICE void cvImportance(int64_t assignments, gptr<const float> gates,
                              gptr<const int32_t> expert,
                              sptr<float> importance) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int e = warp; e < E; e += THREADS / 32) {
    float sum = 0.0f;
    for (int64_t a = lane; a < assignments; a += 32)
      sum += expert[a] == e ? gates[a] : 0.0f;
    sum = warpSum(sum);
    if (lane == 0)
      importance[e] = sum;
  }
  __syncthreads();
}

/// The statistics of moe.cv_loss from I: q = I / max(sum I, 1e-12), its
/// mean, unbiased variance, D = mean^2 + 1e-10 and sum I.
struct CvStats {
  float mean, var, denom, sum;
};

template <int E>
MOEC_DEVICE CvStats cvStats(sptr<float> importance, sptr<float> q) {
  CvStats s{0.0f, 0.0f, 0.0f, 0.0f};
  for (int e = 0; e < E; ++e)
    s.sum += importance[e];
  const float norm = s.sum > 1e-12f ? s.sum : 1e-12f;
  for (int e = 0; e < E; ++e) {
    q[e] = importance[e] / norm;
    s.mean += q[e];
  }
  s.mean /= E;
  for (int e = 0; e < E; ++e)
    s.var += (q[e] - s.mean) * (q[e] - s.mean);
  s.var /= E > 1 ? E - 1 : 1;
  s.denom = s.mean * s.mean + 1e-10f;
  return s;
}

/// loss[0] = var(q) / (mean(q)^2 + 1e-10), 0 for one expert.
template <int E, int THREADS>
MOEC_DEVICE void cvLoss(int64_t assignments, gptr<const float> gates,
                        gptr<const int32_t> expert, gptr<float> loss) {
  MOEC_SHARED(float, importance, E);
  MOEC_SHARED(float, q, E);
  cvImportance<E, THREADS>(assignments, gates, expert, importance);
  if (threadIdx.x != 0)
    return;
  const CvStats s = cvStats<E>(importance, q);
  loss[0] = E == 1 ? 0.0f : s.var / s.denom;
}

/// dgates[a] = dloss * dL/dI_{expert[a]} (see moe.cv_loss_grad).
template <int E, int THREADS>
MOEC_DEVICE void cvLossGrad(int64_t assignments, gptr<const float> gates,
                            gptr<const int32_t> expert,
                            gptr<const float> dloss, gptr<float> dgates) {
  MOEC_SHARED(float, importance, E);
  MOEC_SHARED(float, q, E);
  MOEC_SHARED(float, dI, E);
  cvImportance<E, THREADS>(assignments, gates, expert, importance);
  if (threadIdx.x == 0) {
    const CvStats s = cvStats<E>(importance, q);
    float qdq = 0.0f;
    for (int e = 0; e < E; ++e) {
      dI[e] = E > 1 && s.sum > 1e-12f
                  ? 2.0f * (q[e] - s.mean) / ((E - 1) * s.denom) -
                        2.0f * s.var * s.mean / (E * s.denom * s.denom)
                  : 0.0f;
      qdq += q[e] * dI[e];
    }
    for (int e = 0; e < E; ++e)
      dI[e] = s.sum > 1e-12f ? (dI[e] - qdq) / s.sum : 0.0f;
  }
  __syncthreads();
  const float scale = dloss[0];
  for (int64_t a = threadIdx.x; a < assignments; a += THREADS)
    dgates[a] = scale * dI[expert[a]];
}

} // namespace moec

#endif // MOEC_DEVICE_CVLOSS_CUH
