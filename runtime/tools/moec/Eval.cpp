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
#include "HeldOut.h"
#include "Report.h"
#include "moec/Bleu.h"
#include "moec/Error.h"
#include "moec/Session.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <iostream>

namespace moec::driver {
namespace {

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

  // The loss program counts the targets its logits predict (a bundle
  // compiled by an older moec does not).
  if (!countsPredictions(session) &&
      (objective == "mlm" || objective == "classify"))
    throw Error(fmt::format("{}: the bundle's loss program does not count "
                            "correct predictions (it was compiled by an "
                            "older moec); compile the model again",
                            input));
  // A split of whole examples is read once; the time per batch is the
  // median of the full batches after the first, which warms the device up
  // (allocation, kernel loads; a GPU captures a CUDA graph on the second).
  HeldOutResult held = evaluateHeldOut(session, *data.source, batches);
  std::cout << fmt::format("held-out cross-entropy {:.4f}, perplexity {:.3f} "
                           "({} rows in {} batches of up to {} x {})\n",
                           held.ce, std::exp(held.ce), held.rows, held.batches,
                           config.batch, config.seqLen);
  std::cout << "time: "
            << formatBatchTime(held.firstSeconds, held.firstRows,
                               held.laterSeconds, config.batch, config.seqLen)
            << "\n";
  if (held.accuracy)
    if (std::string line = formatAccuracy(objective, *held.accuracy);
        !line.empty())
      std::cout << line << "\n";
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
