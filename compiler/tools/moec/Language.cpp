//===- Language.cpp - moec language ---------------------------------------===//
//
// Prints the language reference: every section, layer and call of `.moe`
// with its settings, types, defaults and allowed values, generated from the
// table the checker uses (frontend/LANGUAGE.md is this output).
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "moec/Frontend/LanguageSchema.h"

#include <iostream>

namespace moec::driver {
namespace {

class LanguageCommand : public cli::Command {
public:
  LanguageCommand()
      : Command("language", "Print the .moe language reference (every "
                            "section, layer and setting) as Markdown.") {}

  int run() override {
    std::cout << frontend::languageReference();
    return 0;
  }
};

} // namespace

std::unique_ptr<cli::Command> makeLanguageCommand() {
  return std::make_unique<LanguageCommand>();
}

} // namespace moec::driver
