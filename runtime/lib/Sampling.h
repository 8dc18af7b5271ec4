//===- Sampling.h - choosing the next token ---------------------*- C++ -*-===//

#ifndef MOEC_RUNTIME_SAMPLING_H
#define MOEC_RUNTIME_SAMPLING_H

#include <cstdint>
#include <vector>

namespace moec::detail {

/// The next token from one row of logits: the most likely one (lowest index
/// on ties) when `temperature` is 0; otherwise a draw from
/// softmax(logits / temperature) restricted to the `topK` most likely tokens
/// (0 = all), using uniform number `index` of the Philox stream of `seed`.
int32_t sampleToken(const std::vector<double> &logits, double temperature,
                    int64_t topK, uint64_t seed, uint64_t index);

} // namespace moec::detail

#endif // MOEC_RUNTIME_SAMPLING_H
