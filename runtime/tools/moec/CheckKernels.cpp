//===- CheckKernels.cpp - moec check-kernels ------------------------------===//
//
// Runs every generated kernel of a model on the emu (or cuda) device and
// compares each buffer it writes with the cpu device (moec/KernelCheck.h).
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "moec/Error.h"
#include "moec/KernelCheck.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <iostream>

namespace moec::driver {
namespace {

class CheckKernelsCommand : public cli::Command {
public:
  CheckKernelsCommand()
      : Command("check-kernels",
                "Compare every generated kernel of a model with the cpu "
                "device, on random inputs; exit 1 on any mismatch.") {
    positional("FILE", "a .moe spec (compiled first) or a bundle", input);
    option("device", "DEVICE",
           "The device whose kernels are checked: emu (default) or cuda",
           device);
    option("dtype", "DTYPE", "Override the spec's dtype (f32, f64, bf16)",
           dtype)
        .oneOf(dtypeChoices());
    option("f32-matmul", "MODE", kF32MatmulHelp, f32Matmul)
        .oneOf(f32MatmulChoices());
    option("batch", "B", "Batch size (default 2)", batch).atLeast(int64_t{1});
    option("seq-len", "S", "Sequence length (default: 37, or max_seq if "
                           "smaller)",
           seqLen)
        .atLeast(int64_t{1});
    option("seed", "N", "Seed of the inputs, parameters and state (default 1)",
           seed);
    list("program", "P", "Check only this program (repeatable)", programs)
        .nonEmpty();
    flag("v", "List every comparison", verbose);
  }

  int run() override {
    Bundle bundle = loadModel(input, dtype, "sm_80", f32Matmul);
    // A misspelt program would otherwise compare nothing and pass.
    for (const std::string &p : programs)
      if (!bundle.hasProgram(p))
        throw Error(fmt::format("--program: the model has no program '{}' "
                                "(it has: {})",
                                p, fmt::join(bundle.programs(), ", ")));
    KernelCheckOptions options;
    options.device = device;
    options.batch = batch;
    options.seqLen = given("seq-len") ? seqLen : 0;
    options.seed = seed;
    options.programs = programs;
    KernelCheckReport report = checkKernels(bundle, options);
    std::cout << report.format(verbose);
    return report.passed() ? 0 : 1;
  }

private:
  std::string input, device = "emu", dtype, f32Matmul;
  int64_t batch = 2, seqLen = 0;
  uint64_t seed = 1;
  std::vector<std::string> programs;
  bool verbose = false;
};

} // namespace

std::unique_ptr<cli::Command> makeCheckKernelsCommand() {
  return std::make_unique<CheckKernelsCommand>();
}

} // namespace moec::driver
