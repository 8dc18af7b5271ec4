//===- MoeInterfaces.td - shape and gradient interfaces ----*- tablegen -*-===//

#ifndef MOE_INTERFACES
#define MOE_INTERFACES

include "mlir/IR/OpBase.td"

def Moe_SymbolicShapeOpInterface : OpInterface<"SymbolicShapeOpInterface"> {
  let description = [{
    Computes result shapes from operand shapes where every dimension is a
    `SymDim`: a static size or a monomial over the run-time symbols (`B`,
    `S`, ...). `moe-infer-shapes` uses it to turn unranked results ranked, and
    `moe-lower-to-plan` to size buffers. Implementations report a shape
    mismatch with `emitOpError` and fail.
  }];
  let cppNamespace = "::mlir::moe";
  let methods = [
    InterfaceMethod<"Computes the shape of every result.",
      "::mlir::LogicalResult", "inferSymbolicShapes",
      (ins "::llvm::ArrayRef<::mlir::moe::SymShape>":$operands,
           "::llvm::SmallVectorImpl<::mlir::moe::SymShape>&":$results)>,
  ];
}

def Moe_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let description = [{
    The vector-Jacobian product of an op: given the gradient of the objective
    with respect to each result (a null value when no gradient reaches that
    result), builds ops that compute the gradient with respect to each
    operand. Operands that are not differentiable (integer indices, step
    counters) get a null gradient. `moe-build-backward` calls it in reverse
    program order.
  }];
  let cppNamespace = "::mlir::moe";
  let methods = [
    InterfaceMethod<"Builds the gradients of the operands.",
      "::mlir::LogicalResult", "buildGradient",
      (ins "::mlir::OpBuilder&":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value>&":$operandGrads)>,
  ];
}

#endif // MOE_INTERFACES
