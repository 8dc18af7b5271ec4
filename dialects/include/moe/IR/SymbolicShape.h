//===- SymbolicShape.h - dimensions over run-time symbols -------*- C++ -*-===//
//
// A tensor dimension in moec is either a static size or a monomial over the
// run-time symbols of a program (`B` batch, `S` sequence length, ...), e.g.
// `2*B*S` for the k = 2 routed copies of B*S tokens. MLIR types keep only
// `?` for the latter; SymDim keeps the formula so that the plan can size
// buffers once the symbols are bound.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_IR_SYMBOLICSHAPE_H
#define MOE_IR_SYMBOLICSHAPE_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include <map>
#include <optional>
#include <string>

namespace mlir::moe {

class SymDim {
public:
  /// A static size.
  SymDim(int64_t size = 0) : coef(size) {}
  /// A size nothing is known about (a `?` without a symbol).
  static SymDim unknown();
  /// A single symbol, e.g. `B`.
  static SymDim symbol(llvm::StringRef name);
  /// Parses `128`, `B`, `2*B*S`, `B^2`; fails on anything else.
  static std::optional<SymDim> parse(llvm::StringRef text);

  bool isUnknown() const { return unknownDim; }
  bool isStatic() const { return !unknownDim && factors.empty(); }
  int64_t getStatic() const { return coef; }

  SymDim operator*(const SymDim &other) const;
  bool operator==(const SymDim &other) const;
  bool operator!=(const SymDim &other) const { return !(*this == other); }

  /// The canonical text: `128`, `B`, `2*B*S`, `?` when unknown.
  std::string str() const;
  /// Its MLIR dimension: the size, or ShapedType::kDynamic.
  int64_t toMlir() const;
  /// An attribute for `moe.dims`: an integer or a string.
  Attribute toAttr(MLIRContext *ctx) const;
  static std::optional<SymDim> fromAttr(Attribute attr);

private:
  int64_t coef = 0;
  bool unknownDim = false;
  /// symbol -> exponent, ordered so that str() is canonical.
  std::map<std::string, int> factors;
};

using SymShape = llvm::SmallVector<SymDim, 3>;

/// The shape of a ranked tensor type with every dynamic dimension unknown.
SymShape symShapeOf(RankedTensorType type);
/// Product of the dimensions in [begin, end).
SymDim symProduct(llvm::ArrayRef<SymDim> dims);
/// The ranked type with this shape and element type.
RankedTensorType toTensorType(llvm::ArrayRef<SymDim> shape, Type elementType);
/// `moe.dims` array of a shape.
ArrayAttr toDimsAttr(MLIRContext *ctx, llvm::ArrayRef<SymDim> shape);
std::string shapeStr(llvm::ArrayRef<SymDim> shape);

} // namespace mlir::moe

#endif // MOE_IR_SYMBOLICSHAPE_H
