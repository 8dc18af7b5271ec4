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

/// The edit distance from `name` to `candidate` (StringRef::edit_distance,
/// replacements allowed), where swapping two adjacent characters, the most
/// common typo, counts as one edit: "stpes" is 1 away from "steps".
/// Distances above `max` come back as more than `max`.
static unsigned getTypoDistance(llvm::StringRef name, llvm::StringRef candidate,
                                unsigned max) {
  unsigned best = name.edit_distance(candidate, /*AllowReplacements=*/true,
                                     /*MaxEditDistance=*/max);
  std::string swapped = name.str();
  for (size_t i = 0; i + 1 < swapped.size() && best > 1; ++i) {
    if (swapped[i] == swapped[i + 1])
      continue;
    std::swap(swapped[i], swapped[i + 1]);
    best = std::min(best, 1 + llvm::StringRef(swapped).edit_distance(
                                  candidate, /*AllowReplacements=*/true,
                                  /*MaxEditDistance=*/max));
    std::swap(swapped[i], swapped[i + 1]);
  }
  return best;
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
    unsigned distance = getTypoDistance(name, candidate, threshold);
    if (distance < bestDistance) {
      bestDistance = distance;
      best = candidate;
    }
  }
  return best;
}
