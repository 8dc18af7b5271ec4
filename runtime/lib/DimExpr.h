//===- DimExpr.h - symbolic buffer dimensions -------------------*- C++ -*-===//
//
// A bundle dimension is an integer or a monomial over run-time symbols such
// as "B", "S" or "2*B*S" (the compiler's SymDim, in text). The runtime binds
// the symbols from its inputs and evaluates every buffer's size.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_DIMEXPR_H
#define MOEC_RUNTIME_DIMEXPR_H

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace moec::detail {

using SymbolValues = std::map<std::string, int64_t>;

class DimExpr {
public:
  DimExpr(int64_t value = 0) : coef(value) {}
  /// Parses "128", "B", "2*B*S", "S^2"; nullopt on anything else.
  static std::optional<DimExpr> parse(const std::string &text);

  bool isStatic() const { return factors.empty(); }
  /// A single symbol with exponent and coefficient 1, e.g. "B".
  std::optional<std::string> asSymbol() const;
  const std::map<std::string, int> &symbols() const { return factors; }

  /// The value under `values`; nullopt if a symbol is unbound or the value
  /// overflows.
  std::optional<int64_t> evaluate(const SymbolValues &values) const;
  std::string str() const;

private:
  int64_t coef = 1;
  std::map<std::string, int> factors;
};

} // namespace moec::detail

#endif // MOEC_RUNTIME_DIMEXPR_H
