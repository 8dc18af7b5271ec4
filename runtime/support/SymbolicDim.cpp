//===- SymbolicDim.cpp - a dimension over run-time symbols ----------------===//

#include "moec/support/SymbolicDim.h"

#include <cctype>

namespace moec::support {

namespace {

bool isSpace(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && isSpace(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && isSpace(s.back()))
    s.remove_suffix(1);
  return s;
}

bool isDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)); }

/// A non-negative decimal integer without sign or spaces, or nullopt
/// (also on overflow).
std::optional<int64_t> parseNatural(std::string_view s) {
  if (s.empty())
    return std::nullopt;
  int64_t value = 0;
  for (char c : s) {
    if (!isDigit(c) || __builtin_mul_overflow(value, 10, &value) ||
        __builtin_add_overflow(value, c - '0', &value))
      return std::nullopt;
  }
  return value;
}

bool isSymbolName(std::string_view s) {
  if (s.empty() || !std::isalpha(static_cast<unsigned char>(s.front())))
    return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      return false;
  return true;
}

} // namespace

SymbolicDim SymbolicDim::unknown() {
  SymbolicDim d(1);
  d.unknownDim = true;
  return d;
}

SymbolicDim SymbolicDim::symbol(std::string_view name) {
  SymbolicDim d(1);
  d.factors[std::string(name)] = 1;
  return d;
}

std::optional<SymbolicDim> SymbolicDim::parse(std::string_view text) {
  text = trim(text);
  if (text.empty())
    return std::nullopt;
  if (text == "?")
    return unknown();
  SymbolicDim result(1);
  while (true) {
    size_t star = text.find('*');
    std::string_view term = trim(text.substr(0, star));
    if (!term.empty() && isDigit(term.front())) {
      std::optional<int64_t> value = parseNatural(term);
      if (!value || __builtin_mul_overflow(result.coef, *value, &result.coef))
        return std::nullopt;
    } else {
      size_t caret = term.find('^');
      std::string_view name = trim(term.substr(0, caret));
      int64_t power = 1;
      if (caret != std::string_view::npos) {
        std::optional<int64_t> p = parseNatural(trim(term.substr(caret + 1)));
        if (!p || *p < 1 || *p > 64)
          return std::nullopt;
        power = *p;
      }
      if (!isSymbolName(name))
        return std::nullopt;
      int &total = result.factors[std::string(name)];
      if (total + power > 64)
        return std::nullopt;
      total += static_cast<int>(power);
    }
    if (star == std::string_view::npos)
      break;
    text = text.substr(star + 1);
  }
  if (result.coef == 0)
    result.factors.clear();
  return result;
}

std::optional<std::string> SymbolicDim::asSymbol() const {
  if (!unknownDim && coef == 1 && factors.size() == 1 &&
      factors.begin()->second == 1)
    return factors.begin()->first;
  return std::nullopt;
}

SymbolicDim SymbolicDim::operator*(const SymbolicDim &other) const {
  SymbolicDim result;
  if (unknownDim || other.unknownDim ||
      __builtin_mul_overflow(coef, other.coef, &result.coef))
    return unknown();
  result.factors = factors;
  for (const auto &[name, power] : other.factors)
    result.factors[name] += power;
  if (result.coef == 0)
    result.factors.clear();
  return result;
}

std::optional<SymbolicDim> SymbolicDim::divideExactly(int64_t divisor) const {
  if (unknownDim)
    return unknown();
  if (divisor <= 0 || coef % divisor != 0)
    return std::nullopt;
  SymbolicDim result = *this;
  result.coef = coef / divisor;
  return result;
}

bool SymbolicDim::operator==(const SymbolicDim &other) const {
  if (unknownDim || other.unknownDim)
    return false;
  return coef == other.coef && factors == other.factors;
}

std::optional<int64_t> SymbolicDim::evaluate(const SymbolValues &values) const {
  if (unknownDim)
    return std::nullopt;
  int64_t v = coef;
  for (const auto &[name, power] : factors) {
    auto it = values.find(name);
    if (it == values.end())
      return std::nullopt;
    for (int i = 0; i < power; ++i)
      if (__builtin_mul_overflow(v, it->second, &v))
        return std::nullopt;
  }
  return v;
}

std::string SymbolicDim::str() const {
  if (unknownDim)
    return "?";
  if (factors.empty())
    return std::to_string(coef);
  std::string s = coef == 1 ? "" : std::to_string(coef);
  for (const auto &[name, power] : factors) {
    if (!s.empty())
      s += "*";
    s += name;
    if (power != 1)
      s += "^" + std::to_string(power);
  }
  return s;
}

} // namespace moec::support
