//===- Settings.cpp - typed, checked access to a node's settings ----------===//

#include "Settings.h"
#include "moec/Frontend/ReadSpec.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ErrorHandling.h"
#include <cmath>
#include <limits>
#include <cstdio>
#include <cstdlib>

using namespace moec::frontend;
using llvm::SMLoc;
using llvm::StringRef;

Reporter::Reporter(llvm::SourceMgr &sourceMgr, mlir::MLIRContext *context)
    : sourceMgr(sourceMgr), context(context),
      dropRepeats(context, [this](mlir::Diagnostic &diag) {
        std::string key;
        llvm::raw_string_ostream os(key);
        os << diag.getLocation() << ':' << diag.str();
        // Handled (dropped) when seen before; else on to the next handler.
        return mlir::success(!reported.insert(key).second);
      }) {}

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

const std::vector<SpecSetting> &
moec::frontend::callArguments(const SpecValue *value) {
  static const std::vector<SpecSetting> none;
  return value && value->kind == SpecValue::Kind::Call ? value->args : none;
}

namespace {

/// "a, b or c".
std::string alternatives(const std::vector<std::string> &names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i)
      text += i + 1 == names.size() ? " or " : ", ";
    text += names[i];
  }
  return text;
}

} // namespace

Settings::Settings(const std::vector<SpecSetting> &settings,
                   const OwnerInfo &owner, llvm::SMRange range,
                   Reporter &reporter)
    : settings(settings), owner(owner), ownerRange(range),
      reporter(reporter) {}

const SettingInfo &Settings::info(StringRef name) const {
  if (const SettingInfo *s = owner.find(name))
    return *s;
  llvm::report_fatal_error(llvm::Twine("internal error: '") + name +
                           "' is not in the settings table of " + owner.id);
}

const SpecValue *Settings::get(StringRef name) const {
  (void)info(name);
  if (!llvm::is_contained(read, name.str()))
    read.push_back(name.str());
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
  // Nor when a present one qualifies it ("num_experts" for "experts").
  bool qualified = llvm::any_of(present, [&](const std::string &p) {
    return !nearestName(p, {name.str()}).empty();
  });
  if (nearestName(name, present).empty() && !qualified)
    reporter.error(ownerRange.Start)
        << owner.what << " needs the setting '" << name << "'";
  return nullptr;
}

void Settings::typeError(const SpecValue &value, StringRef name,
                         StringRef expected) {
  auto diag = reporter.error(value.range.Start);
  diag << "'" << name << "' of " << owner.what << " must be " << expected
       << ", got " << describeValue(value);
  if (value.kind == SpecValue::Kind::Symbol && !value.suggestion.empty())
    diag << "; did you mean the constant '" << value.suggestion << "'?";
  else if (value.kind == SpecValue::Kind::Float && expected == "an integer" &&
           value.floatValue == std::floor(value.floatValue))
    diag << " (use // for integer division)";
}

bool Settings::inRange(const SettingInfo &s, const SpecValue &value,
                       double v) {
  // The bundle stores numbers as float32 where the model runs in it; a
  // value beyond that range would reach the runtime as infinity.
  if (s.type == SettingType::Number &&
      !(std::fabs(v) <= std::numeric_limits<float>::max())) {
    reporter.error(value.range.Start)
        << "'" << s.name << "' of " << owner.what
        << " must be a finite number within float32's range (magnitude at "
           "most 3.4e38), got "
        << limitText(v);
    return false;
  }
  if ((!s.min || v >= *s.min) && (!s.max || v <= *s.max))
    return true;
  auto diag = reporter.error(value.range.Start);
  diag << "'" << s.name << "' of " << owner.what << " must be ";
  if (s.max)
    diag << "in [" << limitText(s.min.value_or(-HUGE_VAL)) << ", "
         << limitText(*s.max) << "]";
  else
    diag << ">= " << limitText(*s.min);
  diag << ", got ";
  if (value.kind == SpecValue::Kind::Int)
    diag << value.intValue;
  else
    diag << v;
  return false;
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

int64_t Settings::getInt(StringRef name) {
  const SettingInfo &s = info(name);
  if (s.computed)
    llvm::report_fatal_error(llvm::Twine("internal error: '") + name +
                             "' has a computed default");
  if (s.required && !require(name))
    return 0;
  return getInt(name, s.required ? 0 : std::strtoll(s.defaultText.c_str(),
                                                    nullptr, 10));
}

int64_t Settings::getInt(StringRef name, int64_t computed) {
  const SettingInfo &s = info(name);
  const SpecValue *value = get(name);
  if (!value)
    return computed;
  std::optional<int64_t> v = asInt(*value, name);
  if (!v || !inRange(s, *value, static_cast<double>(*v)))
    return computed;
  return *v;
}

double Settings::getFloat(StringRef name) {
  const SettingInfo &s = info(name);
  if (s.computed)
    llvm::report_fatal_error(llvm::Twine("internal error: '") + name +
                             "' has a computed default");
  return getFloat(name, std::strtod(s.defaultText.c_str(), nullptr));
}

double Settings::getFloat(StringRef name, double computed) {
  const SettingInfo &s = info(name);
  const SpecValue *value = get(name);
  if (!value)
    return computed;
  std::optional<double> v = asFloat(*value, name);
  if (!v || !inRange(s, *value, *v))
    return computed;
  return *v;
}

bool Settings::getBool(StringRef name) {
  bool fallback = info(name).defaultText == "true";
  const SpecValue *value = get(name);
  if (!value)
    return fallback;
  if (value->kind == SpecValue::Kind::Bool)
    return value->boolValue;
  typeError(*value, name, "true or false");
  return fallback;
}

size_t Settings::getChoice(StringRef name) {
  const SettingInfo &s = info(name);
  auto found = llvm::find(s.choices, s.defaultText);
  size_t fallback = found == s.choices.end() ? 0 : found - s.choices.begin();
  const SpecValue *value = get(name);
  if (!value)
    return fallback;
  std::string choices = "one of " + llvm::join(s.choices, ", ");
  if (value->kind != SpecValue::Kind::Symbol &&
      value->kind != SpecValue::Kind::String) {
    typeError(*value, name, choices);
    return fallback;
  }
  for (auto [i, option] : llvm::enumerate(s.choices))
    if (option == value->text)
      return i;
  auto diag = reporter.error(value->range.Start);
  diag << "unknown " << name << " '" << value->text << "' for " << owner.what
       << " (" << choices << ")";
  // "gelu" means one of the gelu_* variants more likely than "relu".
  std::vector<std::string> refinements;
  for (const std::string &option : s.choices)
    if (StringRef(option).starts_with(value->text + "_"))
      refinements.push_back("'" + option + "'");
  if (!refinements.empty()) {
    diag << "; did you mean " << llvm::join(refinements, " or ") << "?";
    return fallback;
  }
  std::string near = nearestName(value->text, s.choices);
  if (!near.empty())
    diag << "; did you mean '" << near << "'?";
  return fallback;
}

std::optional<std::string> Settings::getCallName(StringRef name) {
  const SettingInfo &s = info(name);
  const SpecValue *value = get(name);
  if (!value)
    return s.required ? std::nullopt : std::optional(s.defaultText);
  if (value->kind != SpecValue::Kind::Symbol &&
      value->kind != SpecValue::Kind::Call) {
    reporter.error(value->range.Start)
        << "'" << name << "' must be " << alternatives(s.choices)
        << " (a name, or a call with settings), got " << describeValue(*value);
    return std::nullopt;
  }
  if (llvm::is_contained(s.choices, value->text))
    return value->text;
  auto diag = reporter.error(value->range.Start)
              << "unknown " << name << " '" << value->text << "' ("
              << alternatives(s.choices) << ")";
  std::string near = nearestName(value->text, s.choices);
  if (!near.empty())
    diag << "; did you mean '" << near << "'?";
  return std::nullopt;
}

void Settings::finish() {
  std::vector<std::string> known = owner.names();
  // A checker may stop reading at an error (a call without its file name);
  // the table's self-check only means something for a spec read through.
  for (const std::string &name : known)
    if (!reporter.failed() && !llvm::is_contained(read, name))
      llvm::report_fatal_error(llvm::Twine("internal error: the settings "
                                           "table lists '") +
                               name + "' for " + owner.id +
                               ", which the checker never reads");
  for (const SpecSetting &s : settings) {
    if (llvm::is_contained(known, s.name))
      continue;
    auto diag = reporter.error(s.nameRange.Start);
    if (s.name.empty()) {
      diag << owner.what << " takes named arguments only";
      continue;
    }
    diag << "unknown setting '" << s.name << "' for " << owner.what;
    std::string near = nearestName(s.name, known);
    if (!near.empty())
      diag << "; did you mean '" << near << "'?";
    else if (known.empty())
      diag << "; it takes no settings";
    else
      diag << "; it takes " << alternatives(known);
  }
}
