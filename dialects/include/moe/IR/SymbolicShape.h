//===- SymbolicShape.h - dimensions over run-time symbols -------*- C++ -*-===//
//
// A tensor dimension in moec is either a static size or a monomial over the
// run-time symbols of a program (`B` batch, `S` sequence length, ...), e.g.
// `2*B*S` for the k = 2 routed copies of B*S tokens. MLIR types keep only
// `?` for the latter; SymDim keeps the formula so that the plan can size
// buffers once the symbols are bound. SymDim is the runtime's own class
// (moec/support/SymbolicDim.h); this header adapts it to MLIR types and
// attributes.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_IR_SYMBOLICSHAPE_H
#define MOE_IR_SYMBOLICSHAPE_H

#include "moec/support/SymbolicDim.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SmallVector.h"
#include <optional>
#include <string>

namespace mlir::moe {

using SymDim = ::moec::support::SymbolicDim;
using SymShape = llvm::SmallVector<SymDim, 3>;

/// The MLIR size of a dimension: the static size, or ShapedType::kDynamic.
int64_t toMlirDim(const SymDim &dim);
/// A `moe.dims` entry: an integer for a static size, else its text.
Attribute toDimAttr(MLIRContext *ctx, const SymDim &dim);
/// The dimension a `moe.dims` entry names; nullopt for anything but a
/// non-negative integer or a dimension's text.
std::optional<SymDim> fromDimAttr(Attribute attr);

/// The shape of a ranked tensor type with every dynamic dimension unknown.
SymShape symShapeOf(RankedTensorType type);
/// Product of the dimensions.
SymDim symProduct(llvm::ArrayRef<SymDim> dims);
/// The ranked type with this shape and element type.
RankedTensorType toTensorType(llvm::ArrayRef<SymDim> shape, Type elementType);
/// `moe.dims` array of a shape.
ArrayAttr toDimsAttr(MLIRContext *ctx, llvm::ArrayRef<SymDim> shape);
std::string shapeStr(llvm::ArrayRef<SymDim> shape);

} // namespace mlir::moe

#endif // MOE_IR_SYMBOLICSHAPE_H
