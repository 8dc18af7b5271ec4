//===- HeldOut.h - the objective over a held-out split ----------*- C++ -*-===//
//
// moec eval and moec train --valid-batches both run the evaluation program
// over held-out batches; this is the one loop they share.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TOOLS_MOEC_HELDOUT_H
#define MOEC_TOOLS_MOEC_HELDOUT_H

#include "Accuracy.h"
#include "moec/Data.h"
#include "moec/Session.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moec::driver {

/// Whether the program evaluate() runs outputs "correct" and "predicted"
/// (a bundle compiled by an older moec does not).
bool countsPredictions(const Session &session);

struct HeldOutResult {
  /// The cross-entropy, each batch weighted by its rows.
  double ce = 0;
  int64_t rows = 0, batches = 0;
  /// Absent when the bundle does not count predictions.
  std::optional<Accuracy> accuracy;
  /// The first batch's time and rows (it warms the device up), and the
  /// times of the full batches after it.
  double firstSeconds = 0;
  int64_t firstRows = 0;
  std::vector<double> laterSeconds;
};

/// Runs evaluate() on up to `batches` (> 0) batches of the training
/// config's shape. A split of whole examples is read once, not wrapped
/// around: it ends early, and its last batch may be short.
HeldOutResult evaluateHeldOut(Session &session, const DataSource &source,
                              int64_t batches);

} // namespace moec::driver

#endif // MOEC_TOOLS_MOEC_HELDOUT_H
