//===- CommandLine.h - the moec command line, without LLVM ------*- C++ -*-===//
//
// Every moec subcommand declares its positional argument and its flags on a
// Command, bound to its own fields; one parser and one help printer serve
// the full build and the runtime-only build, so the two cannot drift.
//
// Accepted forms: `--name value`, `--name=value`, `-name value` (one or two
// dashes), `--flag` for booleans, and `--` to end the flags. Every value is
// checked when parsed (integers, finite numbers, ranges, choices, non-empty
// paths); a mistake throws UsageError naming the flag.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TOOLS_MOEC_COMMANDLINE_H
#define MOEC_TOOLS_MOEC_COMMANDLINE_H

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace moec::cli {

/// A command line that cannot be parsed; the message names the command and
/// the flag, and says what was expected.
class UsageError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// One flag: its spelling, help text, and how to store and check a value.
class Flag {
public:
  Flag(std::string name, std::string valueName, std::string help)
      : name(std::move(name)), valueName(std::move(valueName)),
        help(std::move(help)) {}

  /// Must be given.
  Flag &required() {
    isRequired = true;
    return *this;
  }
  /// Integers only: the smallest value accepted.
  Flag &atLeast(int64_t minimum) {
    this->minimum = minimum;
    return *this;
  }
  /// Numbers only: reject values below `minimum`.
  Flag &atLeast(double minimum) {
    this->minimumNumber = minimum;
    return *this;
  }
  /// Strings only: the only values accepted.
  Flag &oneOf(std::vector<std::string> values) {
    choices = std::move(values);
    return *this;
  }
  /// Strings only: reject "".
  Flag &nonEmpty() {
    rejectEmpty = true;
    return *this;
  }

  const std::string name;
  const std::string valueName;
  const std::string help;

private:
  friend class Command;
  bool isRequired = false;
  bool rejectEmpty = false;
  std::optional<int64_t> minimum;
  std::optional<double> minimumNumber;
  std::vector<std::string> choices;
  /// Stores a value given on the command line; throws UsageError.
  std::function<void(Flag &, const std::string &)> store;
  /// Whether the flag takes no value.
  bool isSwitch = false;
  bool repeatable = false;
  int occurrences = 0;

  std::string spelling() const { return "--" + name; }
  void checkString(const std::string &value) const;
};

/// A subcommand: its flags, bound to fields of the subclass, and its body.
class Command {
public:
  Command(std::string name, std::string summary)
      : name(std::move(name)), summary(std::move(summary)) {}
  virtual ~Command();
  Command(const Command &) = delete;
  Command &operator=(const Command &) = delete;

  /// The body, run after a successful parse; returns the exit status and
  /// may throw moec::Error.
  virtual int run() = 0;

  /// Parses `args` (without the program and command names) into the bound
  /// fields. Throws UsageError.
  virtual void parse(const std::vector<std::string> &args);
  /// Whether `--name` appeared on the command line.
  bool given(const std::string &flagName) const;
  /// "usage: moec NAME ..." with one line per flag.
  std::string help() const;

  const std::string name;
  const std::string summary;

protected:
  /// The one positional argument (a file), required.
  void positional(std::string valueName, std::string help,
                  std::string &target);
  Flag &option(std::string name, std::string valueName, std::string help,
               std::string &target);
  Flag &option(std::string name, std::string valueName, std::string help,
               int64_t &target);
  Flag &option(std::string name, std::string valueName, std::string help,
               uint64_t &target);
  Flag &option(std::string name, std::string valueName, std::string help,
               double &target);
  /// A repeatable flag; each occurrence appends.
  Flag &list(std::string name, std::string valueName, std::string help,
             std::vector<std::string> &target);
  /// A flag without a value; sets `target`.
  Flag &flag(std::string name, std::string help, bool &target);

private:
  Flag &add(std::unique_ptr<Flag> flag);
  Flag *find(const std::string &flagName);
  std::vector<std::unique_ptr<Flag>> flags;
  std::string positionalName, positionalHelp;
  std::string *positionalTarget = nullptr;
  bool positionalSeen = false;
};

/// A double from `text`, finite, or UsageError naming `what`.
double parseNumber(const std::string &what, const std::string &text);
/// An int64_t from `text` (decimal, no sign games), or UsageError.
int64_t parseInteger(const std::string &what, const std::string &text);

} // namespace moec::cli

#endif // MOEC_TOOLS_MOEC_COMMANDLINE_H
