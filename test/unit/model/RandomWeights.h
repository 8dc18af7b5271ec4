//===- RandomWeights.h - deterministic weights for model tests --*- C++ -*-===//

#ifndef MOEC_TEST_MODEL_RANDOMWEIGHTS_H
#define MOEC_TEST_MODEL_RANDOMWEIGHTS_H

#include "moec/Tensor.h"

namespace moec::test {

/// An f32 tensor of values uniform in [-scale, scale], a pure function of
/// `seed` (xorshift), so that tests set the same weights on every run.
inline Tensor randomWeights(const Shape &shape, uint64_t seed, double scale) {
  Tensor t(DType::F32, shape);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 7;
  for (int64_t i = 0; i < t.numel(); ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    t.set(i, scale * (static_cast<double>(x % 20001) / 10000.0 - 1.0));
  }
  return t;
}

} // namespace moec::test

#endif // MOEC_TEST_MODEL_RANDOMWEIGHTS_H
