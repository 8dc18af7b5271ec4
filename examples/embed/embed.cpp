//===- embed.cpp - using moec from a C++ program --------------------------===//
//
// Compiles a model from .moe text, trains it for a few steps on the
// built-in synthetic grammar, checks that the loss fell, and continues a
// prompt. Everything a host program needs is in <moec/Compiler.h> and
// <moec/Session.h>; failures arrive as moec::Error.
//
//===----------------------------------------------------------------------===//

#include "moec/Compiler.h"
#include "moec/Error.h"
#include "moec/Session.h"

#include <cstdio>

static const char *kSpec = R"(moe 1
let d = 64
model tiny {
  vocab = 256
  d_model = d
  max_seq = 64
  repeat 2 as i {
    attention(heads = 4)
    moe(experts = 4, k = 2, hidden = 2 * d)
  }
}
train {
  optimizer = adamw(lr = 5e-3)
  schedule = inverse_sqrt(warmup = 10)
  batch = 8
  seq_len = 32
  steps = 40
  seed = 7
}
data {
  source = synthetic("grammar")
}
)";

int main() {
  try {
    moec::Bundle bundle = moec::compileSource(kSpec, "tiny.moe");
    moec::Session session(bundle, {/*device=*/"cpu"});
    const moec::TrainingConfig &config = bundle.training();
    std::unique_ptr<moec::DataSource> data = moec::openDataSource(
        bundle.data(), bundle.model().vocab, session.seed());

    double first = 0, last = 0;
    for (int64_t i = 0; i < config.steps; ++i) {
      moec::Batch batch = data->batch(i, config.batch, config.seqLen);
      double loss = session.trainStep(batch).scalars.at("loss");
      if (i == 0)
        first = loss;
      last = loss;
      if (i % 10 == 0 || i + 1 == config.steps)
        std::printf("step %3lld  loss %.4f\n", static_cast<long long>(i + 1),
                    loss);
    }

    moec::GenerateOptions options;
    options.maxNewTokens = 24;
    std::vector<int32_t> prompt = data->encode("The ");
    std::vector<int32_t> text = session.generate(prompt, options);
    std::printf("generated: %s%s\n", data->decode(prompt).c_str(),
                data->decode(text).c_str());
    for (const moec::ExpertLoad &layer : session.expertLoad()) {
      std::printf("%s:", layer.layer.c_str());
      for (double f : layer.fractions())
        std::printf(" %.2f", f);
      std::printf("\n");
    }
    if (!(last < first)) {
      std::fprintf(stderr, "error: the loss did not fall (%.4f -> %.4f)\n",
                   first, last);
      return 1;
    }
    if (text.size() != static_cast<size_t>(options.maxNewTokens)) {
      std::fprintf(stderr, "error: generated %zu tokens, expected %lld\n",
                   text.size(), static_cast<long long>(options.maxNewTokens));
      return 1;
    }
    return 0;
  } catch (const moec::Error &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
