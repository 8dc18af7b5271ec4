//===- SymbolicDim.h - a dimension over run-time symbols --------*- C++ -*-===//
//
// A tensor dimension in moec is a static size or a monomial over the
// run-time symbols of a program (`B` batch, `S` sequence length, ...), e.g.
// `2*B*S` for the k = 2 routed copies of B*S tokens. The compiler keeps the
// formula where MLIR types keep only `?` (dialects/.../SymbolicShape.h
// adapts it to attributes and types); bundles store its text; the runtime
// binds the symbols and evaluates it. One class, one grammar, for both.
//
// Text: terms joined by `*`, each a non-negative integer or a symbol
// (a letter, then letters, digits or `_`) with an optional `^N`; spaces
// around terms are ignored; `?` is a size nothing is known about. The
// canonical form (str()) is the coefficient (omitted when 1), then the
// symbols in name order: `128`, `B`, `2*B*S`, `B^2`.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_SUPPORT_SYMBOLICDIM_H
#define MOEC_SUPPORT_SYMBOLICDIM_H

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace moec::support {

/// Symbol bindings: "B" -> 16.
using SymbolValues = std::map<std::string, int64_t>;

class SymbolicDim {
public:
  /// A static size.
  SymbolicDim(int64_t size = 0) : coef(size) {}
  /// A size nothing is known about (`?`).
  static SymbolicDim unknown();
  /// A single symbol, e.g. `B`.
  static SymbolicDim symbol(std::string_view name);
  /// Parses the text above; nullopt on anything else, including a negative
  /// size and a coefficient or power that overflows int64_t.
  static std::optional<SymbolicDim> parse(std::string_view text);

  bool isUnknown() const { return unknownDim; }
  bool isStatic() const { return !unknownDim && factors.empty(); }
  int64_t getStatic() const { return coef; }
  /// The symbol when this is exactly one symbol (coefficient and power 1).
  std::optional<std::string> asSymbol() const;
  /// Symbol -> power.
  const std::map<std::string, int> &symbols() const { return factors; }

  /// The product; unknown when either is, or when the coefficients
  /// overflow.
  SymbolicDim operator*(const SymbolicDim &other) const;
  /// This dimension over `divisor` when the coefficient divides exactly
  /// (`6*S` / 3 = `2*S`); unknown stays unknown; nullopt when it does not
  /// divide or `divisor` is not positive.
  std::optional<SymbolicDim> divideExactly(int64_t divisor) const;
  /// Unknown dimensions equal nothing, not even themselves.
  bool operator==(const SymbolicDim &other) const;
  bool operator!=(const SymbolicDim &other) const { return !(*this == other); }

  /// The value with `values` bound; nullopt when unknown, when a symbol is
  /// unbound, or when the value overflows int64_t.
  std::optional<int64_t> evaluate(const SymbolValues &values) const;
  /// The canonical text; `?` when unknown.
  std::string str() const;

private:
  int64_t coef = 0;
  bool unknownDim = false;
  /// symbol -> power, ordered so that str() is canonical.
  std::map<std::string, int> factors;
};

} // namespace moec::support

#endif // MOEC_SUPPORT_SYMBOLICDIM_H
