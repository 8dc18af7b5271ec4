//===- DimExpr.cpp - symbolic buffer dimensions ---------------------------===//

#include "DimExpr.h"

#include <algorithm>
#include <cctype>
#include <sstream>

namespace moec::detail {

std::optional<DimExpr> DimExpr::parse(const std::string &text) {
  if (text.empty())
    return std::nullopt;
  DimExpr result(1);
  std::stringstream terms(text);
  std::string term;
  while (std::getline(terms, term, '*')) {
    if (term.empty())
      return std::nullopt;
    if (std::isdigit(static_cast<unsigned char>(term[0]))) {
      for (char c : term)
        if (!std::isdigit(static_cast<unsigned char>(c)))
          return std::nullopt;
      if (term.size() > 15)
        return std::nullopt;
      result.coef *= std::stoll(term);
      continue;
    }
    std::string name = term;
    int pow = 1;
    if (size_t caret = term.find('^'); caret != std::string::npos) {
      name = term.substr(0, caret);
      std::string p = term.substr(caret + 1);
      if (p.empty() || p.size() > 2 ||
          !std::all_of(p.begin(), p.end(),
                       [](char c) { return std::isdigit(c); }))
        return std::nullopt;
      pow = std::stoi(p);
      if (pow < 1)
        return std::nullopt;
    }
    if (name.empty() || !std::isalpha(static_cast<unsigned char>(name[0])))
      return std::nullopt;
    for (char c : name)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
        return std::nullopt;
    result.factors[name] += pow;
  }
  return result;
}

std::optional<std::string> DimExpr::asSymbol() const {
  if (coef == 1 && factors.size() == 1 && factors.begin()->second == 1)
    return factors.begin()->first;
  return std::nullopt;
}

std::optional<int64_t> DimExpr::evaluate(const SymbolValues &values) const {
  int64_t v = coef;
  for (const auto &[name, pow] : factors) {
    auto it = values.find(name);
    if (it == values.end())
      return std::nullopt;
    for (int i = 0; i < pow; ++i)
      if (__builtin_mul_overflow(v, it->second, &v))
        return std::nullopt;
  }
  return v;
}

std::string DimExpr::str() const {
  if (factors.empty())
    return std::to_string(coef);
  std::string s = coef == 1 ? "" : std::to_string(coef);
  for (const auto &[name, pow] : factors) {
    if (!s.empty())
      s += "*";
    s += name;
    if (pow != 1)
      s += "^" + std::to_string(pow);
  }
  return s;
}

} // namespace moec::detail
