//===- Parse.cpp - parse and evaluate a .moe file -------------------------===//
//
// Part of moec. See moec/Frontend/Parse.h: parseSpec runs the parser, then
// the evaluator, with one DiagnosticReporter for both.
//
//===----------------------------------------------------------------------===//

#include "moec/Frontend/Parse.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "moec/Frontend/Diagnostics.h"
#include "moec/Frontend/Evaluator.h"
#include "moec/Frontend/Parser.h"
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
  unsigned threshold = std::max<unsigned>(1, name.size() / 3);
  std::string best;
  unsigned bestDistance = threshold + 1;
  for (const std::string &candidate : candidates) {
    if (candidate == name)
      continue;
    unsigned distance = name.edit_distance(candidate,
                                           /*AllowReplacements=*/true,
                                           /*MaxEditDistance=*/threshold);
    if (distance < bestDistance) {
      bestDistance = distance;
      best = candidate;
    }
  }
  return best;
}
