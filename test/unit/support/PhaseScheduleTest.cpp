//===- PhaseScheduleTest.cpp - which steps of coordinate descent are G ----===//

#include "moec/support/PhaseSchedule.h"

#include <algorithm>
#include <gtest/gtest.h>
#include <string>

using moec::support::PhaseSchedule;

namespace {

PhaseSchedule every(int64_t period, int64_t length, int64_t offset = 0) {
  PhaseSchedule s;
  s.period = period;
  s.length = length;
  s.offset = offset;
  return s;
}

PhaseSchedule first(int64_t n) {
  PhaseSchedule s;
  s.kind = PhaseSchedule::Kind::First;
  s.first = n;
  return s;
}

/// "F" or "G" for each of the first `steps` steps.
std::string phases(const PhaseSchedule &s, int64_t steps) {
  std::string out;
  for (int64_t i = 0; i < steps; ++i)
    out += s.isGStep(i) ? 'G' : 'F';
  return out;
}

// The schedules the spec's examples name, written out by hand.
TEST(PhaseSchedule, StepsByHand) {
  // One G step in five: steps 5, 10, 15.
  EXPECT_EQ(phases(every(5, 1), 15), "FFFFGFFFFGFFFFG");
  // The last two of every window of four.
  EXPECT_EQ(phases(every(4, 2), 12), "FFGGFFGGFFGG");
  // Every step a G step.
  EXPECT_EQ(phases(every(3, 3), 6), "GGGGGG");
  // An offset of one moves the windows one step later.
  EXPECT_EQ(phases(every(4, 2, 1), 12), "GFFGGFFGGFFG");
  EXPECT_EQ(phases(every(4, 1, 3), 8), "FFGFFFGF");
  // The paper's "G steps in every 5th epoch" for epochs of 2 steps.
  EXPECT_EQ(phases(every(10, 2), 20), "FFFFFFFFGGFFFFFFFFGG");
  EXPECT_EQ(phases(first(3), 7), "GGGFFFF");
}

// The closed form of gStepsIn agrees with counting step by step.
TEST(PhaseSchedule, CountsMatchTheSteps) {
  for (int64_t period = 1; period <= 7; ++period)
    for (int64_t length = 1; length <= period; ++length)
      for (int64_t offset = 0; offset < period; ++offset) {
        PhaseSchedule s = every(period, length, offset);
        int64_t counted = 0;
        for (int64_t steps = 0; steps <= 40; ++steps) {
          EXPECT_EQ(s.gStepsIn(steps), counted)
              << "every(" << period << ", " << length << ", " << offset
              << ") over " << steps << " steps";
          counted += s.isGStep(steps);
        }
      }
  EXPECT_EQ(first(5).gStepsIn(3), 3);
  EXPECT_EQ(first(5).gStepsIn(100), 5);
  // Runs may take 2^40 steps: no loop over them.
  EXPECT_EQ(every(500, 100).gStepsIn(int64_t(1) << 40),
            (int64_t(1) << 40) / 500 * 100 +
                std::max<int64_t>(0, (int64_t(1) << 40) % 500 - 400));
}

} // namespace
