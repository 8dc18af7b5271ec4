//===- Accuracy.h - correct predictions over held-out batches ---*- C++ -*-===//

#ifndef MOEC_TOOLS_MOEC_ACCURACY_H
#define MOEC_TOOLS_MOEC_ACCURACY_H

#include <cmath>
#include <cstdint>
#include <map>
#include <string>

namespace moec::driver {

/// Correct and counted predictions of the positions with a target, summed
/// over the batches evaluate() ran.
struct Accuracy {
  int64_t correct = 0, total = 0;

  /// Adds one batch's "correct" and "predicted" outputs (std::out_of_range
  /// when the program has none).
  void add(const std::map<std::string, double> &scalars) {
    correct += std::llround(scalars.at("correct"));
    total += std::llround(scalars.at("predicted"));
  }

  double percent() const {
    return total ? 100.0 * static_cast<double>(correct) /
                       static_cast<double>(total)
                 : 0.0;
  }
};

} // namespace moec::driver

#endif // MOEC_TOOLS_MOEC_ACCURACY_H
