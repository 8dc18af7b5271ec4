//===- Commands.h - the moec subcommands ------------------------*- C++ -*-===//

#ifndef MOEC_TOOLS_MOEC_COMMANDS_H
#define MOEC_TOOLS_MOEC_COMMANDS_H

#include "moec/Bundle.h"
#include "llvm/Support/CommandLine.h"

#include <string>

namespace moec::driver {

/// Each subcommand: whether the command line selected it, and its body,
/// which returns the process exit code. Bodies may throw moec::Error.
bool isCheckCommand();
int runCheck();
bool isCompileCommand();
int runCompile();
bool isTrainCommand();
int runTrain();
bool isRunCommand();
int runRun();
bool isCheckKernelsCommand();
int runCheckKernels();
bool isPrecompileCommand();
int runPrecompile();

/// `--dtype`, the override of a spec's storage dtype, in `sub`.
struct DtypeOption : llvm::cl::opt<std::string> {
  explicit DtypeOption(llvm::cl::SubCommand &sub)
      : llvm::cl::opt<std::string>(
            "dtype",
            llvm::cl::desc("Override the spec's dtype (f32, f64, bf16)"),
            llvm::cl::sub(sub)) {}
};

/// A model given on the command line: a spec if its name ends in .moe
/// (compiled now, with kernels tiled for `arch`), otherwise a bundle
/// (loaded and validated). `dtype` overrides a spec's dtype.
Bundle loadModel(const std::string &path, const std::string &dtype = "",
                 const std::string &arch = "sm_80");

} // namespace moec::driver

#endif // MOEC_TOOLS_MOEC_COMMANDS_H
