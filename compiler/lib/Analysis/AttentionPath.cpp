//===- AttentionPath.cpp - which kernel runs an attention -----------------===//

#include "moec/Analysis/AttentionPath.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::moe;

namespace {

bool allBf16(std::initializer_list<Value> values) {
  return llvm::all_of(values, [](Value v) {
    return isa<BFloat16Type>(getElementTypeOrSelf(v.getType()));
  });
}

/// A head dim the tensor-core kernels take: a multiple of 16 up to
/// `whole`, of 32 up to `split` (each block then computing half the
/// columns, in whole 16-column blocks).
bool mmaHeadDim(int64_t headDim, int64_t whole, int64_t split) {
  return headDim > 0 &&
         (headDim <= whole ? headDim % 16 == 0
                           : headDim <= split && headDim % 32 == 0);
}

} // namespace

int64_t mlir::moe::attentionHeadDim(Value q, uint32_t heads) {
  int64_t width = cast<RankedTensorType>(q.getType()).getShape().back();
  return heads > 0 ? width / static_cast<int64_t>(heads) : width;
}

int64_t mlir::moe::attentionHeadDim(AttentionOp op) {
  return attentionHeadDim(op.getQ(), op.getNumHeads());
}

int64_t mlir::moe::attentionHeadDim(AttentionGradOp op) {
  return attentionHeadDim(op.getQ(), op.getNumHeads());
}

bool mlir::moe::attentionOnTensorCores(AttentionOp op) {
  // Q, O and S fragments of 16 queries take HD / 4 + OD / 2 + TK / 2
  // registers a lane: 112 at 128 dims with 32-key tiles (TileKernels.cpp),
  // 136 at 256 with 16-key tiles and OD = 128.
  return allBf16({op.getQ(), op.getK(), op.getV()}) &&
         mmaHeadDim(attentionHeadDim(op), 128, 256);
}

int64_t mlir::moe::attentionMmaOutputColumns(AttentionOp op) {
  int64_t headDim = attentionHeadDim(op);
  return headDim > 128 ? headDim / 2 : headDim;
}

bool mlir::moe::attentionGradQOnTensorCores(AttentionGradOp op) {
  // Q and dO fragments, dq accumulators and the S and dP of a key tile
  // take HD / 2 + OD / 2 + TK registers a lane: 128 at 128 dims with
  // 32-key tiles, 184 at 224 with 16-key tiles and OD = 112; at 256, OD =
  // 128 spilled (208), OD = 64 does not.
  return allBf16({op.getQ(), op.getK(), op.getV(), op.getDout()}) &&
         mmaHeadDim(attentionHeadDim(op), 128, 256);
}

int64_t mlir::moe::attentionGradQMmaOutputColumns(AttentionGradOp op) {
  int64_t headDim = attentionHeadDim(op);
  if (headDim > 224)
    return headDim / 4;
  return headDim > 128 ? headDim / 2 : headDim;
}

int64_t mlir::moe::attentionGradQMmaKeys(AttentionGradOp op) {
  return attentionHeadDim(op) > 128 ? 16 : 32;
}

bool mlir::moe::attentionGradKVOnTensorCores(AttentionGradOp op) {
  // K and V fragments, dk and dv accumulators and the S^T and dP^T of a
  // query tile take HD / 2 + OD + TQ registers a lane: 200 at 112 dims
  // whole with 32-query tiles (ptxas: 242-254, no spills), 224 at 128
  // whole, which spills, so 160 there with OD = 64; with 16-query tiles
  // 176 at 160 with OD = 80 and at 192 with OD = 64, 208 at 256 with OD =
  // 64; at 224, OD = 112 spilled (240), OD = 32 does not (160).
  return allBf16({op.getQ(), op.getK(), op.getV(), op.getDout()}) &&
         mmaHeadDim(attentionHeadDim(op), 128, 256);
}

int64_t mlir::moe::attentionGradKVMmaOutputColumns(AttentionGradOp op) {
  int64_t headDim = attentionHeadDim(op);
  if (headDim <= 112)
    return headDim;
  // The widest whole 16-column block of at most 80 columns that divides
  // the head: 64 at 128, 192 and 256, 80 at 160, 32 at 224.
  int64_t columns = 80;
  while (headDim % columns)
    columns -= 16;
  return columns;
}

int64_t mlir::moe::attentionGradKVMmaQueries(AttentionGradOp op) {
  return attentionHeadDim(op) > 128 ? 16 : 32;
}
