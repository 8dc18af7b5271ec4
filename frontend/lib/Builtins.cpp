//===- Builtins.cpp - the built-in functions of .moe ----------------------===//
//
// Part of moec. See Values.h. The built-ins:
//   min(a, b, ...), max(a, b, ...)  int when every argument is an int, else
//                                   float; a single list argument works too;
//   ceil(x), floor(x)               int;
//   round(x)                        int, halves to even (round(2.5) == 2);
//   int(x)                          int, truncating towards zero;
//   float(x)                        float.
// Every argument must be a number; a result that does not fit in a 64-bit
// int is an error.
//
//===----------------------------------------------------------------------===//

#include "Values.h"
#include "llvm/ADT/StringSwitch.h"
#include <cmath>

using namespace moec::frontend;
using namespace moec::frontend::ast;
using llvm::failure;
using llvm::FailureOr;

namespace {
enum class Builtin { None, Min, Max, Ceil, Floor, Round, Int, Float };
} // namespace

static Builtin getBuiltin(llvm::StringRef name) {
  return llvm::StringSwitch<Builtin>(name)
      .Case("min", Builtin::Min)
      .Case("max", Builtin::Max)
      .Case("ceil", Builtin::Ceil)
      .Case("floor", Builtin::Floor)
      .Case("round", Builtin::Round)
      .Case("int", Builtin::Int)
      .Case("float", Builtin::Float)
      .Default(Builtin::None);
}

bool moec::frontend::isBuiltin(llvm::StringRef name) {
  return getBuiltin(name) != Builtin::None;
}

static bool isNumber(const SpecValue &value) {
  return value.kind == SpecValue::Kind::Int ||
         value.kind == SpecValue::Kind::Float;
}

static double toDouble(const SpecValue &value) {
  return value.kind == SpecValue::Kind::Int
             ? static_cast<double>(value.intValue)
             : value.floatValue;
}

/// Rounds half to even, independent of the floating-point rounding mode.
static double roundHalfEven(double value) {
  double lower = std::floor(value);
  double fraction = value - lower;
  if (fraction < 0.5)
    return lower;
  if (fraction > 0.5)
    return lower + 1;
  return std::fmod(lower, 2.0) == 0 ? lower : lower + 1;
}

/// min / max over `values`, which are numbers.
static SpecValue extremum(llvm::ArrayRef<SpecValue> values, bool isMax,
                          llvm::SMRange range) {
  bool allInts = llvm::all_of(values, [](const SpecValue &value) {
    return value.kind == SpecValue::Kind::Int;
  });
  if (allInts) {
    int64_t best = values.front().intValue;
    for (const SpecValue &value : values.drop_front())
      best = isMax ? std::max(best, value.intValue)
                   : std::min(best, value.intValue);
    return makeInt(best, range);
  }
  double best = toDouble(values.front());
  for (const SpecValue &value : values.drop_front())
    best = isMax ? std::max(best, toDouble(value))
                 : std::min(best, toDouble(value));
  return makeFloat(best, range);
}

FailureOr<SpecValue> moec::frontend::callBuiltin(const CallExpr &call,
                                                 llvm::ArrayRef<SpecValue> args,
                                                 DiagnosticReporter &diags) {
  Builtin builtin = getBuiltin(call.getCallee());
  std::string name = (call.getCallee() + "()").str();
  llvm::SMRange range = call.getRange();
  auto typeError = [&](const SpecValue &value) {
    return diags.error(value.range.Start,
                       name + " needs numbers, found " + getTypeName(value));
  };

  if (builtin == Builtin::Min || builtin == Builtin::Max) {
    llvm::ArrayRef<SpecValue> values = args;
    if (values.size() == 1 && values.front().kind == SpecValue::Kind::List)
      values = values.front().list;
    if (values.empty())
      return diags.error(call.getLoc(), name + " needs at least one number");
    for (const SpecValue &value : values)
      if (!isNumber(value))
        return typeError(value);
    return extremum(values, builtin == Builtin::Max, range);
  }

  if (args.size() != 1)
    return diags.error(call.getLoc(), name + " takes 1 argument, found " +
                                          llvm::Twine(args.size()));
  const SpecValue &arg = args.front();
  if (!isNumber(arg))
    return typeError(arg);
  if (builtin == Builtin::Float)
    return makeFloat(toDouble(arg), range);
  if (arg.kind == SpecValue::Kind::Int)
    return makeInt(arg.intValue, range);

  double value = arg.floatValue;
  switch (builtin) {
  case Builtin::Ceil:
    value = std::ceil(value);
    break;
  case Builtin::Floor:
    value = std::floor(value);
    break;
  case Builtin::Round:
    value = roundHalfEven(value);
    break;
  default: // Int
    value = std::trunc(value);
    break;
  }
  // [-2^63, 2^63): every double in it converts exactly.
  if (!(value >= -9223372036854775808.0 && value < 9223372036854775808.0))
    return diags.error(call.getLoc(), name.substr(0, name.size() - 1) +
                                          formatValue(arg) +
                                          ") does not fit in a 64-bit int");
  return makeInt(static_cast<int64_t>(value), range);
}
