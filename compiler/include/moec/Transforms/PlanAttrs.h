//===- PlanAttrs.h - attribute names of the execution plan ------*- C++ -*-===//

#ifndef MOEC_TRANSFORMS_PLANATTRS_H
#define MOEC_TRANSFORMS_PLANATTRS_H

#include "llvm/ADT/StringRef.h"

namespace mlir::moe::plan {

/// Function attribute: the buffer table, an array of dictionaries
/// {id, kind, type, dims, bind?, value?}.
inline constexpr llvm::StringLiteral kBuffers = "moe.buffers";
/// Op attribute: the op's position in the plan.
inline constexpr llvm::StringLiteral kStep = "moe.step";
/// Op attributes: buffer ids of the ODS operands / results (-1 for an
/// absent optional one or a result nobody reads).
inline constexpr llvm::StringLiteral kIn = "moe.in";
inline constexpr llvm::StringLiteral kOut = "moe.out";

} // namespace mlir::moe::plan

#endif // MOEC_TRANSFORMS_PLANATTRS_H
