//===- SymbolicShape.cpp - dimensions over run-time symbols --------------===//

#include "moe/IR/SymbolicShape.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::moe;

SymDim SymDim::unknown() {
  SymDim d(1);
  d.unknownDim = true;
  return d;
}

SymDim SymDim::symbol(llvm::StringRef name) {
  SymDim d(1);
  d.factors[name.str()] = 1;
  return d;
}

std::optional<SymDim> SymDim::parse(llvm::StringRef text) {
  text = text.trim();
  if (text.empty())
    return std::nullopt;
  if (text == "?")
    return unknown();
  SymDim result(1);
  llvm::SmallVector<llvm::StringRef> terms;
  text.split(terms, '*');
  for (llvm::StringRef term : terms) {
    term = term.trim();
    int64_t value;
    if (!term.getAsInteger(10, value)) {
      if (value < 0)
        return std::nullopt;
      result.coef *= value;
      continue;
    }
    auto [name, powText] = term.split('^');
    int pow = 1;
    if (!powText.empty() && (powText.getAsInteger(10, pow) || pow < 1))
      return std::nullopt;
    if (name.empty() || !llvm::isAlpha(name.front()) ||
        !llvm::all_of(name, [](char c) { return llvm::isAlnum(c) || c == '_'; }))
      return std::nullopt;
    result.factors[name.str()] += pow;
  }
  return result;
}

SymDim SymDim::operator*(const SymDim &other) const {
  if (unknownDim || other.unknownDim)
    return unknown();
  SymDim result(coef * other.coef);
  result.factors = factors;
  for (const auto &[name, pow] : other.factors)
    result.factors[name] += pow;
  if (result.coef == 0)
    result.factors.clear();
  return result;
}

bool SymDim::operator==(const SymDim &other) const {
  if (unknownDim || other.unknownDim)
    return false;
  return coef == other.coef && factors == other.factors;
}

std::string SymDim::str() const {
  if (unknownDim)
    return "?";
  if (factors.empty())
    return std::to_string(coef);
  std::string s;
  if (coef != 1)
    s = std::to_string(coef);
  for (const auto &[name, pow] : factors) {
    if (!s.empty())
      s += "*";
    s += name;
    if (pow != 1)
      s += "^" + std::to_string(pow);
  }
  return s;
}

int64_t SymDim::toMlir() const {
  return isStatic() ? coef : ShapedType::kDynamic;
}

Attribute SymDim::toAttr(MLIRContext *ctx) const {
  Builder b(ctx);
  if (isStatic())
    return b.getI64IntegerAttr(coef);
  return b.getStringAttr(str());
}

std::optional<SymDim> SymDim::fromAttr(Attribute attr) {
  if (auto i = llvm::dyn_cast<IntegerAttr>(attr)) {
    if (i.getInt() < 0)
      return std::nullopt;
    return SymDim(i.getInt());
  }
  if (auto s = llvm::dyn_cast<StringAttr>(attr))
    return parse(s.getValue());
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
    dims.push_back(d.toMlir());
  return RankedTensorType::get(dims, elementType);
}

ArrayAttr mlir::moe::toDimsAttr(MLIRContext *ctx,
                                llvm::ArrayRef<SymDim> shape) {
  llvm::SmallVector<Attribute> attrs;
  for (const SymDim &d : shape)
    attrs.push_back(d.toAttr(ctx));
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
