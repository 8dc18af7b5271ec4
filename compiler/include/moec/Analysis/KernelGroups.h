//===- KernelGroups.h - fused kernel groups of a function -------*- C++ -*-===//
//
// moe-fuse-kernels outlines every group of ops one kernel computes into a
// `moe.kernel` region (its kind an enum, its tiles a typed attribute; see
// MoeKernels.td); moe-tile-kernels and moe-lower-to-plan annotate it, the
// emitters read it. The helpers here give the passes after fusion one view
// of a fused function: its groups, the order its ops execute in, and who
// reads a value across kernel boundaries.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_ANALYSIS_KERNELGROUPS_H
#define MOEC_ANALYSIS_KERNELGROUPS_H

#include "moe/IR/MoeOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::moe {

struct KernelGroup {
  /// Its position among the kernels of the function.
  int64_t id;
  KernelOp op;
  KernelKind kind;
  /// Its ops in execution order (constants excluded); ops.front() is the
  /// op the kind starts from.
  llvm::SmallVector<Operation *> ops;
  /// The tiles, or null before moe-tile-kernels.
  TilesAttr tiles;
};

/// The kernels of a fused function, in program order.
llvm::SmallVector<KernelGroup> collectGroups(func::FuncOp func);

/// The ops of `func` in execution order, with the members of each kernel in
/// place of the kernel (constants included, terminators excluded).
llvm::SmallVector<Operation *> executionOrder(func::FuncOp func);

/// The value that ops after `v`'s kernel read for it: the kernel result that
/// yields `v`, or `v` itself when no kernel yields it.
Value outerValue(Value v);

/// The ops that read `v`, looking through `moe.yield` to the readers of the
/// kernel result it becomes (a func.return among them).
llvm::SmallVector<Operation *> readersOf(Value v);

} // namespace mlir::moe

#endif // MOEC_ANALYSIS_KERNELGROUPS_H
