//===- Report.h - what the driver prints ------------------------*- C++ -*-===//

#ifndef MOEC_TOOLS_MOEC_REPORT_H
#define MOEC_TOOLS_MOEC_REPORT_H

#include "Accuracy.h"
#include "moec/Session.h"

#include <ostream>
#include <string>
#include <vector>

namespace moec::driver {

/// "model 'lm': decoder, 1.2M parameters, 4 blocks (2 MoE) on cpu; data: ..."
void printModelSummary(std::ostream &os, const Session &session,
                       const std::string &dataDescription);

/// One progress line, each figure labelled: step of `lastStep`, the mean
/// loss over the last `windowSteps` steps, this step's other scalars, and
/// the mean time per step and throughput since the start.
std::string formatProgress(const StepResult &result, int64_t lastStep,
                           double meanLoss, int64_t windowSteps,
                           double secondsPerStep, int64_t tokensPerStep);

/// The gate statistics of a step for its metrics line: `, "gate":
/// {"<layer>": {"entropy": e, "responsibility": [r_1, ..., r_H]}, ...}`, or
/// empty when the step has none (see StepResult::gates).
std::string gateMetrics(const StepResult &result);

/// The gate statistics in the progress line: per layer "gate <layer> H e
/// r[r_1 ... r_H]", the entropy in nats; empty when the step has none.
std::string formatGates(const StepResult &result);

/// A table of each MoE layer's expert shares.
/// Whether the layer routes several rows per token (MH-MoE's sub-tokens).
bool isMultiHead(const ExpertLoad &layer);

void printExpertLoad(std::ostream &os, const std::vector<ExpertLoad> &load,
                     const std::string &title);

/// The time per op kind, most expensive first, per step and as a share.
void printProfile(std::ostream &os,
                  const std::vector<Session::OpTime> &profile, int64_t steps);

/// The same time per source location (layer statement), forward and
/// backward, per step; prints nothing when the device kept none.
void printLayerProfile(std::ostream &os,
                       const std::vector<Session::LayerTime> &layers,
                       int64_t steps);

/// The median of `values`, 0 when there are none: one slow step (a GPU
/// capturing a CUDA graph) does not move it.
double median(std::vector<double> values);

/// moec run's time line: "prompt 16 tokens in 3.10 ms; 63 tokens after it
/// at 0.840 ms each (median; 1190 tokens/s)", the prefill and then the
/// steady per-token rate.
std::string formatGenerateTime(const GenerateTimes &times);

/// moec eval's time line: "107.45 ms per batch of 4 x 512 (19059
/// tokens/s; median of 5 batches after the first)" from the full batches
/// after the first, or the first batch's time (`firstRows` rows) when
/// there are none.
std::string formatBatchTime(double firstSeconds, int64_t firstRows,
                            const std::vector<double> &laterSeconds,
                            int64_t batch, int64_t seqLen);

/// The objective's accuracy line: "next-token accuracy 12.50% (3 of 24
/// predicted tokens)" for lm and translate (empty when nothing was
/// counted), "masked-token accuracy ..." for mlm, "accuracy ... examples"
/// for classify.
std::string formatAccuracy(const std::string &objective,
                           const Accuracy &accuracy);

} // namespace moec::driver

#endif // MOEC_TOOLS_MOEC_REPORT_H
