//===- NoCompiler.cpp - the runtime-only build's compiler commands --------===//
//
// A moec built with -DMOEC_BUILD_COMPILER=OFF runs bundles but cannot
// compile specs. `check` and `compile` still exist, so that the command
// list and `--help` match the full build, and say so in one line.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "moec/Error.h"

namespace moec::driver {
namespace {

constexpr const char *kNoCompiler =
    "this moec is a runtime-only build (-DMOEC_BUILD_COMPILER=OFF) and has "
    "no compiler: compile the spec with a full build of moec (`moec compile "
    "FILE.moe -o FILE.bundle.json`) and pass the bundle";

class NoCompilerCommand : public cli::Command {
public:
  NoCompilerCommand(std::string name, std::string summary)
      : Command(std::move(name), std::move(summary)) {}

  /// Whatever the full build would take: the answer is the same.
  void parse(const std::vector<std::string> &) override {}
  int run() override { throw Error(kNoCompiler); }
};

} // namespace

bool hasCompiler() { return false; }

std::vector<std::unique_ptr<cli::Command>> makeCompilerCommands() {
  std::vector<std::unique_ptr<cli::Command>> commands;
  commands.push_back(std::make_unique<NoCompilerCommand>(
      "check", "Check a .moe file through the whole compiler (not in this "
               "runtime-only build)."));
  commands.push_back(std::make_unique<NoCompilerCommand>(
      "compile", "Compile a .moe file to a bundle (not in this runtime-only "
                 "build)."));
  commands.push_back(std::make_unique<NoCompilerCommand>(
      "language", "Print the .moe language reference (not in this "
                  "runtime-only build)."));
  return commands;
}

Bundle compileSpec(const std::string &path, const std::string &,
                   const std::string &, const std::string &) {
  throw Error(path + ": " + kNoCompiler);
}

} // namespace moec::driver
