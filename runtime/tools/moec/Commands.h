//===- Commands.h - the moec subcommands ------------------------*- C++ -*-===//
//
// The bundle commands (train, run, check-kernels, precompile, info) need
// only the runtime and are in every build. The compiler commands (check,
// compile) and the compilation of a .moe spec named where a bundle is
// expected come from the compiler when the build has it
// (compiler/tools/moec), and from NoCompiler.cpp when it does not.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TOOLS_MOEC_COMMANDS_H
#define MOEC_TOOLS_MOEC_COMMANDS_H

#include "CommandLine.h"
#include "moec/Bundle.h"
#include "moec/ModelData.h"

#include <memory>
#include <string>
#include <vector>

namespace moec::driver {

std::unique_ptr<cli::Command> makeTrainCommand();
std::unique_ptr<cli::Command> makeRunCommand();
std::unique_ptr<cli::Command> makeEvalCommand();
std::unique_ptr<cli::Command> makeTokenizerCommand();
std::unique_ptr<cli::Command> makeCheckKernelsCommand();
std::unique_ptr<cli::Command> makePrecompileCommand();
std::unique_ptr<cli::Command> makeInfoCommand();

/// `check`, `compile` and `language`: the compiler's, or in a runtime-only
/// build commands that say in one line that this build has no compiler.
std::vector<std::unique_ptr<cli::Command>> makeCompilerCommands();

/// Whether this moec can compile .moe specs.
bool hasCompiler();

/// Compiles the spec at `path` (its kernels tiled for `arch`, its dtype
/// and f32_matmul overridden by non-empty `dtype` and `f32Matmul`); throws
/// moec::Error with the diagnostics. In a runtime-only build it throws an
/// error saying how to get a bundle instead.
Bundle compileSpec(const std::string &path, const std::string &dtype,
                   const std::string &arch, const std::string &f32Matmul);

/// A model named on the command line: a spec when its name ends in .moe
/// (compiled now), otherwise a bundle (loaded and validated). `dtype` and
/// `f32Matmul` override a spec's settings and are refused for bundles.
Bundle loadModel(const std::string &path, const std::string &dtype = "",
                 const std::string &arch = "sm_80",
                 const std::string &f32Matmul = "");

/// The values --dtype takes.
inline const std::vector<std::string> &dtypeChoices() {
  static const std::vector<std::string> choices{"f32", "f64", "bf16"};
  return choices;
}

/// The values --f32-matmul takes, and what it says.
inline const std::vector<std::string> &f32MatmulChoices() {
  static const std::vector<std::string> choices{"fp32", "tf32", "tf32x3"};
  return choices;
}
inline constexpr const char *kF32MatmulHelp =
    "Override the spec's f32_matmul: how f32 models multiply matrices on "
    "the cuda and emu devices, fp32 (FMA, the default), tf32 or tf32x3 "
    "(3xTF32) on the tensor cores";

/// The values --device takes.
inline const std::vector<std::string> &deviceChoices() {
  static const std::vector<std::string> choices{"cpu", "cuda", "emu"};
  return choices;
}

} // namespace moec::driver

#endif // MOEC_TOOLS_MOEC_COMMANDS_H
