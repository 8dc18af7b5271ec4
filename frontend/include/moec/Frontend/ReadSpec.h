//===- ReadSpec.h - read and evaluate a .moe file ---------------*- C++ -*-===//

#ifndef MOEC_FRONTEND_READSPEC_H
#define MOEC_FRONTEND_READSPEC_H

#include "moec/Frontend/SpecTree.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/SourceMgr.h"
#include <optional>

namespace moec::frontend {

/// The language version this moec reads.
inline constexpr const char *kLanguageVersion = "1";

/// Parses and evaluates the main buffer of `sourceMgr`. Every error is
/// emitted through `context`'s diagnostic engine at a FileLineColLoc (so a
/// SourceMgrDiagnosticHandler prints `file:line:col: error: ...` with the
/// line and a caret); the parser recovers at the next statement and keeps
/// going, so one run reports several errors. Returns the evaluated file, or
/// nullopt when any error was reported.
std::optional<SpecFile> parseSpec(llvm::SourceMgr &sourceMgr,
                                  mlir::MLIRContext *context);

/// The FileLineColLoc of `loc` in `sourceMgr`.
mlir::Location toLocation(llvm::SourceMgr &sourceMgr, llvm::SMLoc loc,
                          mlir::MLIRContext *context);

/// The name in `candidates` nearest to `name`, when it is a likely typo;
/// empty otherwise. One rule for all of moec: moec/support/Suggest.h.
std::string nearestName(llvm::StringRef name,
                        llvm::ArrayRef<std::string> candidates);

} // namespace moec::frontend

#endif // MOEC_FRONTEND_READSPEC_H
