//===- Values.cpp - making and printing .moe values -----------------------===//
//
// Part of moec. See Values.h.
//
//===----------------------------------------------------------------------===//

#include "Values.h"
#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace moec::frontend;

SpecValue moec::frontend::makeInt(int64_t value, llvm::SMRange range) {
  SpecValue result;
  result.kind = SpecValue::Kind::Int;
  result.intValue = value;
  result.range = range;
  return result;
}

SpecValue moec::frontend::makeFloat(double value, llvm::SMRange range) {
  SpecValue result;
  result.kind = SpecValue::Kind::Float;
  result.floatValue = value;
  result.range = range;
  return result;
}

SpecValue moec::frontend::makeBool(bool value, llvm::SMRange range) {
  SpecValue result;
  result.kind = SpecValue::Kind::Bool;
  result.boolValue = value;
  result.range = range;
  return result;
}

llvm::StringRef moec::frontend::getTypeName(const SpecValue &value) {
  switch (value.kind) {
  case SpecValue::Kind::Int:
    return "int";
  case SpecValue::Kind::Float:
    return "float";
  case SpecValue::Kind::Bool:
    return "bool";
  case SpecValue::Kind::String:
    return "string";
  case SpecValue::Kind::Symbol:
    return "symbol";
  case SpecValue::Kind::Call:
    return "call";
  case SpecValue::Kind::List:
    return "list";
  }
  return "value";
}

std::string moec::frontend::formatFloat(double value) {
  char buffer[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value)
      break;
  }
  std::string text = buffer;
  // Keep floats recognisable: `3.0`, not `3`.
  if (text.find_first_of(".einn") == std::string::npos)
    text += ".0";
  return text;
}

std::string moec::frontend::formatValue(const SpecValue &value) {
  switch (value.kind) {
  case SpecValue::Kind::Int:
    return std::to_string(value.intValue);
  case SpecValue::Kind::Float:
    return formatFloat(value.floatValue);
  case SpecValue::Kind::Bool:
    return value.boolValue ? "true" : "false";
  case SpecValue::Kind::String:
    return "\"" + value.text + "\"";
  case SpecValue::Kind::Symbol:
    return value.text;
  case SpecValue::Kind::Call:
    return value.text + "(...)";
  case SpecValue::Kind::List:
    return "[...]";
  }
  return "?";
}
