//===- KernelGroups.cpp - fused kernel groups of a function ---------------===//

#include "moec/Analysis/KernelGroups.h"
#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::moe;

llvm::SmallVector<KernelGroup> mlir::moe::collectGroups(func::FuncOp func) {
  llvm::SmallVector<KernelGroup> groups;
  for (auto kernel : func.getBody().front().getOps<KernelOp>()) {
    KernelGroup group;
    group.id = static_cast<int64_t>(groups.size());
    group.op = kernel;
    group.kind = kernel.getKind();
    group.tiles = kernel.getTilesAttr();
    for (Operation &op : kernel.getMembers())
      if (!isa<arith::ConstantOp>(op))
        group.ops.push_back(&op);
    groups.push_back(std::move(group));
  }
  return groups;
}

llvm::SmallVector<Operation *> mlir::moe::executionOrder(func::FuncOp func) {
  llvm::SmallVector<Operation *> order;
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (auto kernel = dyn_cast<KernelOp>(op))
      for (Operation &member : kernel.getMembers())
        order.push_back(&member);
    else
      order.push_back(&op);
  }
  return order;
}

Value mlir::moe::outerValue(Value v) {
  for (OpOperand &use : v.getUses())
    if (auto yield = dyn_cast<YieldOp>(use.getOwner()))
      return yield->getParentOp()->getResult(use.getOperandNumber());
  return v;
}

llvm::SmallVector<Operation *> mlir::moe::readersOf(Value v) {
  llvm::SmallVector<Operation *> readers;
  for (OpOperand &use : v.getUses()) {
    if (auto yield = dyn_cast<YieldOp>(use.getOwner())) {
      Value result = yield->getParentOp()->getResult(use.getOperandNumber());
      llvm::append_range(readers, readersOf(result));
      continue;
    }
    readers.push_back(use.getOwner());
  }
  return readers;
}
