//===- Values.h - operations on evaluated .moe values -----------*- C++ -*-===//
//
// The arithmetic, comparisons and built-in functions of the language, on
// SpecValues. Each operation reports its own errors (wrong types, overflow,
// division by zero) at the operator or call it evaluates, and returns
// failure() after the report. The evaluator does the rest: names, `and`,
// `or` and `not` (which short-circuit or need no arithmetic), and
// statements.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_FRONTEND_LIB_VALUES_H
#define MOEC_FRONTEND_LIB_VALUES_H

#include "moec/Frontend/AST.h"
#include "moec/Frontend/Diagnostics.h"
#include "moec/Frontend/SpecTree.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/LogicalResult.h"
#include <string>

namespace moec::frontend {

SpecValue makeInt(int64_t value, llvm::SMRange range);
SpecValue makeFloat(double value, llvm::SMRange range);
SpecValue makeBool(bool value, llvm::SMRange range);

/// The type of `value` as messages name it: "int", "float", "bool",
/// "string", "symbol", "call", "list".
llvm::StringRef getTypeName(const SpecValue &value);

/// `value` as written in the language: `3`, `0.5`, `true`, `"x"`, `gelu`,
/// `adamw(...)`, `[...]`.
std::string formatValue(const SpecValue &value);

/// The shortest decimal form of `value` that reads back the same (`0.1`,
/// `1e-05`, `3.0`).
std::string formatFloat(double value);

/// Evaluates `-operand` for `expr`.
llvm::FailureOr<SpecValue> applyNeg(const ast::UnaryExpr &expr,
                                    const SpecValue &operand,
                                    DiagnosticReporter &diags);

/// Evaluates `lhs <op> rhs` for an arithmetic or comparison `expr` (not
/// `and` / `or`).
llvm::FailureOr<SpecValue> applyBinary(const ast::BinaryExpr &expr,
                                       const SpecValue &lhs,
                                       const SpecValue &rhs,
                                       DiagnosticReporter &diags);

/// Whether `name` is a built-in function: min, max, ceil, floor, round, int,
/// float.
bool isBuiltin(llvm::StringRef name);

/// Calls the built-in `call.getCallee()` on the positional `args`.
llvm::FailureOr<SpecValue> callBuiltin(const ast::CallExpr &call,
                                       llvm::ArrayRef<SpecValue> args,
                                       DiagnosticReporter &diags);

} // namespace moec::frontend

#endif // MOEC_FRONTEND_LIB_VALUES_H
