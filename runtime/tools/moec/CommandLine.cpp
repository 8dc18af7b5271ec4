//===- CommandLine.cpp - the moec command line, without LLVM --------------===//

#include "CommandLine.h"
#include "moec/support/Suggest.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>

namespace moec::cli {

Command::~Command() = default;

double parseNumber(const std::string &what, const std::string &text) {
  const char *begin = text.c_str();
  char *end = nullptr;
  errno = 0;
  double value = std::strtod(begin, &end);
  if (text.empty() || end != begin + text.size() || std::isspace(*begin))
    throw UsageError(fmt::format("{} expects a number, got '{}'", what, text));
  if (errno == ERANGE || !std::isfinite(value))
    throw UsageError(
        fmt::format("{} must be a finite number, got '{}'", what, text));
  return value;
}

int64_t parseInteger(const std::string &what, const std::string &text) {
  size_t start = text.size() > 1 && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  bool digits = text.size() > start;
  for (size_t i = start; i < text.size(); ++i)
    digits = digits && std::isdigit(static_cast<unsigned char>(text[i]));
  if (!digits)
    throw UsageError(
        fmt::format("{} expects an integer, got '{}'", what, text));
  errno = 0;
  long long value = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE)
    throw UsageError(fmt::format("{} is out of range: '{}'", what, text));
  return value;
}

void Flag::checkString(const std::string &value) const {
  if (rejectEmpty && value.empty())
    throw UsageError(fmt::format("{} needs a non-empty {}", spelling(),
                                 valueName.empty() ? "value" : valueName));
  if (!choices.empty() &&
      std::find(choices.begin(), choices.end(), value) == choices.end()) {
    std::string message = fmt::format("{} must be one of {}, got '{}'",
                                      spelling(), fmt::join(choices, ", "),
                                      value);
    if (std::string near = support::nearestName(value, choices); !near.empty())
      message += fmt::format("; did you mean '{}'?", near);
    throw UsageError(message);
  }
}

Flag &Command::add(std::unique_ptr<Flag> flag) {
  flags.push_back(std::move(flag));
  return *flags.back();
}

void Command::positional(std::string valueName, std::string help,
                         std::string &target) {
  positionalName = std::move(valueName);
  positionalHelp = std::move(help);
  positionalTarget = &target;
}

Flag &Command::option(std::string name, std::string valueName,
                      std::string help, std::string &target) {
  Flag &f = add(std::make_unique<Flag>(std::move(name), std::move(valueName),
                                       std::move(help)));
  f.store = [&target](Flag &self, const std::string &value) {
    self.checkString(value);
    target = value;
  };
  return f;
}

Flag &Command::option(std::string name, std::string valueName,
                      std::string help, int64_t &target) {
  Flag &f = add(std::make_unique<Flag>(std::move(name), std::move(valueName),
                                       std::move(help)));
  f.store = [&target](Flag &self, const std::string &value) {
    int64_t parsed = parseInteger(self.spelling(), value);
    if (self.minimum && parsed < *self.minimum)
      throw UsageError(fmt::format("{} must be at least {}, got {}",
                                   self.spelling(), *self.minimum, parsed));
    target = parsed;
  };
  return f;
}

Flag &Command::option(std::string name, std::string valueName,
                      std::string help, uint64_t &target) {
  Flag &f = add(std::make_unique<Flag>(std::move(name), std::move(valueName),
                                       std::move(help)));
  f.store = [&target](Flag &self, const std::string &value) {
    int64_t parsed = parseInteger(self.spelling(), value);
    if (parsed < 0)
      throw UsageError(fmt::format("{} must be at least 0, got {}",
                                   self.spelling(), parsed));
    target = static_cast<uint64_t>(parsed);
  };
  return f;
}

Flag &Command::option(std::string name, std::string valueName,
                      std::string help, double &target) {
  Flag &f = add(std::make_unique<Flag>(std::move(name), std::move(valueName),
                                       std::move(help)));
  f.store = [&target](Flag &self, const std::string &value) {
    double parsed = parseNumber(self.spelling(), value);
    if (self.minimumNumber && parsed < *self.minimumNumber)
      throw UsageError(fmt::format("{} must be at least {}, got {}",
                                   self.spelling(), *self.minimumNumber,
                                   value));
    target = parsed;
  };
  return f;
}

Flag &Command::list(std::string name, std::string valueName, std::string help,
                    std::vector<std::string> &target) {
  Flag &f = add(std::make_unique<Flag>(std::move(name), std::move(valueName),
                                       std::move(help)));
  f.repeatable = true;
  f.store = [&target](Flag &self, const std::string &value) {
    self.checkString(value);
    target.push_back(value);
  };
  return f;
}

Flag &Command::flag(std::string name, std::string help, bool &target) {
  Flag &f = add(std::make_unique<Flag>(std::move(name), "", std::move(help)));
  f.isSwitch = true;
  f.store = [&target](Flag &, const std::string &) { target = true; };
  return f;
}

Flag *Command::find(const std::string &flagName) {
  for (const std::unique_ptr<Flag> &f : flags)
    if (f->name == flagName)
      return f.get();
  return nullptr;
}

bool Command::given(const std::string &flagName) const {
  for (const std::unique_ptr<Flag> &f : flags)
    if (f->name == flagName)
      return f->occurrences > 0;
  return false;
}

void Command::parse(const std::vector<std::string> &args) {
  bool flagsEnded = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    if (flagsEnded || arg.size() < 2 || arg[0] != '-') {
      if (!positionalTarget || positionalSeen)
        throw UsageError(fmt::format("unexpected argument '{}'", arg));
      *positionalTarget = arg;
      positionalSeen = true;
      continue;
    }
    if (arg == "--") {
      flagsEnded = true;
      continue;
    }
    std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
    std::optional<std::string> inlineValue;
    if (size_t eq = body.find('='); eq != std::string::npos) {
      inlineValue = body.substr(eq + 1);
      body = body.substr(0, eq);
    }
    Flag *f = find(body);
    if (!f) {
      std::vector<std::string> names;
      for (const std::unique_ptr<Flag> &g : flags)
        names.push_back(g->name);
      std::string message = fmt::format("unknown option '{}'", arg);
      if (std::string near = support::nearestName(body, names); !near.empty())
        message += fmt::format("; did you mean '--{}'?", near);
      throw UsageError(message);
    }
    if (f->occurrences > 0 && !f->repeatable)
      throw UsageError(fmt::format("{} given more than once", f->spelling()));
    ++f->occurrences;
    if (f->isSwitch) {
      if (inlineValue)
        throw UsageError(
            fmt::format("{} takes no value, got '{}'", f->spelling(),
                        *inlineValue));
      f->store(*f, "");
      continue;
    }
    if (!inlineValue) {
      if (i + 1 == args.size())
        throw UsageError(fmt::format("{} needs a value ({})", f->spelling(),
                                     f->valueName));
      inlineValue = args[++i];
    }
    f->store(*f, *inlineValue);
  }
  if (positionalTarget && !positionalSeen)
    throw UsageError(fmt::format("missing {} ({})", positionalName,
                                 positionalHelp));
  for (const std::unique_ptr<Flag> &f : flags)
    if (f->isRequired && f->occurrences == 0)
      throw UsageError(fmt::format("missing {} {} ({})", f->spelling(),
                                   f->valueName, f->help));
}

std::string Command::help() const {
  std::string usage = fmt::format("usage: moec {}", name);
  if (positionalTarget)
    usage += " " + positionalName;
  for (const std::unique_ptr<Flag> &f : flags)
    if (f->isRequired)
      usage += fmt::format(" {} {}", f->spelling(), f->valueName);
  if (!flags.empty())
    usage += " [options]";
  std::string text = usage + "\n\n" + summary + "\n";
  if (positionalTarget)
    text += fmt::format("\n  {:<24}{}\n", positionalName, positionalHelp);
  if (!flags.empty())
    text += "\noptions:\n";
  for (const std::unique_ptr<Flag> &f : flags) {
    std::string left = f->spelling();
    if (!f->isSwitch)
      left += " " + f->valueName;
    if (left.size() > 22)
      text += fmt::format("  {}\n  {:<24}{}\n", left, "", f->help);
    else
      text += fmt::format("  {:<24}{}\n", left, f->help);
  }
  text += fmt::format("  {:<24}{}\n", "--help", "Show this help");
  return text;
}

} // namespace moec::cli
