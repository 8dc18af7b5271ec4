//===- Sema.h - check a .moe file and extract its ModelSpec -----*- C++ -*-===//

#ifndef MOEC_FRONTEND_SEMA_H
#define MOEC_FRONTEND_SEMA_H

#include "moec/Frontend/ModelSpec.h"
#include "moec/Frontend/SpecTree.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/SourceMgr.h"
#include <optional>

namespace moec::frontend {

/// Checks every section, layer and setting of `file` and returns its typed
/// meaning. Each problem is reported at its source range through
/// `context`'s diagnostic engine; all of them are reported before returning
/// nullopt. Relative data paths resolve against `specDirectory`.
std::optional<Spec> analyzeSpec(const SpecFile &file,
                                llvm::SourceMgr &sourceMgr,
                                mlir::MLIRContext *context,
                                llvm::StringRef specDirectory);

} // namespace moec::frontend

#endif // MOEC_FRONTEND_SEMA_H
