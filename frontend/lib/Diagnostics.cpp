//===- Diagnostics.cpp - error reporting for the .moe front end -----------===//
//
// Part of moec. See DiagnosticReporter in moec/Frontend/Diagnostics.h.
//
//===----------------------------------------------------------------------===//

#include "moec/Frontend/Diagnostics.h"
#include "mlir/IR/Diagnostics.h"
#include "moec/Frontend/ReadSpec.h"

using namespace moec::frontend;

mlir::Location DiagnosticReporter::getLocation(llvm::SMLoc loc) const {
  return toLocation(sourceMgr, loc, context);
}

bool DiagnosticReporter::admit(llvm::SMLoc loc, const llvm::Twine &message) {
  if (stopped)
    return false;
  std::string key =
      (llvm::Twine(reinterpret_cast<uintptr_t>(loc.getPointer())) + ":" +
       message)
          .str();
  if (!reported.insert(key).second)
    return false;
  if (oneErrorPerLocation && !reportedLocations.insert(loc.getPointer()).second)
    return false;
  if (numErrors >= kMaxErrors) {
    stopped = true;
    mlir::emitError(getLocation(loc))
        << "too many errors (" << kMaxErrors << "); stopping here";
    return false;
  }
  ++numErrors;
  return true;
}

llvm::LogicalResult DiagnosticReporter::error(llvm::SMLoc loc,
                                              const llvm::Twine &message) {
  if (admit(loc, message))
    mlir::emitError(getLocation(loc)) << message;
  return llvm::failure();
}

llvm::LogicalResult DiagnosticReporter::error(llvm::SMLoc loc,
                                              const llvm::Twine &message,
                                              llvm::SMLoc noteLoc,
                                              const llvm::Twine &note) {
  if (admit(loc, message)) {
    mlir::InFlightDiagnostic diag = mlir::emitError(getLocation(loc))
                                    << message;
    diag.attachNote(getLocation(noteLoc)) << note;
  }
  return llvm::failure();
}
