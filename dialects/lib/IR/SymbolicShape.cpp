//===- SymbolicShape.cpp - dimensions over run-time symbols --------------===//

#include "moe/IR/SymbolicShape.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::moe;

int64_t mlir::moe::toMlirDim(const SymDim &dim) {
  return dim.isStatic() ? dim.getStatic() : ShapedType::kDynamic;
}

Attribute mlir::moe::toDimAttr(MLIRContext *ctx, const SymDim &dim) {
  Builder b(ctx);
  if (dim.isStatic())
    return b.getI64IntegerAttr(dim.getStatic());
  return b.getStringAttr(dim.str());
}

std::optional<SymDim> mlir::moe::fromDimAttr(Attribute attr) {
  if (auto i = llvm::dyn_cast<IntegerAttr>(attr)) {
    if (i.getInt() < 0)
      return std::nullopt;
    return SymDim(i.getInt());
  }
  if (auto s = llvm::dyn_cast<StringAttr>(attr))
    return SymDim::parse(s.getValue());
  return std::nullopt;
}

SymShape mlir::moe::symShapeOf(RankedTensorType type) {
  SymShape shape;
  for (int64_t d : type.getShape())
    shape.push_back(ShapedType::isDynamic(d) ? SymDim::unknown() : SymDim(d));
  return shape;
}

SymDim mlir::moe::symProduct(llvm::ArrayRef<SymDim> dims) {
  SymDim p(1);
  for (const SymDim &d : dims)
    p = p * d;
  return p;
}

RankedTensorType mlir::moe::toTensorType(llvm::ArrayRef<SymDim> shape,
                                         Type elementType) {
  llvm::SmallVector<int64_t> dims;
  for (const SymDim &d : shape)
    dims.push_back(toMlirDim(d));
  return RankedTensorType::get(dims, elementType);
}

ArrayAttr mlir::moe::toDimsAttr(MLIRContext *ctx,
                                llvm::ArrayRef<SymDim> shape) {
  llvm::SmallVector<Attribute> attrs;
  for (const SymDim &d : shape)
    attrs.push_back(toDimAttr(ctx, d));
  return ArrayAttr::get(ctx, attrs);
}

std::string mlir::moe::shapeStr(llvm::ArrayRef<SymDim> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (i)
      s += ", ";
    s += d.str();
  }
  return s + "]";
}
