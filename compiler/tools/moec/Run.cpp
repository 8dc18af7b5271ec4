//===- Run.cpp - moec run -------------------------------------------------===//

#include "Commands.h"
#include "Report.h"
#include "moec/Error.h"
#include "moec/Session.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

namespace cl = llvm::cl;

static cl::SubCommand runCommand("run",
                                 "Generate from a trained model with its KV "
                                 "cache");
static cl::opt<std::string> input(cl::Positional, cl::Required,
                                  cl::desc("<file.moe | bundle>"),
                                  cl::sub(runCommand));
static cl::opt<std::string> weights("weights", cl::Required,
                                    cl::desc("Checkpoint to load"),
                                    cl::value_desc("ckpt"), cl::sub(runCommand));
static cl::opt<std::string> prompt("prompt",
                                   cl::desc("Text (or token ids) to continue; "
                                            "default: the start of a "
                                            "validation sequence"),
                                   cl::sub(runCommand));
static cl::opt<int64_t> maxTokens("max-tokens",
                                  cl::desc("Tokens to generate (default 64)"),
                                  cl::init(64), cl::sub(runCommand));
static cl::opt<double> temperature("temperature",
                                   cl::desc("0 = greedy (default)"),
                                   cl::init(0.0), cl::sub(runCommand));
static cl::opt<int64_t> topK("top-k",
                             cl::desc("Sample among the k most likely tokens"),
                             cl::init(0), cl::sub(runCommand));
static cl::opt<int64_t> seed("seed", cl::desc("Sampling seed"), cl::init(0),
                             cl::sub(runCommand));
static moec::driver::DtypeOption dtype(runCommand);
static cl::opt<std::string> device("device",
                                   cl::desc("cpu (default), cuda or emu"),
                                   cl::init("cpu"), cl::sub(runCommand));

bool moec::driver::isRunCommand() { return static_cast<bool>(runCommand); }

int moec::driver::runRun() {
  if (maxTokens < 1)
    throw Error("--max-tokens must be at least 1");
  if (temperature < 0)
    throw Error("--temperature must be >= 0");
  Bundle bundle = loadModel(input, dtype);
  SessionOptions options;
  options.device = device;
  Session session(bundle, options);
  session.loadCheckpoint(weights);
  std::unique_ptr<DataSource> data = openDataSource(
      bundle.data(), bundle.model().vocab, session.seed(), Split::Valid);

  std::vector<int32_t> tokens;
  if (prompt.getNumOccurrences()) {
    tokens = data->encode(prompt);
  } else {
    Batch sample = data->batch(0, 1, std::min<int64_t>(16, bundle.model().maxSeq));
    tokens.assign(sample.tokens.data<int32_t>(),
                  sample.tokens.data<int32_t>() + sample.tokens.numel());
  }
  GenerateOptions generate;
  generate.maxNewTokens = maxTokens;
  generate.temperature = temperature;
  generate.topK = topK;
  generate.seed = static_cast<uint64_t>(seed);
  std::vector<int32_t> output = session.generate(tokens, generate);

  llvm::outs() << fmt::format("loaded {} (step {})\n", weights.getValue(),
                              session.step());
  llvm::outs() << "prompt:    " << data->decode(tokens) << "\n";
  llvm::outs() << "generated: " << data->decode(output) << "\n";
  printExpertLoad(llvm::outs(), session.expertLoad(),
                  "expert load while generating");
  return 0;
}
