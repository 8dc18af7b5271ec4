//===- AttentionPath.cpp - which kernel runs an attention -----------------===//

#include "moec/Analysis/AttentionPath.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::moe;

int64_t mlir::moe::attentionHeadDim(AttentionOp op) {
  auto type = cast<RankedTensorType>(op.getQ().getType());
  int64_t heads = static_cast<int64_t>(op.getNumHeads());
  return heads > 0 ? type.getShape().back() / heads : type.getShape().back();
}

bool mlir::moe::attentionOnTensorCores(AttentionOp op) {
  for (Value v : {op.getQ(), op.getK(), op.getV()})
    if (!isa<BFloat16Type>(getElementTypeOrSelf(v.getType())))
      return false;
  // Q, O and S fragments of 16 queries take HD / 4 + OD / 2 + TK / 2
  // registers a lane: 112 at 128 dims with 32-key tiles (TileKernels.cpp),
  // 136 at 256 with 16-key tiles and OD = 128.
  int64_t headDim = attentionHeadDim(op);
  return headDim > 0 && (headDim <= 128 ? headDim % 16 == 0
                                        : headDim <= 256 && headDim % 32 == 0);
}

bool mlir::moe::attentionGradQOnTensorCores(AttentionGradOp op) {
  for (Value v : {op.getQ(), op.getK(), op.getV(), op.getDout()})
    if (!isa<BFloat16Type>(getElementTypeOrSelf(v.getType())))
      return false;
  auto type = cast<RankedTensorType>(op.getQ().getType());
  int64_t heads = static_cast<int64_t>(op.getNumHeads());
  int64_t headDim = heads > 0 ? type.getShape().back() / heads : 0;
  return headDim > 0 && headDim <= 128 && headDim % 16 == 0;
}

int64_t mlir::moe::attentionMmaOutputColumns(AttentionOp op) {
  int64_t headDim = attentionHeadDim(op);
  return headDim > 128 ? headDim / 2 : headDim;
}
