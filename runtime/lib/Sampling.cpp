//===- Sampling.cpp - choosing the next token -----------------------------===//

#include "Sampling.h"
#include "moec/Error.h"
#include "Philox.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace moec::detail {

int32_t sampleToken(const std::vector<double> &logits, double temperature,
                    int64_t topK, uint64_t seed, uint64_t index) {
  if (logits.empty())
    throw Error("cannot sample from an empty row of logits");
  for (double l : logits)
    if (!std::isfinite(l))
      throw Error("the model produced a non-finite logit; the weights have "
                  "diverged");
  if (temperature <= 0)
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) -
                                logits.begin());
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  size_t keep = topK > 0 ? std::min<size_t>(topK, order.size()) : order.size();
  std::vector<double> weights(keep);
  double top = logits[order[0]], total = 0;
  for (size_t i = 0; i < keep; ++i)
    total += weights[i] = std::exp((logits[order[i]] - top) / temperature);
  double u = philoxUniform(seed, streamId("generate"), index) * total;
  for (size_t i = 0; i < keep; ++i) {
    u -= weights[i];
    if (u < 0)
      return order[i];
  }
  return order[keep - 1];
}

} // namespace moec::detail
