//===- main.cpp - the moec driver -----------------------------------------===//
//
// moec COMMAND [args]: the compiler's commands (check, compile) when the
// build has the compiler, and the bundle commands (train, run,
// check-kernels, precompile, info) in every build. Every failure ends in
// located diagnostics or one `moec: error: ...` line and a non-zero exit
// status; a crash is a bug.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "StandardOutput.h"
#include "moec/Error.h"
#include "moec/Version.h"
#include "moec/support/Suggest.h"

#include <fmt/format.h>
#include <iostream>
#include <new>

namespace moec::driver {
namespace {

std::vector<std::unique_ptr<cli::Command>> allCommands() {
  std::vector<std::unique_ptr<cli::Command>> commands = makeCompilerCommands();
  commands.push_back(makeTrainCommand());
  commands.push_back(makeRunCommand());
  commands.push_back(makeEvalCommand());
  commands.push_back(makeTokenizerCommand());
  commands.push_back(makeCheckKernelsCommand());
  commands.push_back(makePrecompileCommand());
  commands.push_back(makeInfoCommand());
  return commands;
}

std::string overview(const std::vector<std::unique_ptr<cli::Command>> &all) {
  std::string text = fmt::format(
      "moec {}: compile and run sparse mixture-of-experts models{}\n\n"
      "usage: moec COMMAND [ARGS]   (moec COMMAND --help lists its "
      "options)\n\ncommands:\n",
      kVersion, hasCompiler() ? "" : " (runtime-only build)");
  for (const std::unique_ptr<cli::Command> &c : all) {
    std::string summary = c->summary;
    if (size_t dot = summary.find(". "); dot != std::string::npos)
      summary = summary.substr(0, dot + 1);
    text += fmt::format("  {:<16}{}\n", c->name, summary);
  }
  text += "\n  --version       Print the version\n"
          "  --help          Show this help\n";
  return text;
}

/// Writes a runtime or usage error the way every command does.
void printError(const std::string &message) {
  // Compiler diagnostics arrive formatted; everything else gets a prefix.
  if (message.find(": error: ") != std::string::npos)
    std::cerr << message;
  else
    std::cerr << "moec: error: " << message << "\n";
}

int dispatch(int argc, char **argv) {
  std::vector<std::unique_ptr<cli::Command>> all = allCommands();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << overview(all);
    printError("no command given");
    return 1;
  }
  const std::string &name = args.front();
  if (name == "--help" || name == "-help" || name == "-h" || name == "help") {
    std::cout << overview(all);
    return 0;
  }
  if (name == "--version" || name == "-version") {
    std::cout << "moec " << kVersion
              << (hasCompiler() ? "\n" : " (runtime only)\n");
    return 0;
  }
  std::vector<std::string> names;
  for (const std::unique_ptr<cli::Command> &c : all) {
    names.push_back(c->name);
    if (c->name != name)
      continue;
    std::vector<std::string> rest(args.begin() + 1, args.end());
    for (const std::string &arg : rest)
      if (arg == "--help" || arg == "-help" || arg == "-h") {
        std::cout << c->help();
        return 0;
      }
    try {
      c->parse(rest);
    } catch (const cli::UsageError &e) {
      printError(fmt::format("moec {}: {}; see `moec {} --help`", c->name,
                             e.what(), c->name));
      return 1;
    }
    return c->run();
  }
  std::string message = fmt::format("unknown command '{}'", name);
  if (std::string near = support::nearestName(name, names); !near.empty())
    message += fmt::format("; did you mean '{}'?", near);
  printError(message + " (see `moec --help`)");
  return 1;
}

} // namespace
} // namespace moec::driver

int main(int argc, char **argv) {
  using namespace moec::driver;
  installCheckedStandardOutput();
  int status = 1;
  try {
    status = dispatch(argc, argv);
  } catch (const moec::Error &e) {
    printError(e.what());
  } catch (const std::bad_alloc &) {
    printError("out of memory");
  } catch (const std::exception &e) {
    // A bug in moec (std::logic_error and the like): said, not a crash.
    std::string what = e.what();
    printError(what.rfind("internal error", 0) == 0
                   ? what
                   : "internal error: " + what);
  }
  if (std::string error = standardOutputError(); !error.empty()) {
    printError(error);
    status = status ? status : 1;
  }
  return status;
}
