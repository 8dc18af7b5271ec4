//===- DimExpr.h - symbolic buffer dimensions -------------------*- C++ -*-===//
//
// A bundle dimension is an integer or a monomial over run-time symbols such
// as "B", "S" or "2*B*S": the compiler's symbolic dimension, in text (one
// class for both, moec/support/SymbolicDim.h). The runtime binds the
// symbols from its inputs and evaluates every buffer's size.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_DIMEXPR_H
#define MOEC_RUNTIME_DIMEXPR_H

#include "moec/support/SymbolicDim.h"

namespace moec::detail {

using DimExpr = support::SymbolicDim;
using SymbolValues = support::SymbolValues;

/// A dimension as a bundle may write it: SymbolicDim's text, but never the
/// unknown size `?`.
inline std::optional<DimExpr> parseDimExpr(const std::string &text) {
  std::optional<DimExpr> d = DimExpr::parse(text);
  if (d && d->isUnknown())
    return std::nullopt;
  return d;
}

} // namespace moec::detail

#endif // MOEC_RUNTIME_DIMEXPR_H
