//===- MLIRGen.h - ModelSpec -> moe dialect module --------------*- C++ -*-===//

#ifndef MOEC_FRONTEND_MLIRGEN_H
#define MOEC_FRONTEND_MLIRGEN_H

#include "moec/Frontend/ModelSpec.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/SourceMgr.h"

namespace moec::frontend {

/// Emits the module of a checked spec: `moe.param` declarations, the entry
/// functions `loss` (the training objective and its statistics), `forward`
/// (logits) and `decode` (logits with a KV cache), and the model, training
/// and data settings as module attributes. Results of moe ops are unranked
/// until moe-infer-shapes runs.
mlir::OwningOpRef<mlir::ModuleOp> generateModule(const Spec &spec,
                                                 mlir::MLIRContext *context,
                                                 llvm::SourceMgr &sourceMgr);

} // namespace moec::frontend

#endif // MOEC_FRONTEND_MLIRGEN_H
