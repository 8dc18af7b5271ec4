//===- Stopwatch.h - wall time since a point, in seconds --------*- C++ -*-===//
//
// Every time moec reports (steps, batches, tokens, compiles, launches, waits)
// is read from the steady clock, which no change of the system time moves.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_SUPPORT_STOPWATCH_H
#define MOEC_SUPPORT_STOPWATCH_H

#include <chrono>

namespace moec::support {

/// Seconds of the steady clock since `start`.
inline double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       start)
      .count();
}

} // namespace moec::support

#endif // MOEC_SUPPORT_STOPWATCH_H
