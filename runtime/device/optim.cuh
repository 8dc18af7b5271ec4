//===- optim.cuh - optimizer updates and the gradient norm -----*- CUDA -*-===//

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

/// The constants of one Adam / AdamW launch: read or computed once at the
/// top of the kernel and shared by every tensor it updates.
struct AdamConfig {
  float lr, scale, beta1, beta2, eps, decay, rbc1, rbc2;
  bool decoupled;
};

/// Adam / AdamW on every element of one tensor, grid-stride over the whole
/// launch; four elements per 16-byte access when every pointer allows.
MOEC_DEVICE_CALLED void adamUpdate(gptr<const float> param,
                                   gptr<const float> grad, gptr<const float> m,
                                   gptr<const float> v, gptr<float> paramOut,
                                   gptr<float> mOut, gptr<float> vOut,
                                   int64_t n, AdamConfig c) {
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) +
                        threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  auto step = [&](float &pv, float &mv, float &vv, float g) {
    adamStep(pv, mv, vv, g, c.lr, c.scale, c.beta1, c.beta2, c.eps, c.decay,
             c.decoupled, c.rbc1, c.rbc2);
  };
  int64_t done = 0;
  if (aligned16(param, grad, m, v, paramOut, mOut, vOut)) {
    for (int64_t q = first; q < n / 4; q += stride) {
      float4 pv = load4(param, q), mv = load4(m, q), vv = load4(v, q);
      const float4 g = load4(grad, q);
      step(pv.x, mv.x, vv.x, g.x);
      step(pv.y, mv.y, vv.y, g.y);
      step(pv.z, mv.z, vv.z, g.z);
      step(pv.w, mv.w, vv.w, g.w);
      store4(paramOut, q, pv);
      store4(mOut, q, mv);
      store4(vOut, q, vv);
    }
    done = n / 4 * 4;
  }
  for (int64_t i = done + first; i < n; i += stride) {
    float pv = param[i], mv = m[i], vv = v[i];
    step(pv, mv, vv, grad[i]);
    paramOut[i] = pv;
    mOut[i] = mv;
    vOut[i] = vv;
  }
}

/// SGD (with momentum when momentum > 0) on every element of one tensor,
/// as adamUpdate.
MOEC_DEVICE_CALLED void sgdUpdate(gptr<const float> param,
                                  gptr<const float> grad, gptr<const float> m,
                                  gptr<float> paramOut, gptr<float> mOut,
                                  int64_t n, float lr, float scale,
                                  float momentum, float decay) {
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) +
                        threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t done = 0;
  if (aligned16(param, grad, m, paramOut, mOut)) {
    for (int64_t q = first; q < n / 4; q += stride) {
      float4 pv = load4(param, q), mv = load4(m, q);
      const float4 g = load4(grad, q);
      sgdStep(pv.x, mv.x, g.x, lr, scale, momentum, decay);
      sgdStep(pv.y, mv.y, g.y, lr, scale, momentum, decay);
      sgdStep(pv.z, mv.z, g.z, lr, scale, momentum, decay);
      sgdStep(pv.w, mv.w, g.w, lr, scale, momentum, decay);
      store4(paramOut, q, pv);
      store4(mOut, q, mv);
    }
    done = n / 4 * 4;
  }
  for (int64_t i = done + first; i < n; i += stride) {
    float pv = param[i], mv = m[i];
    sgdStep(pv, mv, grad[i], lr, scale, momentum, decay);
    paramOut[i] = pv;
    mOut[i] = mv;
  }
}

/// Sum of squares over this block's share of one tensor (grid-stride with a
/// fixed grid), accumulated in double; 16-byte loads when x is aligned.
MOEC_DEVICE_CALLED double sumOfSquares(gptr<const float> x, int64_t n) {
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) +
                        threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  double s = 0.0;
  int64_t done = 0;
  if (aligned16(x)) {
    for (int64_t q = first; q < n / 4; q += stride) {
      const float4 v = load4(x, q);
      s += static_cast<double>(v.x) * v.x;
      s += static_cast<double>(v.y) * v.y;
      s += static_cast<double>(v.z) * v.z;
      s += static_cast<double>(v.w) * v.w;
    }
    done = n / 4 * 4;
  }
  for (int64_t i = done + first; i < n; i += stride) {
    double v = x[i];
    s += v * v;
  }
  return s;
}

} // namespace moec

#endif // MOEC_DEVICE_OPTIM_CUH
