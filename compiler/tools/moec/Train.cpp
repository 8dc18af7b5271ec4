//===- Train.cpp - moec train ---------------------------------------------===//

#include "Commands.h"
#include "Report.h"
#include "moec/Error.h"
#include "moec/Session.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <fstream>

namespace cl = llvm::cl;

static cl::SubCommand trainCommand("train",
                                   "Train a model on its spec's data");
static cl::opt<std::string> input(cl::Positional, cl::Required,
                                  cl::desc("<file.moe | bundle>"),
                                  cl::sub(trainCommand));
static cl::opt<std::string> device("device",
                                   cl::desc("cpu (default), cuda or emu"),
                                   cl::init("cpu"), cl::sub(trainCommand));
static cl::opt<int64_t> steps("steps",
                              cl::desc("Optimizer steps (default: the "
                                       "spec's)"),
                              cl::init(-1), cl::sub(trainCommand));
static cl::opt<int64_t> seed("seed",
                             cl::desc("Seed for initialisation, dropout and "
                                      "data (default: the spec's)"),
                             cl::init(-1), cl::sub(trainCommand));
static cl::opt<std::string> save("save",
                                 cl::desc("Write a checkpoint here at the end"),
                                 cl::value_desc("ckpt"), cl::sub(trainCommand));
static cl::opt<std::string> resume("resume",
                                   cl::desc("Start from this checkpoint"),
                                   cl::value_desc("ckpt"),
                                   cl::sub(trainCommand));
static cl::opt<std::string> metrics("metrics",
                                    cl::desc("Append one JSON object per step "
                                             "to this file"),
                                    cl::value_desc("file.jsonl"),
                                    cl::sub(trainCommand));
static moec::driver::DtypeOption dtype(trainCommand);
static cl::opt<int64_t> validBatches(
    "valid-batches",
    cl::desc("Batches of held-out data to evaluate after training (default "
             "4; 0 skips)"),
    cl::init(4), cl::sub(trainCommand));
static cl::opt<bool> profile("profile",
                            cl::desc("Print the time spent per op at the end"),
                            cl::sub(trainCommand));
static cl::opt<int64_t> logEvery("log-every",
                                 cl::desc("Print progress every N steps "
                                          "(default: the spec's)"),
                                 cl::init(-1), cl::sub(trainCommand));

bool moec::driver::isTrainCommand() {
  return static_cast<bool>(trainCommand);
}

namespace {

std::string metricsLine(const moec::StepResult &result, double seconds,
                        const std::vector<moec::ExpertLoad> &before,
                        const std::vector<moec::ExpertLoad> &after) {
  std::string line = fmt::format("{{\"step\": {}", result.step);
  for (const auto &[name, value] : result.scalars)
    line += fmt::format(", \"{}\": {}", name,
                        std::isfinite(value) ? fmt::format("{:.9g}", value)
                                             : std::string("null"));
  line += fmt::format(", \"time_s\": {:.6f}", seconds);
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
  }
  return line + "}\n";
}

} // namespace

int moec::driver::runTrain() {
  Bundle bundle = loadModel(input, dtype);
  SessionOptions options;
  options.device = device;
  if (seed >= 0)
    options.seed = static_cast<uint64_t>(seed);
  Session session(bundle, options);
  if (!resume.empty())
    session.loadCheckpoint(resume);
  const TrainingConfig &config = bundle.training();
  std::unique_ptr<DataSource> data = openDataSource(
      bundle.data(), bundle.model().vocab, session.seed(), Split::Train);
  int64_t total = steps >= 0 ? steps.getValue() : config.steps;
  int64_t every = logEvery > 0 ? logEvery.getValue() : config.logEvery;

  std::ofstream metricsFile;
  if (!metrics.empty()) {
    metricsFile.open(metrics, std::ios::app);
    if (!metricsFile)
      throw Error(metrics + ": cannot open for writing");
  }

  session.setProfiling(profile);
  printModelSummary(llvm::outs(), session, data->describe());
  llvm::outs() << fmt::format("training {} steps, batch {} x {} tokens\n",
                              total, config.batch, config.seqLen);
  llvm::outs().flush();

  double first = NAN, windowSum = 0;
  int64_t windowCount = 0;
  auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < total; ++i) {
    Batch batch = data->batch(session.step(), config.batch, config.seqLen);
    std::vector<ExpertLoad> before = session.expertLoad();
    auto t0 = std::chrono::steady_clock::now();
    StepResult result = session.trainStep(batch);
    double seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - t0)
                         .count();
    double loss = result.scalars.at("loss");
    if (metricsFile.is_open()) {
      metricsFile << metricsLine(result, seconds, before, session.expertLoad());
      metricsFile.flush();
    }
    if (!std::isfinite(loss))
      throw Error(fmt::format("training diverged at step {} (loss = {}); "
                              "lower the learning rate or enable clip_norm",
                              result.step, loss));
    if (std::isnan(first))
      first = loss;
    windowSum += loss;
    ++windowCount;
    if (i == 0 || (i + 1) % every == 0 || i + 1 == total) {
      double elapsed = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
      llvm::outs() << formatProgress(result, total, windowSum / windowCount,
                                     elapsed / (i + 1),
                                     config.batch * config.seqLen)
                   << "\n";
      llvm::outs().flush();
      windowSum = 0;
      windowCount = 0;
    }
  }
  if (profile)
    printProfile(llvm::outs(), session.profile(), total);
  // Before evaluation adds its own routing to the statistics.
  std::vector<ExpertLoad> trainingLoad = session.expertLoad();
  if (validBatches > 0) {
    std::unique_ptr<DataSource> valid = openDataSource(
        bundle.data(), bundle.model().vocab, session.seed(), Split::Valid);
    double ce = 0;
    for (int64_t i = 0; i < validBatches; ++i)
      ce += session.evaluate(valid->batch(i, config.batch, config.seqLen))
                .at("ce") /
            validBatches;
    llvm::outs() << fmt::format("validation: cross-entropy {:.4f} over {} "
                                "held-out batches\n",
                                ce, validBatches.getValue());
  }
  if (!save.empty()) {
    session.saveCheckpoint(save);
    llvm::outs() << "saved checkpoint " << save << " (step " << session.step()
                 << ")\n";
  }
  printExpertLoad(llvm::outs(), trainingLoad, "expert load over training");
  return 0;
}
