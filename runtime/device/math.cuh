//===- math.cuh - pointwise functions --------------------------*- CUDA -*-===//
//
// Activations and their derivatives (the formulas of moe.activation), the
// Philox-4x32-10 generator (bit-identical to runtime/lib/Philox.cpp, so
// dropout masks agree with the cpu device), the learning-rate schedule and
// the rotation of moe.rope, and finiteness tests by the bits.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_MATH_CUH
#define MOEC_DEVICE_MATH_CUH

namespace moec {

/// Neither infinite nor NaN: a test of the exponent bits, which no
/// floating-point mode can fold away.
MOEC_DEVICE bool isFiniteValue(float v) {
  return (__float_as_uint(v) & 0x7f800000u) != 0x7f800000u;
}

/// NaN (any payload), by its bits for the same reason.
MOEC_DEVICE bool isNanValue(float v) {
  return (__float_as_uint(v) & 0x7fffffffu) > 0x7f800000u;
}

/// f(x) of an activation, computed in float.
template <Activation K> MOEC_DEVICE float activate(float x) {
  if (K == Activation::Identity)
    return x;
  if (K == Activation::Relu)
    return x > 0.0f ? x : 0.0f;
  if (K == Activation::GeluTanh) {
    float t = tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x));
    return 0.5f * x * (1.0f + t);
  }
  if (K == Activation::GeluErf)
    return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
  if (K == Activation::Silu)
    return x / (1.0f + expf(-x));
  return tanhf(x);
}

/// f'(x) of an activation (relu'(0) = 0).
template <Activation K> MOEC_DEVICE float activateGrad(float x) {
  if (K == Activation::Identity)
    return 1.0f;
  if (K == Activation::Relu)
    return x > 0.0f ? 1.0f : 0.0f;
  if (K == Activation::GeluTanh) {
    float x2 = x * x;
    float t = tanhf(0.7978845608028654f * (x + 0.044715f * x2 * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * 0.7978845608028654f *
                                   (1.0f + 3.0f * 0.044715f * x2);
  }
  if (K == Activation::GeluErf)
    return 0.5f * (1.0f + erff(x * 0.7071067811865476f)) +
           x * expf(-0.5f * x * x) * 0.3989422804014327f;
  if (K == Activation::Silu) {
    float s = 1.0f / (1.0f + expf(-x));
    return s * (1.0f + x * (1.0f - s));
  }
  float t = tanhf(x);
  return 1.0f - t * t;
}

/// Ten rounds of Philox-4x32 on counter c with key (k0, k1); word `word`.
MOEC_DEVICE uint32_t philoxWord(uint32_t c0, uint32_t c1, uint32_t c2,
                                uint32_t c3, uint32_t k0, uint32_t k1,
                                int word) {
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return word == 0 ? c0 : word == 1 ? c1 : word == 2 ? c2 : c3;
}

/// The `index`-th uniform in [0, 1) of the stream (seed, stream): 24 bits,
/// exactly representable in float (runtime/include/moec/Philox.h).
MOEC_DEVICE double philoxUniform(uint64_t seed, uint64_t stream,
                                 uint64_t index) {
  uint64_t block = index / 4;
  uint32_t w = philoxWord(static_cast<uint32_t>(block),
                          static_cast<uint32_t>(block >> 32),
                          static_cast<uint32_t>(stream),
                          static_cast<uint32_t>(stream >> 32),
                          static_cast<uint32_t>(seed),
                          static_cast<uint32_t>(seed >> 32),
                          static_cast<int>(index % 4));
  return static_cast<double>(w >> 8) * (1.0 / 16777216.0);
}


/// moe.lr_schedule at 1-based step `s`, in double.
template <LrSchedule K>
MOEC_DEVICE double learningRate(int64_t s, double base, int64_t warmup,
                                int64_t total, double final, double power) {
  double step = static_cast<double>(s), w = static_cast<double>(warmup);
  if (K != LrSchedule::Constant && s < warmup)
    return base * step / w;
  if (K == LrSchedule::Constant)
    return base;
  if (K == LrSchedule::InverseSqrt)
    return warmup > 0 ? base * sqrt(w / step) : base / sqrt(step);
  double span = total - warmup > 1 ? static_cast<double>(total - warmup) : 1.0;
  if (K == LrSchedule::Linear || K == LrSchedule::Polynomial) {
    double left = total - s > 0 ? static_cast<double>(total - s) : 0.0;
    if (K == LrSchedule::Linear)
      return final + (base - final) * left / span;
    return final + (base - final) * pow(left / span, power);
  }
  double progress = (step - w) / span;
  progress = progress < 1.0 ? progress : 1.0;
  return final + (base - final) * 0.5 * (1.0 + cos(3.141592653589793 * progress));
}

/// cos and sin of moe.rope's angle for pair `pair` of a `rotaryDim`-wide
/// rotation at position p: f32 values computed as the op defines them, so
/// every device gets the bits the cpu device gets.
MOEC_DEVICE void ropeCosSin(int64_t p, int64_t pair, int64_t rotaryDim,
                            double base, float &c, float &s) {
  float inv = static_cast<float>(pow(base, -2.0 * static_cast<double>(pair) /
                                               static_cast<double>(rotaryDim)));
  double angle = static_cast<double>(static_cast<float>(p) * inv);
  c = static_cast<float>(cos(angle));
  s = static_cast<float>(sin(angle));
}

/// Element i of moe.rope over x [rows, heads * HeadDim] whose row is at
/// position p: x[i] * cos + partner * (-sin in the first half, +sin in the
/// second), the sign flipped by Inverse.
template <int64_t HeadDim, int64_t RotaryDim, bool Inverse, typename T>
MOEC_DEVICE float rope(gptr<const T> x, int64_t i, int64_t p, double base) {
  const float v = toFloat(x[i]);
  const int64_t j = i % HeadDim;
  if (j >= RotaryDim)
    return v;
  constexpr int64_t kHalf = RotaryDim / 2;
  const bool first = j < kHalf;
  const float partner = toFloat(x[first ? i + kHalf : i - kHalf]);
  float c, s;
  ropeCosSin(p, first ? j : j - kHalf, RotaryDim, base, c, s);
  return v * c + partner * (first != Inverse ? -s : s);
}

} // namespace moec

#endif // MOEC_DEVICE_MATH_CUH
