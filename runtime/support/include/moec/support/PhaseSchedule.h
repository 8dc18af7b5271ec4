//===- PhaseSchedule.h - the G steps of coordinate descent --*- C++ -*-===//
//
// `phases = coordinate_descent(group = ..., g_steps = ...)` alternates F
// steps (every trainable parameter outside the group) with G steps (only the
// group). The schedule is a pure function of the step index, so the checker
// (update counts for the learning-rate schedules), the compiler and the
// runtime (which program a step runs, resumed runs) agree on it.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_SUPPORT_PHASESCHEDULE_H
#define MOEC_SUPPORT_PHASESCHEDULE_H

#include <algorithm>
#include <cstdint>

namespace moec::support {

struct PhaseSchedule {
  enum class Kind { Every, First };
  Kind kind = Kind::Every;
  /// every: step n (from 1) is a G step when (n - 1 - offset) mod period >=
  /// period - length: the last `length` steps of each window of `period`.
  int64_t period = 1, length = 1, offset = 0;
  /// first: the first `first` steps are G steps, then only F steps.
  int64_t first = 0;
  /// A G step also takes an F update on the same batch, after the G update
  /// (the MAE paper's Algorithm 3); otherwise it replaces the F step.
  bool thenF = false;

  /// Whether the step with 0-based index `index` is a G step.
  bool isGStep(int64_t index) const {
    if (kind == Kind::First)
      return index < first;
    return windowPosition(index) >= period - length;
  }

  /// The G steps among the first `steps` steps (closed form: runs may take
  /// up to 2^40 steps).
  int64_t gStepsIn(int64_t steps) const {
    if (steps <= 0)
      return 0;
    if (kind == Kind::First)
      return std::min(steps, first);
    // Step i sits at window position (i + w) mod period, w that of step 0;
    // count the j = i + w in [w, steps + w) whose j mod period is late.
    auto upTo = [&](int64_t m) {
      return m / period * length +
             std::max<int64_t>(0, m % period - (period - length));
    };
    int64_t w = windowPosition(0);
    return upTo(steps + w) - upTo(w);
  }

  /// The F updates among the first `steps` steps.
  int64_t fStepsIn(int64_t steps) const {
    return thenF ? std::max<int64_t>(steps, 0) : steps - gStepsIn(steps);
  }

private:
  int64_t windowPosition(int64_t index) const {
    int64_t q = (index - offset) % period;
    return q < 0 ? q + period : q;
  }
};

} // namespace moec::support

#endif // MOEC_SUPPORT_PHASESCHEDULE_H
