//===- PlanAttrs.h - attribute names of the execution plan ------*- C++ -*-===//

#ifndef MOEC_TRANSFORMS_PLANATTRS_H
#define MOEC_TRANSFORMS_PLANATTRS_H

#include "moe/IR/MoeOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::moe::plan {

/// Function attribute: the buffer table, an array of dictionaries
/// {id, kind, type, dims, bind?, value?}.
inline constexpr llvm::StringLiteral kBuffers = "moe.buffers";
/// Op attribute: the op's position in the plan.
inline constexpr llvm::StringLiteral kStep = attrs::kStep;
/// Op attributes: buffer ids of the ODS operands / results (-1 for an
/// absent optional one or a result nobody reads). Constants carry kOut only.
inline constexpr llvm::StringLiteral kIn = "moe.in";
inline constexpr llvm::StringLiteral kOut = "moe.out";

/// The results of `op` in ODS order with absent optional results as null,
/// the order of kOut.
llvm::SmallVector<Value> odsResults(Operation *op);

/// The buffer of every value of a planned function that has one.
llvm::DenseMap<Value, int64_t> bufferIds(func::FuncOp func);

} // namespace mlir::moe::plan

#endif // MOEC_TRANSFORMS_PLANATTRS_H
