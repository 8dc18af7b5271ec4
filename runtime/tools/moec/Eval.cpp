//===- Eval.cpp - moec eval -----------------------------------------------===//
//
// Held-out quality of a trained model, by objective: perplexity and
// next-token accuracy for language models, masked-token accuracy for MLM,
// accuracy for classifiers, and corpus BLEU (sacreBLEU's default) for
// translation, with greedy and beam search. One run of the loss program
// per batch gives the cross-entropy and the accuracy.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "Report.h"
#include "moec/Bleu.h"
#include "moec/Error.h"
#include "moec/Session.h"
#include "moec/support/Stopwatch.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <iostream>
#include <map>

namespace moec::driver {
namespace {

/// Correct and counted predictions of the positions with a target.
struct Accuracy {
  int64_t correct = 0, total = 0;
  double percent() const {
    return total ? 100.0 * static_cast<double>(correct) /
                       static_cast<double>(total)
                 : 0.0;
  }
};

/// Rows [first, first + size) of a source, as one batch of `size` rows:
/// batch index b of batch size `size` holds rows b * size ..., so the tail
/// is read one row at a time and stacked.
Batch tailBatch(const DataSource &source, int64_t first, int64_t size,
                int64_t seqLen) {
  std::vector<Batch> rows;
  for (int64_t r = 0; r < size; ++r)
    rows.push_back(source.batch(first + r, 1, seqLen));
  auto stack = [&](auto get) {
    const Tensor &one = get(rows.front());
    Shape shape = one.shape();
    shape[0] = size;
    Tensor out(one.dtype(), shape);
    for (int64_t r = 0; r < size; ++r)
      std::memcpy(static_cast<char *>(out.raw()) + r * one.nbytes(),
                  get(rows[r]).raw(), one.nbytes());
    return out;
  };
  Batch batch{stack([](const Batch &b) -> const Tensor & { return b.tokens; }),
              stack([](const Batch &b) -> const Tensor & { return b.targets; }),
              {}};
  for (const auto &[name, tensor] : rows.front().inputs)
    batch.inputs[name] = stack(
        [&](const Batch &b) -> const Tensor & { return b.inputs.at(name); });
  return batch;
}

class EvalCommand : public cli::Command {
public:
  EvalCommand()
      : Command("eval", "Measure a trained model on its held-out data.") {
    positional("FILE", "a .moe spec (compiled first) or a bundle", input);
    option("weights", "CKPT", "Checkpoint to load", weights)
        .required()
        .nonEmpty();
    option("batches", "N",
           "Held-out batches for loss and accuracy (default 20)", batches)
        .atLeast(int64_t{1});
    option("sentences", "N",
           "Translation: held-out sentences to decode for BLEU (default 200)",
           sentences)
        .atLeast(int64_t{1});
    option("beam", "K",
           "Translation: the beam (default: the spec's generate section)",
           beam)
        .atLeast(int64_t{1});
    option("dtype", "DTYPE", "Override the spec's dtype (f32, f64, bf16)",
           dtype)
        .oneOf(dtypeChoices());
    option("f32-matmul", "MODE", kF32MatmulHelp, f32Matmul)
        .oneOf(f32MatmulChoices());
    option("device", "DEVICE", "cpu (default), cuda or emu", device)
        .oneOf(deviceChoices());
  }

  int run() override;

private:
  void translation(Session &session, const ModelData &data);

  std::string input, weights, dtype, f32Matmul, device = "cpu";
  int64_t batches = 20, sentences = 200, beam = 0;
};

int EvalCommand::run() {
  Bundle bundle = loadModel(input, dtype, "sm_80", f32Matmul);
  SessionOptions options;
  options.device = device;
  Session session(bundle, options);
  session.loadCheckpoint(weights);
  ModelData data = openModelData(bundle, input, session.seed(), Split::Valid);
  const TrainingConfig &config = bundle.training();
  const std::string &objective = bundle.model().objective;
  std::cout << fmt::format("model '{}' ({} {}), {} (step {}); data: {}\n",
                           bundle.model().name, bundle.model().kind,
                           objective, weights, session.step(),
                           data.source->describe());

  // A held-out split of whole examples is read once, not wrapped around.
  int64_t rows = batches * config.batch;
  if (int64_t held = data.source->examples(); held > 0)
    rows = std::min(rows, held);
  int64_t passes = (rows + config.batch - 1) / config.batch;
  // The loss program counts the targets its logits predict (a bundle
  // compiled by an older moec does not).
  std::vector<std::string> outputs =
      bundle.programOutputs(session.evaluationProgram());
  const bool counts =
      std::count(outputs.begin(), outputs.end(), "correct") > 0 &&
      std::count(outputs.begin(), outputs.end(), "predicted") > 0;
  if (!counts && (objective == "mlm" || objective == "classify"))
    throw Error(fmt::format("{}: the bundle's loss program does not count "
                            "correct predictions (it was compiled by an "
                            "older moec); compile the model again",
                            input));
  double ce = 0;
  Accuracy accuracy;
  // The first batch warms the device up (allocation, kernel loads) and a
  // GPU captures a CUDA graph on the second: the time per batch is the
  // median of the full batches after the first, when there are some.
  double firstSeconds = 0;
  int64_t firstRows = 0;
  std::vector<double> laterSeconds;
  for (int64_t i = 0; i < passes; ++i) {
    int64_t size = std::min(config.batch, rows - i * config.batch);
    // Batch i of size `size` starts at row i * size: keep rows contiguous
    // by asking for full batches and the tail as its own index.
    Batch batch = size == config.batch
                      ? data.source->batch(i, config.batch, config.seqLen)
                      : tailBatch(*data.source, i * config.batch, size,
                                  config.seqLen);
    auto start = std::chrono::steady_clock::now();
    std::map<std::string, double> scalars = session.evaluate(batch);
    double seconds = support::secondsSince(start);
    ce += scalars.at("ce") * static_cast<double>(size) /
          static_cast<double>(rows);
    if (i == 0) {
      firstSeconds = seconds;
      firstRows = size;
    } else if (size == config.batch) {
      laterSeconds.push_back(seconds);
    }
    if (counts) {
      accuracy.correct += std::llround(scalars.at("correct"));
      accuracy.total += std::llround(scalars.at("predicted"));
    }
  }
  batches = passes;
  std::cout << fmt::format("held-out cross-entropy {:.4f}, perplexity {:.3f} "
                           "({} rows in {} batches of up to {} x {})\n",
                           ce, std::exp(ce), rows, batches, config.batch,
                           config.seqLen);
  std::cout << "time: "
            << formatBatchTime(firstSeconds, firstRows, laterSeconds,
                               config.batch, config.seqLen)
            << "\n";
  if ((objective == "lm" || objective == "translate") && accuracy.total > 0)
    std::cout << fmt::format("next-token accuracy {:.2f}% ({} of {} "
                             "predicted tokens)\n",
                             accuracy.percent(), accuracy.correct,
                             accuracy.total);
  if (objective == "mlm")
    std::cout << fmt::format("masked-token accuracy {:.2f}% ({} of {} "
                             "predicted tokens)\n",
                             accuracy.percent(), accuracy.correct,
                             accuracy.total);
  if (objective == "classify")
    std::cout << fmt::format("accuracy {:.2f}% ({} of {} examples)\n",
                             accuracy.percent(), accuracy.correct,
                             accuracy.total);
  if (objective == "translate")
    translation(session, data);
  return 0;
}

void EvalCommand::translation(Session &session, const ModelData &data) {
  std::vector<TranslationPair> pairs = data.source->pairs();
  if (static_cast<int64_t>(pairs.size()) > sentences)
    pairs.resize(static_cast<size_t>(sentences));
  std::vector<std::vector<int32_t>> sources;
  std::vector<std::string> references;
  for (const TranslationPair &p : pairs) {
    sources.push_back(p.source);
    references.push_back(data.tokenizer->decode(p.target));
  }
  const SpecialTokens &specials = data.tokenizer->specials();
  TranslateOptions greedy;
  greedy.beam = 1;
  TranslateOptions searched;
  if (beam > 0)
    searched.beam = beam;
  int64_t beamSize = searched.beam.value_or(session.bundle().generate().beam);
  for (const auto &[name, options] :
       {std::pair<std::string, TranslateOptions>{"greedy", greedy},
        {fmt::format("beam {}", beamSize), searched}}) {
    std::vector<std::vector<int32_t>> outputs =
        session.translate(sources, specials, options);
    std::vector<std::string> hypotheses;
    for (const std::vector<int32_t> &out : outputs)
      hypotheses.push_back(data.tokenizer->decode(out));
    BleuScore bleu = corpusBleu(hypotheses, references);
    std::cout << fmt::format(
        "BLEU ({}) {:.2f} = {:.1f}/{:.1f}/{:.1f}/{:.1f} (BP {:.3f}, hyp {} "
        "ref {} tokens; {} sentences)\n",
        name, bleu.score, bleu.precisions[0], bleu.precisions[1],
        bleu.precisions[2], bleu.precisions[3], bleu.brevityPenalty,
        bleu.hypothesisLength, bleu.referenceLength, hypotheses.size());
    if (name == "greedy")
      continue;
    for (size_t i = 0; i < std::min<size_t>(3, hypotheses.size()); ++i)
      std::cout << fmt::format("  source: {}\n  output: {}\n  target: {}\n",
                               data.tokenizer->decode(sources[i]),
                               hypotheses[i], references[i]);
  }
}

} // namespace

std::unique_ptr<cli::Command> makeEvalCommand() {
  return std::make_unique<EvalCommand>();
}

} // namespace moec::driver
