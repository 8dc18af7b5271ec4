//===- ReportTest.cpp - the phase and gate statistics moec train prints ---===//

#include "Report.h"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>

using namespace moec;
using namespace moec::driver;

namespace {

StepResult gStep() {
  StepResult r;
  r.step = 7;
  r.phase = "G";
  r.scalars = {
      {"loss", 2.5}, {"ce", 2.25}, {"lr:gate", 1.0}, {"grad_norm", 0.5}};
  // Four experts' mean responsibilities, then the mean entropy in nats.
  r.gates["decoder.layers.0.attn"] = {0.1, 0.5, 0.3, 0.1, 1.1682824};
  r.gates["decoder.layers.1.attn"] = {0.25, 0.25, 0.25, 0.25, 1.3862944};
  return r;
}

TEST(Report, GateStatisticsInTheMetrics) {
  EXPECT_EQ(gateMetrics(gStep()),
            ", \"gate\": {"
            "\"decoder.layers.0.attn\": {\"entropy\": 1.16828, "
            "\"responsibility\": [0.1, 0.5, 0.3, 0.1]}, "
            "\"decoder.layers.1.attn\": {\"entropy\": 1.38629, "
            "\"responsibility\": [0.25, 0.25, 0.25, 0.25]}}");
  StepResult none;
  EXPECT_EQ(gateMetrics(none), "");
  StepResult nan;
  nan.gates["l"] = {std::nan(""), 1.0, std::numeric_limits<double>::infinity()};
  EXPECT_EQ(gateMetrics(nan),
            ", \"gate\": {\"l\": {\"entropy\": null, \"responsibility\": "
            "[null, 1]}}");
}

TEST(Report, PhaseAndGatesInTheProgressLine) {
  EXPECT_EQ(formatGates(gStep()),
            "gate decoder.layers.0.attn H 1.168 r[0.10 0.50 0.30 0.10]  "
            "gate decoder.layers.1.attn H 1.386 r[0.25 0.25 0.25 0.25]");
  std::string line = formatProgress(gStep(), 20, 2.4, 5, 0.01, 1000);
  EXPECT_EQ(line.substr(0, line.find("  mean ")),
            "step     7/20 G  loss 2.4000 (mean of 5)  this step: ce 2.2500  "
            "lr:gate 1.00e+00  |g| 0.500  gate decoder.layers.0.attn H 1.168 "
            "r[0.10 0.50 0.30 0.10]  gate decoder.layers.1.attn H 1.386 "
            "r[0.25 0.25 0.25 0.25]");
  // Without phases and gates the line reads as it always did.
  StepResult plain;
  plain.step = 3;
  plain.scalars = {
      {"loss", 1.0}, {"ce", 1.0}, {"lr", 1e-3}, {"grad_norm", 0.25}};
  line = formatProgress(plain, 10, 1.0, 1, 0.01, 1000);
  EXPECT_EQ(line.substr(0, line.find("  mean ")),
            "step     3/10  loss 1.0000 (mean of 1)  this step: ce 1.0000  lr "
            "1.00e-03  |g| 0.250");
}

} // namespace
