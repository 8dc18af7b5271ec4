//===- KernelGroups.cpp - fused kernel groups in a planned func -----------===//

#include "moec/Transforms/KernelGroups.h"
#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::moe;

llvm::SmallVector<KernelGroup> mlir::moe::collectGroups(func::FuncOp func) {
  llvm::SmallVector<KernelGroup> groups;
  for (Operation &op : func.getBody().front()) {
    auto id = op.getAttrOfType<IntegerAttr>(fusion::kGroup);
    if (!id)
      continue;
    if (groups.empty() || groups.back().id != id.getInt()) {
      KernelGroup group;
      group.id = id.getInt();
      if (auto kind = op.getAttrOfType<StringAttr>(fusion::kKernel))
        group.kind = kind.getValue();
      group.tiles = op.getAttrOfType<DictionaryAttr>(fusion::kTiles);
      groups.push_back(group);
    }
    groups.back().ops.push_back(&op);
  }
  return groups;
}
