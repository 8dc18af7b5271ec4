//===- Run.cpp - moec run -------------------------------------------------===//

#include "Commands.h"
#include "Report.h"
#include "moec/Error.h"
#include "moec/Session.h"
#include "moec/support/Stopwatch.h"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <iostream>

namespace moec::driver {
namespace {

class RunCommand : public cli::Command {
public:
  RunCommand()
      : Command("run", "Generate from a trained model with its KV cache (or "
                       "translate with an encoder-decoder).") {
    positional("FILE", "a .moe spec (compiled first) or a bundle", input);
    option("weights", "CKPT", "Checkpoint to load", weights)
        .required()
        .nonEmpty();
    option("prompt", "TEXT",
           "Text to continue (default: the start of a validation sequence)",
           prompt);
    option("max-tokens", "N", "Tokens to generate (default 64)", maxTokens)
        .atLeast(int64_t{1});
    option("temperature", "T", "0 = greedy (default); else sample",
           temperature)
        .atLeast(0.0);
    option("top-k", "K", "Sample among the K most likely tokens (0 = all)",
           topK)
        .atLeast(int64_t{0});
    option("seed", "S", "Sampling seed (default 0)", seed);
    option("beam", "K",
           "Encoder-decoder models: the beam (default: the spec's)", beam)
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
  /// Encoder-decoder models translate the prompt (or a held-out source).
  int translate(Session &session, const ModelData &data) {
    std::vector<int32_t> source;
    std::string reference;
    if (given("prompt")) {
      source = data.tokenizer->encode(prompt);
    } else {
      std::vector<TranslationPair> pairs = data.source->pairs();
      if (pairs.empty())
        throw Error("the data has no held-out pairs; give a --prompt");
      source = pairs.front().source;
      reference = data.tokenizer->decode(pairs.front().target);
    }
    TranslateOptions options;
    if (given("beam"))
      options.beam = beam;
    auto start = std::chrono::steady_clock::now();
    std::vector<int32_t> output =
        session.translate({source}, data.tokenizer->specials(), options)
            .front();
    double seconds = support::secondsSince(start);
    std::cout << fmt::format("loaded {} (step {})\n", weights,
                             session.step());
    std::cout << "source:    " << data.tokenizer->decode(source) << "\n";
    std::cout << "output:    " << data.tokenizer->decode(output) << "\n";
    if (!reference.empty())
      std::cout << "reference: " << reference << "\n";
    std::cout << fmt::format("time:      {:.2f} ms for {} source and {} "
                             "output tokens\n",
                             seconds * 1e3, source.size(), output.size());
    printExpertLoad(std::cout, session.expertLoad(),
                    "expert load while translating");
    return 0;
  }

  std::string input, weights, prompt, dtype, f32Matmul, device = "cpu";
  int64_t maxTokens = 64, topK = 0, beam = 1;
  double temperature = 0;
  uint64_t seed = 0;
};

int RunCommand::run() {
  Bundle bundle = loadModel(input, dtype, "sm_80", f32Matmul);
  SessionOptions options;
  options.device = device;
  Session session(bundle, options);
  session.loadCheckpoint(weights);
  // With a prompt, bundle and weights are enough: only the tokenizer is
  // opened, never the training data.
  ModelData modelData;
  if (!given("prompt")) {
    try {
      modelData = openModelData(bundle, input, session.seed(), Split::Valid);
    } catch (const Error &e) {
      throw Error(std::string(e.what()) +
                  "\n(without --prompt, moec run samples its prompt from the "
                  "model's data; give --prompt to run from the bundle and "
                  "weights alone)");
    }
  }
  if (!modelData.tokenizer)
    modelData.tokenizer = openTokenizer(bundle, input);
  const Tokenizer &tokenizer = *modelData.tokenizer;
  if (bundle.model().kind == "encoder")
    throw Error(fmt::format("{}: encoder models do not generate; measure one "
                            "with `moec eval`",
                            input));
  if (bundle.model().kind == "encoder_decoder")
    return translate(session, modelData);

  std::vector<int32_t> tokens;
  if (given("prompt")) {
    tokens = tokenizer.encode(prompt);
  } else {
    // At most half the context, so that there is room to generate.
    Batch sample = modelData.source->batch(
        0, 1, std::clamp<int64_t>(bundle.model().maxSeq / 2, 1, 16));
    tokens.assign(sample.tokens.data<int32_t>(),
                  sample.tokens.data<int32_t>() + sample.tokens.numel());
  }
  GenerateOptions generate;
  generate.maxNewTokens = maxTokens;
  generate.temperature = temperature;
  generate.topK = topK;
  generate.seed = seed;
  GenerateTimes times;
  std::vector<int32_t> output = session.generate(tokens, generate, &times);

  std::cout << fmt::format("loaded {} (step {})\n", weights, session.step());
  std::cout << "prompt:    " << tokenizer.decode(tokens) << "\n";
  std::cout << "generated: " << tokenizer.decode(output) << "\n";
  std::cout << "time:      " << formatGenerateTime(times) << "\n";
  printExpertLoad(std::cout, session.expertLoad(),
                  "expert load while generating");
  return 0;
}

} // namespace

std::unique_ptr<cli::Command> makeRunCommand() {
  return std::make_unique<RunCommand>();
}

} // namespace moec::driver
