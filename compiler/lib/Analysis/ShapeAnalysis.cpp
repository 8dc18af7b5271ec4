//===- ShapeAnalysis.cpp - symbolic shapes of a whole function -----------===//

#include "moec/Analysis/ShapeAnalysis.h"
#include "moe/IR/MoeOps.h"

using namespace mlir;
using namespace mlir::moe;

static FailureOr<SymShape> argumentShape(func::FuncOp func, unsigned i) {
  BlockArgument arg = func.getArgument(i);
  auto type = dyn_cast<RankedTensorType>(arg.getType());
  if (!type)
    return emitError(arg.getLoc())
           << "argument #" << i << " of @" << func.getSymName()
           << " must be a ranked tensor, got " << arg.getType();
  SymShape shape = symShapeOf(type);
  auto dims = func.getArgAttrOfType<ArrayAttr>(i, attrs::kDims);
  if (!dims)
    return shape;
  if (static_cast<int64_t>(dims.size()) != type.getRank())
    return emitError(arg.getLoc())
           << "argument #" << i << " has " << dims.size()
           << " moe.dims entries for a tensor of rank " << type.getRank();
  for (auto [d, attr] : llvm::enumerate(dims)) {
    std::optional<SymDim> dim = fromDimAttr(attr);
    if (!dim || (type.isDynamicDim(d) == dim->isStatic()) ||
        (dim->isStatic() && dim->getStatic() != type.getDimSize(d)))
      return emitError(arg.getLoc())
             << "argument #" << i << ": moe.dims entry " << attr
             << " does not fit dimension " << d << " of " << type;
    shape[d] = *dim;
  }
  return shape;
}

/// Infers the shapes of every op of `block` in order; a kernel's results
/// take the shapes of the values its body yields.
static LogicalResult inferBlock(Block &block,
                                llvm::DenseMap<Value, SymShape> &shapes) {
  for (Operation &op : block) {
    if (auto kernel = dyn_cast<KernelOp>(op)) {
      if (failed(inferBlock(kernel.getBody().front(), shapes)))
        return failure();
      for (auto [result, yielded] :
           llvm::zip(kernel.getResults(),
                     kernel.getBody().front().getTerminator()->getOperands())) {
        SymShape shape = shapes.lookup(yielded); // a copy: [] may rehash
        shapes[result] = std::move(shape);
      }
      continue;
    }
    if (isa<YieldOp>(op))
      continue;
    SmallVector<SymShape> operands;
    for (Value v : op.getOperands()) {
      auto it = shapes.find(v);
      if (it == shapes.end())
        return op.emitOpError("uses a value defined outside the function");
      operands.push_back(it->second);
    }
    SmallVector<SymShape> results;
    LogicalResult ok = failure();
    if (auto shaped = dyn_cast<SymbolicShapeOpInterface>(op))
      ok = shaped.inferSymbolicShapes(operands, results);
    else
      ok = inferUpstreamShapes(&op, operands, results);
    if (failed(ok))
      return failure();
    if (results.size() != op.getNumResults())
      return op.emitOpError("internal error: wrong number of result shapes");
    for (auto [value, shape] : llvm::zip(op.getResults(), results))
      shapes[value] = shape;
  }
  return success();
}

LogicalResult
mlir::moe::computeSymbolicShapes(func::FuncOp func,
                                 llvm::DenseMap<Value, SymShape> &shapes) {
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    FailureOr<SymShape> shape = argumentShape(func, i);
    if (failed(shape))
      return failure();
    shapes[func.getArgument(i)] = *shape;
  }
  if (!func.getBody().hasOneBlock())
    return func.emitOpError("moe programs must have a single block");
  return inferBlock(func.getBody().front(), shapes);
}
