//===- ReadSpec.cpp - read and evaluate a .moe file -----------------------===//
//
// Part of moec. See moec/Frontend/ReadSpec.h: parseSpec runs the parser, then
// the evaluator, with one DiagnosticReporter for both.
//
//===----------------------------------------------------------------------===//

#include "moec/Frontend/ReadSpec.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "moec/Frontend/Diagnostics.h"
#include "moec/Frontend/Evaluator.h"
#include "moec/Frontend/Parser.h"
#include "moec/support/Suggest.h"
#include <algorithm>

using namespace moec::frontend;

std::optional<SpecFile> moec::frontend::parseSpec(llvm::SourceMgr &sourceMgr,
                                                  mlir::MLIRContext *context) {
  DiagnosticReporter diags(sourceMgr, context);
  std::unique_ptr<ast::File> file = parseFile(diags);
  if (!file || diags.shouldStop())
    return std::nullopt;
  // Evaluate even after syntax errors: what parsed may hold more mistakes
  // worth reporting in the same run.
  SpecFile spec = evaluate(*file, diags);
  if (diags.hadErrors())
    return std::nullopt;
  return spec;
}

mlir::Location moec::frontend::toLocation(llvm::SourceMgr &sourceMgr,
                                          llvm::SMLoc loc,
                                          mlir::MLIRContext *context) {
  unsigned bufferId = sourceMgr.FindBufferContainingLoc(loc);
  if (bufferId == 0)
    return mlir::UnknownLoc::get(context);
  auto [line, column] = sourceMgr.getLineAndColumn(loc, bufferId);
  llvm::StringRef file =
      sourceMgr.getMemoryBuffer(bufferId)->getBufferIdentifier();
  return mlir::FileLineColLoc::get(context, file, line, column);
}

std::string
moec::frontend::nearestName(llvm::StringRef name,
                            llvm::ArrayRef<std::string> candidates) {
  return moec::support::nearestName(
      name, std::vector<std::string>(candidates.begin(), candidates.end()));
}
