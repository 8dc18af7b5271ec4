//===- Diagnostics.h - error reporting for the .moe front end ---*- C++ -*-===//
//
// The lexer, the parser and the evaluator report every error through one
// DiagnosticReporter. It turns SMLocs into FileLineColLocs, sends the errors
// to the MLIRContext's diagnostic engine, drops repeats (a `repeat` body
// evaluated eight times reports its mistake once), and stops reporting after
// kMaxErrors.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_FRONTEND_DIAGNOSTICS_H
#define MOEC_FRONTEND_DIAGNOSTICS_H

#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/LogicalResult.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"

namespace moec::frontend {

class DiagnosticReporter {
public:
  /// The number of errors reported before the reporter gives up; the next
  /// one is replaced by a single "too many errors" error.
  static constexpr unsigned kMaxErrors = 50;

  DiagnosticReporter(llvm::SourceMgr &sourceMgr, mlir::MLIRContext *context)
      : sourceMgr(sourceMgr), context(context) {}

  /// Reports an error at `loc`. Always returns failure(), so that callers
  /// can write `return diags.error(loc, "...")`.
  llvm::LogicalResult error(llvm::SMLoc loc, const llvm::Twine &message);

  /// Reports an error at `loc` with a note at `noteLoc`.
  llvm::LogicalResult error(llvm::SMLoc loc, const llvm::Twine &message,
                            llvm::SMLoc noteLoc, const llvm::Twine &note);

  /// When set, a second error at the location of an earlier one is dropped
  /// even if its message differs. The evaluator sets it: a `repeat` body
  /// evaluated eight times would otherwise report "division by zero: 3 // 0"
  /// with eight different values.
  void setOneErrorPerLocation(bool value) { oneErrorPerLocation = value; }

  /// The number of errors reported so far (not counting dropped repeats).
  unsigned getNumErrors() const { return numErrors; }
  bool hadErrors() const { return numErrors != 0; }

  /// True once more than kMaxErrors errors were attempted and the "too many
  /// errors" error went out: callers should stop.
  bool shouldStop() const { return stopped; }

  llvm::SourceMgr &getSourceMgr() const { return sourceMgr; }
  mlir::MLIRContext *getContext() const { return context; }

  /// The FileLineColLoc of `loc`.
  mlir::Location getLocation(llvm::SMLoc loc) const;

private:
  /// Returns false when this error should not be printed: a repeat of an
  /// earlier one, or past the limit.
  bool admit(llvm::SMLoc loc, const llvm::Twine &message);

  llvm::SourceMgr &sourceMgr;
  mlir::MLIRContext *context;
  unsigned numErrors = 0;
  bool stopped = false;
  bool oneErrorPerLocation = false;
  /// "<location>:<message>" of every error reported, to drop repeats.
  llvm::StringSet<> reported;
  /// The location of every error reported while oneErrorPerLocation is set.
  llvm::DenseSet<const char *> reportedLocations;
};

} // namespace moec::frontend

#endif // MOEC_FRONTEND_DIAGNOSTICS_H
