//===- Train.cpp - moec train ---------------------------------------------===//

#include "Commands.h"
#include "HeldOut.h"
#include "Report.h"
#include "moec/Cuda.h"
#include "moec/Error.h"
#include "moec/Files.h"
#include "moec/Session.h"
#include "moec/support/Stopwatch.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <iostream>
#include <optional>

namespace moec::driver {
namespace {

/// This step's routing statistics per routed layer: the share of
/// assignments capacity dropped, and for MH-MoE layers the sub-token and
/// expert activation.
std::string routingMetrics(const std::vector<ExpertLoad> &before,
                           const std::vector<ExpertLoad> &after) {
  std::vector<std::string> layers;
  for (size_t l = 0; l < after.size(); ++l) {
    ExpertLoad step = after[l];
    if (l < before.size()) {
      step.assignments -= before[l].assignments;
      step.keptAssignments -= before[l].keptAssignments;
      step.rows -= before[l].rows;
      step.activeRows -= before[l].activeRows;
      step.expertSlots -= before[l].expertSlots;
      step.reachedExperts -= before[l].reachedExperts;
    }
    if (step.assignments <= 0)
      continue;
    std::string fields =
        fmt::format("\"dropped\": {:.6g}", step.droppedFraction());
    if (isMultiHead(step))
      fields += fmt::format(", \"subtoken_activation\": {:.6g}, "
                            "\"expert_activation\": {:.6g}",
                            step.rowActivation(), step.expertActivation());
    layers.push_back(fmt::format("\"{}\": {{{}}}", step.layer, fields));
  }
  if (layers.empty())
    return "";
  return fmt::format(", \"routing\": {{{}}}", fmt::join(layers, ", "));
}

std::string metricsLine(const StepResult &result, double seconds,
                        const std::vector<ExpertLoad> &before,
                        const std::vector<ExpertLoad> &after) {
  std::string line = fmt::format("{{\"step\": {}", result.step);
  if (!result.phase.empty())
    line += fmt::format(", \"phase\": \"{}\"", result.phase);
  for (const auto &[name, value] : result.scalars)
    line += fmt::format(", \"{}\": {}", name,
                        std::isfinite(value) ? fmt::format("{:.9g}", value)
                                             : std::string("null"));
  line += fmt::format(", \"time_s\": {:.6f}, \"host_s\": {:.6f}", seconds,
                      std::max(0.0, seconds - result.deviceWaitSeconds));
  if (!after.empty()) {
    line += ", \"load\": {";
    for (size_t l = 0; l < after.size(); ++l) {
      std::vector<std::string> counts;
      for (size_t e = 0; e < after[l].tokens.size(); ++e) {
        double prev = e < before[l].tokens.size() ? before[l].tokens[e] : 0;
        counts.push_back(fmt::format("{}", after[l].tokens[e] - prev));
      }
      line += fmt::format("{}\"{}\": [{}]", l ? ", " : "", after[l].layer,
                          fmt::join(counts, ", "));
    }
    line += "}";
    line += routingMetrics(before, after);
  }
  line += gateMetrics(result);
  return line + "}\n";
}

class TrainCommand : public cli::Command {
public:
  TrainCommand() : Command("train", "Train a model on its spec's data.") {
    positional("FILE", "a .moe spec (compiled first) or a bundle", input);
    option("device", "DEVICE", "cpu (default), cuda or emu", device)
        .oneOf(deviceChoices());
    option("dtype", "DTYPE", "Override the spec's dtype (f32, f64, bf16)",
           dtype)
        .oneOf(dtypeChoices());
    option("f32-matmul", "MODE", kF32MatmulHelp, f32Matmul)
        .oneOf(f32MatmulChoices());
    option("steps", "N",
           "Optimizer steps this run takes (default: the spec's); after "
           "--resume, N more steps",
           steps)
        .atLeast(int64_t{0});
    option("seed", "S",
           "Seed for initialisation, dropout and data (default: the spec's)",
           seed);
    option("save", "CKPT", "Write a checkpoint here at the end", save)
        .nonEmpty();
    option("resume", "CKPT", "Start from this checkpoint", resume).nonEmpty();
    option("metrics", "FILE.jsonl", "Append one JSON object per step", metrics)
        .nonEmpty();
    option("valid-batches", "N",
           "Held-out batches evaluated after training, for the "
           "cross-entropy and the accuracy (default 4; 0 skips)",
           validBatches)
        .atLeast(int64_t{0});
    flag("profile",
         "Print the time spent per op and per source location at the end",
         profile);
    option("log-every", "N", "Print progress every N steps (default: the "
                             "spec's)",
           logEvery)
        .atLeast(int64_t{1});
  }

  int run() override;

private:
  std::string input, device = "cpu", dtype, f32Matmul, save, resume, metrics;
  int64_t steps = -1, validBatches = 4, logEvery = -1;
  uint64_t seed = 0;
  bool profile = false;
};

int TrainCommand::run() {
  // --save may name the --resume checkpoint: it is read whole first and
  // replaced only at the end.
  checkOutputsAreDistinct({{"the model", input}, {"--resume", resume}},
                          {{"--save", save}, {"--metrics", metrics}});
  // The cuda device's kernel cache is keyed by NVRTC's version: load NVRTC
  // while the model is read.
  std::optional<NvrtcPreload> nvrtc;
  if (device == "cuda")
    nvrtc.emplace();
  Bundle bundle = loadModel(input, dtype, "sm_80", f32Matmul);
  std::vector<NamedPath> dataFiles;
  for (const std::string &path : bundle.data().paths)
    dataFiles.push_back({"the data file", path});
  if (!bundle.model().tokenizer.path.empty())
    dataFiles.push_back({"the tokenizer", bundle.model().tokenizer.path});
  checkOutputsAreDistinct(dataFiles, {{"--save", save}, {"--metrics", metrics}});
  SessionOptions options;
  options.device = device;
  if (given("seed"))
    options.seed = seed;
  Session session(bundle, options);
  if (!resume.empty())
    session.loadCheckpoint(resume);
  // --steps counts the steps this run takes: after a resume, N more.
  const int64_t firstStep = session.step();
  const TrainingConfig &config = bundle.training();
  ModelData modelData =
      openModelData(bundle, input, session.seed(), Split::Train);
  const std::unique_ptr<DataSource> &data = modelData.source;
  // The held-out split is opened before the first step, so that a fault in
  // it stops the run before training rather than after it.
  std::optional<ModelData> validData;
  if (validBatches > 0 && bundle.data().holdsOut())
    validData = openModelData(bundle, input, session.seed(), Split::Valid);
  int64_t total = steps >= 0 ? steps : config.steps;
  int64_t every = logEvery > 0 ? logEvery : config.logEvery;

  // Appended to a copy that replaces the file at the end, so a failed run
  // never leaves it half-written. A write error stops the metrics, not the
  // training: the run still saves its checkpoint, then fails.
  std::optional<OutputFile> metricsFile;
  std::string metricsError;
  if (!metrics.empty())
    metricsFile.emplace(metrics, /*append=*/true);
  auto writeMetrics = [&](const std::string &line) {
    if (!metricsFile)
      return;
    try {
      metricsFile->write(line);
    } catch (const Error &e) {
      metricsError = e.what();
      std::cerr << "moec: warning: " << metricsError
                << "; training goes on without metrics\n";
      metricsFile.reset();
    }
  };
  auto finishMetrics = [&] {
    if (metricsFile) {
      try {
        metricsFile->commit();
      } catch (const Error &e) {
        metricsError = e.what();
      }
    }
    metricsFile.reset();
  };

  // The first step allocates and fills caches (and on the cuda device
  // loads kernels); the profile is of the steady steps after it.
  bool skipFirst = profile && total > 1;
  int64_t profiledSteps = skipFirst ? total - 1 : total;
  session.setProfiling(profile && !skipFirst);
  printModelSummary(std::cout, session, data->describe());
  if (!resume.empty())
    std::cout << fmt::format("resumed from {} at step {}; training {} more "
                             "steps, to step {}\n",
                             resume, firstStep, total, firstStep + total);
  std::cout << fmt::format("training {} steps, batch {} x {} tokens\n", total,
                           config.batch, config.seqLen)
            << std::flush;

  double first = NAN, windowSum = 0;
  int64_t windowCount = 0;
  auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < total; ++i) {
    Batch batch = data->batch(session.step(), config.batch, config.seqLen);
    std::vector<ExpertLoad> before = session.expertLoad();
    auto t0 = std::chrono::steady_clock::now();
    StepResult result = session.trainStep(batch);
    if (skipFirst && i == 0)
      session.setProfiling(true);
    double seconds = support::secondsSince(t0);
    double loss = result.scalars.at("loss");
    if (metricsFile)
      writeMetrics(metricsLine(result, seconds, before, session.expertLoad()));
    if (!std::isfinite(loss)) {
      // The metrics show how it diverged.
      finishMetrics();
      throw Error(fmt::format("training diverged at step {} (loss = {}); "
                              "lower the learning rate or enable clip_norm",
                              result.step, loss));
    }
    if (std::isnan(first))
      first = loss;
    windowSum += loss;
    ++windowCount;
    if (i == 0 || (i + 1) % every == 0 || i + 1 == total) {
      double elapsed = support::secondsSince(start);
      std::cout << formatProgress(result, firstStep + total,
                                  windowSum / windowCount, windowCount,
                                  elapsed / (i + 1),
                                  config.batch * config.seqLen)
                << "\n"
                << std::flush;
      windowSum = 0;
      windowCount = 0;
    }
  }
  finishMetrics();
  if (profile) {
    if (skipFirst)
      std::cout << fmt::format("profile of steps 2-{} (the first step, which "
                               "allocates and warms up, is left out):\n",
                               total);
    printProfile(std::cout, session.profile(), profiledSteps);
    printLayerProfile(std::cout, session.layerProfile(), profiledSteps);
  }
  // Before evaluation adds its own routing to the statistics.
  std::vector<ExpertLoad> trainingLoad = session.expertLoad();
  // Saved before validating: nothing the evaluation meets can cost the
  // weights just trained.
  if (!save.empty()) {
    session.saveCheckpoint(save);
    std::cout << "saved checkpoint " << save << " (step " << session.step()
              << ")\n";
  }
  if (validData) {
    HeldOutResult held =
        evaluateHeldOut(session, *validData->source, validBatches);
    std::string line = fmt::format(
        "validation: cross-entropy {:.4f} over {} held-out "
        "rows ({} batch{})",
        held.ce, held.rows, held.batches, held.batches == 1 ? "" : "es");
    if (held.accuracy)
      if (std::string text =
              formatAccuracy(bundle.model().objective, *held.accuracy);
          !text.empty())
        line += ", " + text;
    std::cout << line << "\n";
  } else if (validBatches > 0) {
    std::cout << "validation: skipped (valid_fraction = 0 holds nothing "
                 "out)\n";
  }
  printExpertLoad(std::cout, trainingLoad, "expert load over training");
  if (!metricsError.empty())
    throw Error(metricsError);
  return 0;
}

} // namespace

std::unique_ptr<cli::Command> makeTrainCommand() {
  return std::make_unique<TrainCommand>();
}

} // namespace moec::driver
