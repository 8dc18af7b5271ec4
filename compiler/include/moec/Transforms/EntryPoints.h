//===- EntryPoints.h - finding and describing entry functions ---*- C++ -*-===//

#ifndef MOEC_TRANSFORMS_ENTRYPOINTS_H
#define MOEC_TRANSFORMS_ENTRYPOINTS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "moe/IR/MoeOps.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::moe {

/// The function whose `moe.entry` is `entry`, or null.
func::FuncOp findEntry(ModuleOp module, StringRef entry);

/// The module's parameter declarations by name, gathered once: looking each
/// argument's symbol up in the module would make a model of N layers cost
/// N^2.
class ParamTable {
public:
  explicit ParamTable(ModuleOp module);

  /// The `moe.param` declaration argument `index` of `func` is bound to, or
  /// null when it is not a parameter.
  ParamOp boundParam(func::FuncOp func, unsigned index) const;

  /// Whether argument `index` is a parameter that training updates.
  bool isTrainableParam(func::FuncOp func, unsigned index) const;

  /// The declaration of parameter `name`, or null.
  ParamOp lookup(StringAttr name) const { return params.lookup(name); }

private:
  llvm::DenseMap<StringAttr, ParamOp> params;
};

/// Clones `source` as a new function `name` (placed after it) with entry
/// kind `entry`; the body, argument and result attributes are copied.
func::FuncOp cloneEntry(func::FuncOp source, StringRef name, StringRef entry);

} // namespace mlir::moe

#endif // MOEC_TRANSFORMS_ENTRYPOINTS_H
