//===- Evaluator.h - evaluate a .moe AST into a SpecFile --------*- C++ -*-===//
//
// Folds constants, expands `repeat`, resolves `if`, and checks the rules
// about values: types, scopes, duplicate settings. Knows nothing about which
// sections, layers or settings exist (MLIRGen does).
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_FRONTEND_EVALUATOR_H
#define MOEC_FRONTEND_EVALUATOR_H

#include "moec/Frontend/AST.h"
#include "moec/Frontend/Diagnostics.h"
#include "moec/Frontend/SpecTree.h"

namespace moec::frontend {

/// The most repetitions one `repeat` may ask for.
inline constexpr int64_t kMaxRepeatCount = 100000;
/// The most nodes (layers and blocks) a whole file may expand to.
inline constexpr int64_t kMaxSpecNodes = 1000000;

/// Evaluates `file`, reporting every error through `diags`. What failed is
/// left out of the result, so the result is only meaningful when `diags`
/// reported no error.
SpecFile evaluate(const ast::File &file, DiagnosticReporter &diags);

} // namespace moec::frontend

#endif // MOEC_FRONTEND_EVALUATOR_H
