//===- InferShapes.cpp - moe-infer-shapes ---------------------------------===//

#include "moec/Transforms/Passes.h"
#include "moec/Analysis/ShapeAnalysis.h"
#include "moe/IR/MoeOps.h"
#include "mlir/IR/TypeUtilities.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEINFERSHAPES
#include "moec/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

/// The element type of a tensor type, ranked or not.
Type elementTypeOf(Type type) { return cast<TensorType>(type).getElementType(); }

LogicalResult inferFunction(func::FuncOp func) {
  llvm::DenseMap<Value, SymShape> shapes;
  if (failed(computeSymbolicShapes(func, shapes)))
    return failure();
  for (Operation &op : func.getBody().front()) {
    for (Value result : op.getResults()) {
      auto ranked = toTensorType(shapes[result], elementTypeOf(result.getType()));
      if (auto old = dyn_cast<RankedTensorType>(result.getType());
          old && failed(verifyCompatibleShape(old, ranked)))
        return op.emitOpError() << "declares result type " << old
                                << " but its operands imply " << ranked;
      result.setType(ranked);
    }
  }
  Operation *terminator = func.getBody().front().getTerminator();
  func.setFunctionType(FunctionType::get(func.getContext(),
                                         func.getArgumentTypes(),
                                         terminator->getOperandTypes()));
  return success();
}

struct MoeInferShapesPass
    : public mlir::moe::impl::MoeInferShapesBase<MoeInferShapesPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal() && failed(inferFunction(func)))
        return signalPassFailure();
  }
};

} // namespace
