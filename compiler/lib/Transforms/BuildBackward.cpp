//===- BuildBackward.cpp - moe-build-backward -----------------------------===//
//
// Reverse-mode differentiation of the objective function. The new `backward`
// function recomputes the forward program and appends, in reverse program
// order, the gradient ops each differentiable op builds. Only "active"
// values get gradients: those that depend on a parameter the program trains
// and that the objective depends on. Under block coordinate descent there
// are two: `backward` of `loss` over the parameters outside the phases'
// group, `backward_g` of `loss_g` over those in it; a frozen parameter's
// gradient is never used, so the plan computes none (its result has no
// buffer, and the kernels skip results without one).
//
//===----------------------------------------------------------------------===//

#include "moec/Transforms/EntryPoints.h"
#include "moec/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEBUILDBACKWARD
#include "moec/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

bool isFloatTensor(Value v) {
  auto type = dyn_cast<TensorType>(v.getType());
  return type && isa<FloatType>(type.getElementType());
}

/// Results that do not vary with their float operands (counts, sampled
/// one-hot choices), so no gradient flows through them.
bool isPiecewiseConstant(Value v) {
  if (v.getDefiningOp<SampleExpertOp>())
    return true;
  auto ce = v.getDefiningOp<CrossEntropyOp>();
  return ce && v != ce.getLoss();
}

/// Values that depend on a trained parameter and on which `objective`
/// depends.
llvm::DenseSet<Value> activeValues(func::FuncOp func, Value objective,
                                   const ParamTable &params,
                                   const ParamSelection &trains) {
  llvm::DenseSet<Value> varied;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    if (params.isTrainableParam(func, i, trains))
      varied.insert(func.getArgument(i));
  Block &body = func.getBody().front();
  for (Operation &op : body)
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return varied.contains(v); }))
      for (Value r : op.getResults())
        if (isFloatTensor(r) && !isPiecewiseConstant(r))
          varied.insert(r);

  llvm::DenseSet<Value> useful{objective};
  for (Operation &op : llvm::reverse(body))
    if (llvm::any_of(op.getResults(),
                     [&](Value v) { return useful.contains(v); }))
      for (Value v : op.getOperands())
        useful.insert(v);

  llvm::DenseSet<Value> active;
  for (Value v : varied)
    if (useful.contains(v))
      active.insert(v);
  return active;
}

/// Gradients of the elementwise arith ops moe programs use for residuals and
/// loss weighting. Both operands must have the same shape.
LogicalResult arithGradient(OpBuilder &b, Operation *op, Value dy,
                            SmallVectorImpl<Value> &grads) {
  Location loc = op->getLoc();
  grads.assign(op->getNumOperands(), Value());
  if (op->getNumOperands() == 2 &&
      op->getOperand(0).getType() != op->getOperand(1).getType())
    return op->emitOpError("cannot be differentiated with broadcasting "
                           "operands");
  if (isa<arith::AddFOp>(op)) {
    grads[0] = grads[1] = dy;
  } else if (isa<arith::SubFOp>(op)) {
    grads[0] = dy;
    grads[1] = b.create<arith::NegFOp>(loc, dy);
  } else if (isa<arith::NegFOp>(op)) {
    grads[0] = b.create<arith::NegFOp>(loc, dy);
  } else if (isa<arith::MulFOp>(op)) {
    grads[0] = b.create<arith::MulFOp>(loc, dy, op->getOperand(1));
    grads[1] = b.create<arith::MulFOp>(loc, dy, op->getOperand(0));
  } else if (isa<arith::DivFOp>(op)) {
    // d(a / b) = da / b - (a / b) db / b.
    Value divisor = op->getOperand(1);
    grads[0] = b.create<arith::DivFOp>(loc, dy, divisor);
    grads[1] = b.create<arith::NegFOp>(
        loc, b.create<arith::DivFOp>(
                 loc, b.create<arith::MulFOp>(loc, dy, op->getResult(0)),
                 divisor));
  } else {
    return op->emitOpError("has no gradient rule");
  }
  return success();
}

LogicalResult buildBackward(func::FuncOp loss, const TrainingProgram &program,
                            const ParamTable &params) {
  if (loss.getNumResults() == 0)
    return loss.emitOpError("the objective function has no results");
  auto objectiveType = dyn_cast<RankedTensorType>(loss.getResultTypes()[0]);
  if (!objectiveType || objectiveType.getRank() != 0 ||
      !isa<FloatType>(objectiveType.getElementType()))
    return loss.emitOpError("the objective (result #0) must be a 0-d float "
                            "tensor, got ")
           << loss.getResultTypes()[0];

  func::FuncOp backward = cloneEntry(loss, program.backward, program.backward);
  Block &body = backward.getBody().front();
  Operation *terminator = body.getTerminator();
  Value objective = terminator->getOperand(0);
  llvm::DenseSet<Value> active =
      activeValues(backward, objective, params, program.trains);

  OpBuilder b(terminator);
  llvm::DenseMap<Value, Value> grads;
  auto accumulate = [&](Value v, Value g, Location loc) {
    Value &slot = grads[v];
    slot = slot ? b.create<arith::AddFOp>(loc, slot, g).getResult() : g;
  };
  grads[objective] = b.create<arith::ConstantOp>(
      backward.getLoc(),
      DenseElementsAttr::get(objectiveType,
                             FloatAttr::get(objectiveType.getElementType(), 1.0)));

  SmallVector<Operation *> forwardOps;
  for (Operation &op : body.without_terminator())
    forwardOps.push_back(&op);
  for (Operation *op : llvm::reverse(forwardOps)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value r : op->getResults()) {
      Value g = active.contains(r) ? grads.lookup(r) : Value();
      resultGrads.push_back(g);
      any |= static_cast<bool>(g);
    }
    if (!any)
      continue;
    SmallVector<Value> operandGrads;
    if (auto diff = dyn_cast<DifferentiableOpInterface>(op)) {
      if (failed(diff.buildGradient(b, resultGrads, operandGrads)))
        return failure();
    } else if (op->getDialect() &&
               op->getDialect()->getNamespace() == "arith" &&
               op->getNumResults() == 1) {
      if (failed(arithGradient(b, op, resultGrads[0], operandGrads)))
        return failure();
    } else {
      return op->emitOpError("is on the path from a trainable parameter to "
                             "the objective but has no gradient rule");
    }
    for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads))
      if (g && active.contains(operand))
        accumulate(operand, g, op->getLoc());
  }

  // Results: the objective function's, then one gradient per trainable
  // parameter in argument order.
  SmallVector<Value> results(terminator->getOperands());
  SmallVector<Attribute> resultAttrs;
  for (unsigned i = 0, e = backward.getNumResults(); i < e; ++i)
    resultAttrs.push_back(backward.getResultAttrDict(i));
  MLIRContext *ctx = backward.getContext();
  for (unsigned i = 0, e = backward.getNumArguments(); i < e; ++i) {
    if (!params.isTrainableParam(backward, i, program.trains))
      continue;
    BlockArgument arg = backward.getArgument(i);
    Value g = grads.lookup(arg);
    ParamOp param = params.boundParam(backward, i);
    if (!g) {
      param.emitWarning("parameter does not influence the objective; its "
                        "gradient is zero");
      auto type = cast<RankedTensorType>(arg.getType());
      g = b.create<arith::ConstantOp>(
          backward.getLoc(),
          DenseElementsAttr::get(type, FloatAttr::get(type.getElementType(),
                                                      0.0)));
    }
    results.push_back(g);
    resultAttrs.push_back(DictionaryAttr::get(
        ctx, {NamedAttribute(
                 StringAttr::get(ctx, attrs::kOutput),
                 StringAttr::get(ctx, "grad:" + param.getSymName()))}));
  }
  b.create<func::ReturnOp>(terminator->getLoc(), results);
  terminator->erase();
  backward.setFunctionType(FunctionType::get(
      ctx, backward.getArgumentTypes(), ValueRange(results).getTypes()));
  backward.setAllResultAttrs(resultAttrs);
  return success();
}

struct MoeBuildBackwardPass
    : public mlir::moe::impl::MoeBuildBackwardBase<MoeBuildBackwardPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    ParamTable params(module);
    for (const TrainingProgram &program : trainingPrograms(module)) {
      if (findEntry(module, program.backward))
        continue; // Already built.
      func::FuncOp loss = findEntry(module, program.objective);
      if (!loss) {
        module.emitError("no objective function: expected a function with "
                         "moe.entry = \"")
            << program.objective << "\"";
        return signalPassFailure();
      }
      if (failed(buildBackward(loss, program, params)))
        return signalPassFailure();
    }
  }
};

} // namespace
