//===- ReportTest.cpp - the phase and gate statistics moec train prints ---===//

#include "Report.h"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <stdexcept>

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

TEST(Report, TheMedianIgnoresOneSlowStep) {
  EXPECT_EQ(median({}), 0);
  EXPECT_DOUBLE_EQ(median({0.003, 0.001, 0.002}), 0.002);
  // A step that captured a CUDA graph: of an even count, the mean of the
  // middle two.
  EXPECT_DOUBLE_EQ(median({0.004, 0.050, 0.001, 0.003}), 0.0035);
}

TEST(Report, GenerationTimeLine) {
  GenerateTimes times;
  times.promptTokens = 16;
  times.promptSeconds = 0.0031;
  EXPECT_EQ(formatGenerateTime(times), "prompt 16 tokens in 3.10 ms");
  times.tokenSeconds = {0.0005, 0.0009, 0.0004, 0.02, 0.0005};
  EXPECT_EQ(formatGenerateTime(times),
            "prompt 16 tokens in 3.10 ms; 5 tokens after it at 0.500 ms "
            "each (median; 2000 tokens/s)");
}

TEST(Report, EvaluationTimeLine) {
  // The tail batch (3 rows) is not among the later ones; the first is
  // left out when others ran.
  EXPECT_EQ(formatBatchTime(0.2, 4, {0.1, 0.125, 0.5}, 4, 512),
            "125.00 ms per batch of 4 x 512 (16384 tokens/s; median of 3 "
            "batches after the first)");
  EXPECT_EQ(formatBatchTime(0.2, 4, {0.1}, 4, 512),
            "100.00 ms per batch of 4 x 512 (20480 tokens/s; median of 1 "
            "batch after the first)");
  EXPECT_EQ(formatBatchTime(0.064, 2, {}, 4, 64),
            "64.00 ms per batch of 2 x 64 (2000 tokens/s; one batch, with "
            "its warm-up)");
}

TEST(Report, AccuracyLinePerObjective) {
  Accuracy accuracy;
  accuracy.add({{"ce", 2.0}, {"correct", 3.0}, {"predicted", 24.0}});
  accuracy.add({{"ce", 1.0}, {"correct", 2.0}, {"predicted", 16.0}});
  EXPECT_EQ(accuracy.correct, 5);
  EXPECT_EQ(accuracy.total, 40);
  EXPECT_EQ(formatAccuracy("lm", accuracy),
            "next-token accuracy 12.50% (5 of 40 predicted tokens)");
  EXPECT_EQ(formatAccuracy("translate", accuracy),
            "next-token accuracy 12.50% (5 of 40 predicted tokens)");
  EXPECT_EQ(formatAccuracy("mlm", accuracy),
            "masked-token accuracy 12.50% (5 of 40 predicted tokens)");
  EXPECT_EQ(formatAccuracy("classify", accuracy),
            "accuracy 12.50% (5 of 40 examples)");
  // Nothing counted: a language model says nothing, an MLM batch with no
  // masked token says 0 of 0.
  Accuracy none;
  EXPECT_EQ(formatAccuracy("lm", none), "");
  EXPECT_EQ(formatAccuracy("mlm", none),
            "masked-token accuracy 0.00% (0 of 0 predicted tokens)");
  // A batch without the counts is a bundle error, not a zero.
  EXPECT_THROW(none.add({{"ce", 1.0}}), std::out_of_range);
}

} // namespace
