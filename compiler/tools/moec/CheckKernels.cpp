//===- CheckKernels.cpp - moec check-kernels ------------------------------===//
//
// Runs every generated kernel of a model on the emu (or cuda) device and
// compares each buffer it writes with the cpu device (moec/KernelCheck.h).
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "moec/KernelCheck.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

static cl::SubCommand checkKernelsCommand(
    "check-kernels", "Compare every generated kernel of a model with the "
                     "cpu device, on random inputs");
static cl::opt<std::string> input(cl::Positional, cl::Required,
                                  cl::desc("<file.moe or bundle>"),
                                  cl::sub(checkKernelsCommand));
static cl::opt<std::string> device("device",
                                   cl::desc("The device whose kernels are "
                                            "checked: emu (default) or cuda"),
                                   cl::init("emu"),
                                   cl::sub(checkKernelsCommand));
static cl::opt<int64_t> batch("batch", cl::desc("Batch size (default 2)"),
                              cl::init(2), cl::sub(checkKernelsCommand));
static cl::opt<int64_t> seqLen("seq-len",
                               cl::desc("Sequence length (default: 37, or "
                                        "max_seq if smaller)"),
                               cl::init(0), cl::sub(checkKernelsCommand));
static cl::opt<uint64_t> seed("seed",
                              cl::desc("Seed of the inputs, parameters and "
                                       "state (default 1)"),
                              cl::init(1), cl::sub(checkKernelsCommand));
static cl::list<std::string> programs("program",
                                      cl::desc("Check only this program "
                                               "(repeatable)"),
                                      cl::sub(checkKernelsCommand));
static moec::driver::DtypeOption dtype(checkKernelsCommand);
static cl::opt<bool> verbose("v", cl::desc("List every comparison"),
                             cl::sub(checkKernelsCommand));

bool moec::driver::isCheckKernelsCommand() {
  return static_cast<bool>(checkKernelsCommand);
}

int moec::driver::runCheckKernels() {
  Bundle bundle = loadModel(input, dtype);
  KernelCheckOptions options;
  options.device = device;
  options.batch = batch;
  options.seqLen = seqLen;
  options.seed = seed;
  options.programs.assign(programs.begin(), programs.end());
  KernelCheckReport report = checkKernels(bundle, options);
  llvm::outs() << report.format(verbose);
  return report.passed() ? 0 : 1;
}
