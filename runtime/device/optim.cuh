//===- optim.cuh - optimizer updates and the gradient norm ------*- CUDA -*-===//

#ifndef MOEC_DEVICE_OPTIM_CUH
#define MOEC_DEVICE_OPTIM_CUH

namespace moec {

/// One Adam / AdamW step on element i (see moe.adam_update).
MOEC_DEVICE void adamStep(float &p, float &m, float &v, float grad, float lr,
                          float scale, float beta1, float beta2, float eps,
                          float decay, bool decoupled, float rbc1,
                          float rbc2) {
  float g = grad * scale;
  if (!decoupled)
    g += decay * p;
  m = beta1 * m + (1.0f - beta1) * g;
  v = beta2 * v + (1.0f - beta2) * g * g;
  float mh = m * rbc1, vh = v * rbc2;
  float next = p - lr * mh / (sqrtf(vh) + eps);
  if (decoupled)
    next -= lr * decay * p;
  p = next;
}

/// One SGD step (see moe.sgd_update).
MOEC_DEVICE void sgdStep(float &p, float &m, float grad, float lr,
                         float scale, float momentum, float decay) {
  float g = grad * scale + decay * p;
  if (momentum > 0.0f) {
    m = momentum * m + g;
    p = p - lr * m;
  } else {
    p = p - lr * g;
  }
}

/// sum of squares over this block's share of one tensor (grid-stride with a
/// fixed grid), accumulated in double.
MOEC_DEVICE double sumOfSquares(gptr<const float> x, int64_t n) {
  double s = 0.0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double v = x[i];
    s += v * v;
  }
  return s;
}

} // namespace moec

#endif // MOEC_DEVICE_OPTIM_CUH
