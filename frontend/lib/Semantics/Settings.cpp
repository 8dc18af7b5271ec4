//===- Settings.cpp - typed, checked access to a node's settings ----------===//

#include "Settings.h"
#include "moec/Frontend/ReadSpec.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include <cmath>
#include <cstdio>

using namespace moec::frontend;
using llvm::SMLoc;
using llvm::StringRef;

mlir::InFlightDiagnostic Reporter::error(SMLoc loc) {
  anyError = true;
  return mlir::emitError(toLocation(sourceMgr, loc, context));
}

std::string moec::frontend::describeValue(const SpecValue &value) {
  switch (value.kind) {
  case SpecValue::Kind::Int:
    return "the integer " + std::to_string(value.intValue);
  case SpecValue::Kind::Float: {
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%.10g", value.floatValue);
    std::string s = buffer;
    if (s.find_first_of(".eEn") == std::string::npos)
      s += ".0";
    return "the float " + s;
  }
  case SpecValue::Kind::Bool:
    return value.boolValue ? "true" : "false";
  case SpecValue::Kind::String:
    return "the string \"" + value.text + "\"";
  case SpecValue::Kind::Symbol:
    return "the name '" + value.text + "'";
  case SpecValue::Kind::Call:
    return "the call '" + value.text + "(...)'";
  case SpecValue::Kind::List:
    return "a list";
  }
  return "a value";
}

Settings::Settings(const std::vector<SpecSetting> &settings, std::string what,
                   llvm::SMRange range, Reporter &reporter)
    : settings(settings), what(std::move(what)), ownerRange(range),
      reporter(reporter) {}

bool Settings::has(StringRef name) const {
  return llvm::any_of(settings,
                      [&](const SpecSetting &s) { return s.name == name; });
}

const SpecValue *Settings::get(StringRef name) {
  if (!llvm::is_contained(known, name.str()))
    known.push_back(name.str());
  for (const SpecSetting &s : settings)
    if (s.name == name)
      return &s.value;
  return nullptr;
}

const SpecValue *Settings::require(StringRef name) {
  const SpecValue *value = get(name);
  if (value)
    return value;
  // A misspelt setting is reported once, by finish(), as unknown with a
  // suggestion; do not also call the intended one missing.
  std::vector<std::string> present;
  for (const SpecSetting &s : settings)
    present.push_back(s.name);
  if (nearestName(name, present).empty())
    reporter.error(ownerRange.Start)
        << what << " needs the setting '" << name << "'";
  return nullptr;
}

void Settings::typeError(const SpecValue &value, StringRef name,
                         StringRef expected) {
  auto diag = reporter.error(value.range.Start);
  diag << "'" << name << "' of " << what << " must be " << expected
       << ", got " << describeValue(value);
  if (value.kind == SpecValue::Kind::Symbol && !value.suggestion.empty())
    diag << "; did you mean the constant '" << value.suggestion << "'?";
  else if (value.kind == SpecValue::Kind::Float && expected == "an integer" &&
           value.floatValue == std::floor(value.floatValue))
    diag << " (use // for integer division)";
}

std::optional<int64_t> Settings::asInt(const SpecValue &value, StringRef name) {
  if (value.kind == SpecValue::Kind::Int)
    return value.intValue;
  typeError(value, name, "an integer");
  return std::nullopt;
}

std::optional<double> Settings::asFloat(const SpecValue &value,
                                        StringRef name) {
  if (value.kind == SpecValue::Kind::Int)
    return static_cast<double>(value.intValue);
  if (value.kind == SpecValue::Kind::Float)
    return value.floatValue;
  typeError(value, name, "a number");
  return std::nullopt;
}

int64_t Settings::getInt(StringRef name, int64_t fallback, int64_t min,
                         int64_t max) {
  const SpecValue *value = get(name);
  if (!value)
    return fallback;
  std::optional<int64_t> v = asInt(*value, name);
  if (!v)
    return fallback;
  if (*v < min || *v > max) {
    auto diag = reporter.error(value->range.Start);
    diag << "'" << name << "' of " << what << " must be ";
    if (max == std::numeric_limits<int64_t>::max())
      diag << ">= " << min;
    else
      diag << "in [" << min << ", " << max << "]";
    diag << ", got " << *v;
    return fallback;
  }
  return *v;
}

int64_t Settings::requirePositive(StringRef name) {
  if (!require(name))
    return 0;
  return getInt(name, 0, 1);
}

double Settings::getFloat(StringRef name, double fallback, double min,
                          double max) {
  const SpecValue *value = get(name);
  if (!value)
    return fallback;
  std::optional<double> v = asFloat(*value, name);
  if (!v)
    return fallback;
  if (!(*v >= min && *v <= max)) {
    auto diag = reporter.error(value->range.Start);
    diag << "'" << name << "' of " << what << " must be ";
    if (std::isinf(max))
      diag << ">= " << min;
    else
      diag << "in [" << min << ", " << max << "]";
    diag << ", got " << *v;
    return fallback;
  }
  return *v;
}

bool Settings::getBool(StringRef name, bool fallback) {
  const SpecValue *value = get(name);
  if (!value)
    return fallback;
  if (value->kind == SpecValue::Kind::Bool)
    return value->boolValue;
  typeError(*value, name, "true or false");
  return fallback;
}

std::string Settings::getString(StringRef name, std::string fallback) {
  const SpecValue *value = get(name);
  if (!value)
    return fallback;
  if (value->kind == SpecValue::Kind::String)
    return value->text;
  typeError(*value, name, "a string");
  return fallback;
}

size_t Settings::getChoice(StringRef name, llvm::ArrayRef<StringRef> allowed,
                           size_t fallback) {
  const SpecValue *value = get(name);
  if (!value)
    return fallback;
  std::string choices = "one of " + llvm::join(allowed, ", ");
  if (value->kind != SpecValue::Kind::Symbol &&
      value->kind != SpecValue::Kind::String) {
    typeError(*value, name, choices);
    return fallback;
  }
  for (auto [i, option] : llvm::enumerate(allowed))
    if (option == value->text)
      return i;
  auto diag = reporter.error(value->range.Start);
  diag << "unknown " << name << " '" << value->text << "' for " << what
       << " (" << choices << ")";
  // "gelu" means one of the gelu_* variants more likely than "relu".
  std::vector<std::string> refinements;
  for (StringRef option : allowed)
    if (option.starts_with(value->text + "_"))
      refinements.push_back(("'" + option + "'").str());
  if (!refinements.empty()) {
    diag << "; did you mean " << llvm::join(refinements, " or ") << "?";
    return fallback;
  }
  std::vector<std::string> options(allowed.begin(), allowed.end());
  std::string near = nearestName(value->text, options);
  if (!near.empty())
    diag << "; did you mean '" << near << "'?";
  return fallback;
}

void Settings::finish() {
  for (const SpecSetting &s : settings) {
    if (llvm::is_contained(known, s.name))
      continue;
    auto diag = reporter.error(s.nameRange.Start);
    if (s.name.empty()) {
      diag << what << " takes named arguments only";
      continue;
    }
    diag << "unknown setting '" << s.name << "' for " << what;
    std::string near = nearestName(s.name, known);
    if (!near.empty())
      diag << "; did you mean '" << near << "'?";
  }
}
