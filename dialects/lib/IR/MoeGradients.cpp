//===- MoeGradients.cpp - vector-Jacobian products of moe ops ------------===//
//
// Each forward op builds its grad op; the math lives in the grad op's
// description and in the runtime kernels. Operands without a gradient
// (indices, seeds, step counters) stay null.
//
//===----------------------------------------------------------------------===//

#include "moe/IR/MoeOps.h"

using namespace mlir;
using namespace mlir::moe;

namespace {
/// Sizes `grads` to the op's operands, all null.
void resetGrads(Operation *op, SmallVectorImpl<Value> &grads) {
  grads.assign(op->getNumOperands(), Value());
}
} // namespace

LogicalResult EmbeddingOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                         SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success();
  int64_t vocab = cast<RankedTensorType>(getTable().getType()).getDimSize(0);
  grads[1] = b.create<EmbeddingGradOp>(getLoc(), getTable().getType(),
                                       getIds(), dys[0],
                                       b.getI64IntegerAttr(vocab),
                                       getScaleAttr());
  return success();
}

LogicalResult AddPositionsOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                            SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success();
  int64_t maxLen = cast<RankedTensorType>(getTable().getType()).getDimSize(0);
  grads[0] = dys[0];
  grads[1] = b.create<AddPositionsGradOp>(getLoc(), getTable().getType(),
                                          dys[0], getStart(),
                                          b.getI64IntegerAttr(maxLen));
  return success();
}

/// A rotation's transpose is the rotation back: the same op with
/// `inverse` flipped.
LogicalResult RopeOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                    SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success();
  grads[0] = b.create<RopeOp>(getLoc(), getX().getType(), dys[0], getStart(),
                              getNumHeadsAttr(), getHeadDimAttr(),
                              getRotaryDimAttr(), getBaseAttr(),
                              getInverse() ? UnitAttr() : b.getUnitAttr());
  return success();
}

LogicalResult LinearOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                      SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success();
  Type dbType = getBias() ? getBias().getType() : Type();
  auto grad = b.create<LinearGradOp>(
      getLoc(), getX().getType(), getWeight().getType(), dbType, getX(),
      getWeight(), dys[0], getTransposeWeightAttr(),
      getBias() ? b.getUnitAttr() : UnitAttr());
  grads[0] = grad.getDx();
  grads[1] = grad.getDweight();
  if (getBias())
    grads[2] = grad.getDbias();
  return success();
}

LogicalResult LayerNormOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                         SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success();
  auto grad = b.create<LayerNormGradOp>(
      getLoc(), getX().getType(), getGamma().getType(), getBeta().getType(),
      getX(), getGamma(), dys[0], getEpsAttr());
  grads[0] = grad.getDx();
  grads[1] = grad.getDgamma();
  grads[2] = grad.getDbeta();
  return success();
}

LogicalResult RmsNormOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                       SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success();
  auto grad = b.create<RmsNormGradOp>(getLoc(), getX().getType(),
                                      getGamma().getType(), getX(), getGamma(),
                                      dys[0], getEpsAttr());
  grads[0] = grad.getDx();
  grads[1] = grad.getDgamma();
  return success();
}

LogicalResult ActivationOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                          SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success();
  grads[0] = b.create<ActivationGradOp>(getLoc(), getX().getType(), getX(),
                                        dys[0], getKindAttr());
  return success();
}

LogicalResult CastOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                    SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success();
  grads[0] = b.create<CastOp>(getLoc(), getX().getType(), dys[0]);
  return success();
}

LogicalResult SplitTokensOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                           SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (dys[0])
    grads[0] = b.create<MergeTokensOp>(getLoc(), getX().getType(), dys[0],
                                       getPartsAttr());
  return success();
}

LogicalResult MergeTokensOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                           SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (dys[0])
    grads[0] = b.create<SplitTokensOp>(getLoc(), getX().getType(), dys[0],
                                       getPartsAttr());
  return success();
}

LogicalResult DropoutOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                       SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success();
  grads[0] = b.create<DropoutGradOp>(getLoc(), getX().getType(), dys[0],
                                     getSeed(), getRateAttr(), getStreamAttr());
  return success();
}

LogicalResult AttentionOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                         SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success(); // lse is an auxiliary result with no gradient.
  if (getPast())
    return emitOpError("cannot be differentiated when it reads a KV cache");
  auto grad = b.create<AttentionGradOp>(
      getLoc(), getQ().getType(), getK().getType(), getV().getType(), getQ(),
      getK(), getV(), getResult(), getLse(), dys[0], getKeyMask(),
      getNumHeadsAttr(),
      getNumKvHeadsAttr(), getScaleAttr(), getCausalAttr());
  grads[0] = grad.getDq();
  grads[1] = grad.getDk();
  grads[2] = grad.getDv();
  return success();
}

LogicalResult TopKRouterOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                          SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  Value dprobs = dys[0], dgates = dys[2];
  if (getGate() == GateWeighting::Unit)
    dgates = Value(); // Unit gates are constants.
  if (!dprobs && !dgates)
    return success();
  grads[0] = b.create<TopKRouterGradOp>(
      getLoc(), getLogits().getType(), getProbs(), getExpert(), getGates(),
      getSlot(), dgates, dprobs, getGateAttr());
  return success();
}

LogicalResult ExpertFfnOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                         SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success();
  // Forward operands: x, expert, gates, slot, w1, b1?, w2, b2?, w3?; each
  // weight present gets a gradient of its own type, in that order.
  SmallVector<Type> weightTypes;
  for (Value w : {getW1(), getB1(), getW2(), getB2(), getW3()})
    if (w)
      weightTypes.push_back(w.getType());
  auto grad = b.create<ExpertFfnGradOp>(
      getLoc(), getX().getType(), getGates().getType(), weightTypes, getX(),
      getExpert(), getGates(), getSlot(), getW1(), getB1(), getW2(), getB2(),
      getW3(), dys[0], getActivationAttr());
  grads[0] = grad.getDx();
  grads[2] = grad.getDgates();
  for (auto [i, g] : llvm::enumerate(grad.getDweights()))
    grads[4 + i] = g;
  return success();
}

LogicalResult ExpertMapOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                         SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success();
  auto grad = b.create<ExpertMapGradOp>(
      getLoc(), getX().getType(), getWeight().getType(), getX(), getExpert(),
      getSlot(), getWeight(), dys[0]);
  grads[0] = grad.getDx();
  grads[3] = grad.getDweight();
  return success();
}

LogicalResult ExpertReduceOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                            SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success();
  auto grad = b.create<ExpertReduceGradOp>(
      getLoc(), getC().getType(), getGates().getType(), getWeight().getType(),
      getC(), getExpert(), getGates(), getSlot(), getWeight(), dys[0]);
  grads[0] = grad.getDc();
  grads[2] = grad.getDgates();
  grads[4] = grad.getDweight();
  return success();
}

LogicalResult CvLossOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                      SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success();
  grads[0] = b.create<CvLossGradOp>(getLoc(), getGates().getType(), getGates(),
                                    getExpert(), dys[0], getNumExpertsAttr());
  return success();
}

LogicalResult SwitchLossOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                          SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success();
  grads[0] = b.create<SwitchLossGradOp>(getLoc(), getProbs().getType(),
                                        getProbs(), getExpert(), dys[0],
                                        getVariantAttr());
  return success();
}

LogicalResult ZLossOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                     SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success();
  grads[0] = b.create<ZLossGradOp>(getLoc(), getLogits().getType(),
                                   getLogits(), dys[0]);
  return success();
}

LogicalResult CrossEntropyOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                            SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success(); // count and correct are piecewise constant.
  grads[0] = b.create<CrossEntropyGradOp>(getLoc(), getLogits().getType(),
                                          getLogits(), getTargets(), dys[0],
                                          getLabelSmoothingAttr());
  return success();
}

LogicalResult NormalizeRowsOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                             SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success();
  grads[0] = b.create<NormalizeRowsGradOp>(getLoc(), getX().getType(), getX(),
                                           dys[0], getEpsAttr());
  return success();
}

LogicalResult FiniteOrMinOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                           SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success();
  grads[0] =
      b.create<FiniteOrMinGradOp>(getLoc(), getX().getType(), getX(), dys[0]);
  return success();
}

/// Only x, gamma and beta get gradients: the running statistics are frozen
/// state, and new_mean / new_var pass none.
LogicalResult BatchNormOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                         SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success();
  auto grad = b.create<BatchNormGradOp>(
      getLoc(), getX().getType(), getGamma().getType(), getBeta().getType(),
      getX(), getGamma(), getRunningMean(), getRunningVar(), dys[0], getMask(),
      getEpsAttr(), getTrainingAttr());
  grads[0] = grad.getDx();
  grads[1] = grad.getDgamma();
  grads[2] = grad.getDbeta();
  return success();
}

/// Only the training form is differentiable: with history the mean reads a
/// cache that no gradient reaches.
LogicalResult WindowMeanOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                          SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success();
  if (getHistory())
    return emitOpError("has no gradient with history (a decoding form)");
  grads[0] = b.create<WindowMeanGradOp>(getLoc(), getX().getType(), getX(),
                                        dys[0], getMask(), getWindowAttr(),
                                        getSizeAttr());
  return success();
}

LogicalResult HeadMixtureOp::buildGradient(OpBuilder &b, ArrayRef<Value> dys,
                                           SmallVectorImpl<Value> &grads) {
  resetGrads(*this, grads);
  if (!dys[0])
    return success();
  auto grad = b.create<HeadMixtureGradOp>(
      getLoc(), getContext().getType(), getG().getType(), dys[0], getContext(),
      getG(), getNumHeadsAttr());
  grads[0] = grad.getDcontext();
  grads[1] = grad.getDg();
  return success();
}
