//===- EntryPoints.h - finding and describing entry functions ---*- C++ -*-===//

#ifndef MOEC_TRANSFORMS_ENTRYPOINTS_H
#define MOEC_TRANSFORMS_ENTRYPOINTS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "moe/IR/MoeOps.h"

namespace mlir::moe {

/// The function whose `moe.entry` is `entry`, or null.
func::FuncOp findEntry(ModuleOp module, StringRef entry);

/// The `moe.param` declaration argument `index` of `func` is bound to, or
/// null when it is not a parameter.
ParamOp boundParam(func::FuncOp func, unsigned index);

/// Whether argument `index` is a parameter that training updates.
bool isTrainableParam(func::FuncOp func, unsigned index);

/// Clones `source` as a new function `name` (placed after it) with entry
/// kind `entry`; the body, argument and result attributes are copied.
func::FuncOp cloneEntry(func::FuncOp source, StringRef name, StringRef entry);

} // namespace mlir::moe

#endif // MOEC_TRANSFORMS_ENTRYPOINTS_H
