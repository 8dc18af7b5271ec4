//===- ShapeAnalysis.h - symbolic shapes of a whole function ----*- C++ -*-===//

#ifndef MOEC_ANALYSIS_SHAPEANALYSIS_H
#define MOEC_ANALYSIS_SHAPEANALYSIS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "moe/IR/SymbolicShape.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::moe {

/// Computes the symbolic shape of every value in `func`: arguments from
/// their types refined by `moe.dims`, op results from each op's shape
/// function. Reports the first inconsistency at its op and fails.
LogicalResult computeSymbolicShapes(func::FuncOp func,
                                    llvm::DenseMap<Value, SymShape> &shapes);

} // namespace mlir::moe

#endif // MOEC_ANALYSIS_SHAPEANALYSIS_H
