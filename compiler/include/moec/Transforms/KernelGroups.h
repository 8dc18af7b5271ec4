//===- KernelGroups.h - fused kernel groups in a planned func ---*- C++ -*-===//
//
// moe-fuse-kernels marks every op of an entry function with the group it
// belongs to (`moe.group`, an index in program order) and the first op of
// each group with the group's kernel kind (`moe.kernel`); moe-tile-kernels
// adds the tile and launch choices (`moe.tiles`) to that first op. A group is
// a contiguous run of ops, so groups execute in order with no cycles.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TRANSFORMS_KERNELGROUPS_H
#define MOEC_TRANSFORMS_KERNELGROUPS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::moe {

namespace fusion {
inline constexpr llvm::StringLiteral kGroup = "moe.group";
inline constexpr llvm::StringLiteral kKernel = "moe.kernel";
inline constexpr llvm::StringLiteral kTiles = "moe.tiles";
} // namespace fusion

struct KernelGroup {
  int64_t id;
  /// The group's kind ("gemm", "router", "elementwise", ...).
  llvm::StringRef kind;
  /// Its ops in program order; ops.front() carries kind and tiles.
  llvm::SmallVector<Operation *> ops;
  /// moe.tiles of the group, if tiled.
  DictionaryAttr tiles;
};

/// The groups of a fused function, in program order (constants excluded).
llvm::SmallVector<KernelGroup> collectGroups(func::FuncOp func);

} // namespace mlir::moe

#endif // MOEC_TRANSFORMS_KERNELGROUPS_H
