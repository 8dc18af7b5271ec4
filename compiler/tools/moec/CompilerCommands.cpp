//===- CompilerCommands.cpp - what the compiler adds to moec --------------===//

#include "Commands.h"
#include "moec/Compiler.h"

namespace moec::driver {

std::unique_ptr<cli::Command> makeCheckCommand();
std::unique_ptr<cli::Command> makeCompileCommand();
std::unique_ptr<cli::Command> makeLanguageCommand();

bool hasCompiler() { return true; }

std::vector<std::unique_ptr<cli::Command>> makeCompilerCommands() {
  std::vector<std::unique_ptr<cli::Command>> commands;
  commands.push_back(makeCheckCommand());
  commands.push_back(makeCompileCommand());
  commands.push_back(makeLanguageCommand());
  return commands;
}

Bundle compileSpec(const std::string &path, const std::string &dtype,
                   const std::string &arch, const std::string &f32Matmul) {
  CompileOptions options;
  options.dtype = dtype;
  options.f32Matmul = f32Matmul;
  options.arch = arch;
  return compileFile(path, options);
}

} // namespace moec::driver
