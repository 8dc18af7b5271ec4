//===- ModuleEmitter.cpp - ModelSpec -> moe dialect module ----------------===//

#include "ModuleEmitter.h"
#include "moec/Frontend/MLIRGen.h"
#include "moec/Frontend/ReadSpec.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace moec::frontend;
using namespace mlir;
using namespace mlir::moe;

ModuleEmitter::ModuleEmitter(const Spec &spec, MLIRContext *ctx,
                             llvm::SourceMgr &sm)
    : spec(spec), model(spec.model), ctx(ctx), sourceMgr(sm), b(ctx) {
  // bf16 is mixed precision: activations, caches and the weights as they
  // are used are bf16; the parameters (master weights), the optimizer, the
  // router and the losses stay f32.
  floatType = model.dtype == "f64"    ? Type(b.getF64Type())
              : model.dtype == "bf16" ? Type(b.getBF16Type())
                                      : Type(b.getF32Type());
  masterType = model.dtype == "f64" ? Type(b.getF64Type()) : b.getF32Type();
}

Location ModuleEmitter::locationOf(llvm::SMRange range) {
  if (!range.Start.isValid())
    return UnknownLoc::get(ctx);
  return toLocation(sourceMgr, range.Start, ctx);
}

RankedTensorType ModuleEmitter::tensor(ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, masterType);
}

void ModuleEmitter::addParam(std::string name, ArrayRef<int64_t> shape,
                             Init init, double scale, bool frozen,
                             double rowNorm) {
  // The runtime's limit on the elements of one tensor.
  constexpr int64_t kMaxElements = int64_t(1) << 40;
  int64_t elements = 1;
  bool tooLarge = false;
  for (int64_t extent : shape)
    tooLarge |= __builtin_mul_overflow(elements, extent, &elements) ||
                elements > kMaxElements;
  if (tooLarge && !oversizedParam)
    oversizedParam.emplace(name, paramSource);
  params.push_back(
      {std::move(name), tensor(shape), init, scale, frozen, rowNorm, ""});
}

void ModuleEmitter::addNorm(const std::string &name) {
  addParam(name + ".g", {model.dModel}, Init::Ones);
  if (model.norm.kind == NormSpec::Kind::LayerNorm)
    addParam(name + ".b", {model.dModel}, Init::Zeros);
}

Type ModuleEmitter::unranked() { return UnrankedTensorType::get(floatType); }
Type ModuleEmitter::unrankedMaster() {
  return UnrankedTensorType::get(masterType);
}
Type ModuleEmitter::unrankedIndex() {
  return UnrankedTensorType::get(b.getI32Type());
}
Type ModuleEmitter::scalar() { return RankedTensorType::get({}, masterType); }

Value ModuleEmitter::scalarConstant(Location loc, double v) {
  auto type = RankedTensorType::get({}, masterType);
  return b.create<arith::ConstantOp>(
      loc, DenseElementsAttr::get(type, FloatAttr::get(masterType, v)));
}

Value ModuleEmitter::convert(Value v, Type element, Location loc) {
  if (cast<TensorType>(v.getType()).getElementType() == element)
    return v;
  return b.create<CastOp>(loc, UnrankedTensorType::get(element), v);
}

Value ModuleEmitter::masterParam(Function &fn, const std::string &name) {
  auto it = fn.paramArgs.find(name);
  assert(it != fn.paramArgs.end() && "undeclared parameter");
  return it->second;
}

Value ModuleEmitter::param(Function &fn, const std::string &name) {
  Value master = masterParam(fn, name);
  if (floatType == masterType)
    return master;
  Value &cached = fn.storageParams[name];
  if (!cached) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfterValue(master);
    cached = convert(master, floatType, master.getLoc());
  }
  return cached;
}

Value ModuleEmitter::optionalParam(Function &fn, const std::string &name) {
  return fn.paramArgs.count(name) ? param(fn, name) : Value();
}

Value ModuleEmitter::optionalMasterParam(Function &fn,
                                         const std::string &name) {
  return fn.paramArgs.count(name) ? masterParam(fn, name) : Value();
}

Value ModuleEmitter::sum(ArrayRef<Value> values, Location loc) {
  Value total = values.front();
  for (Value v : values.drop_front())
    total = b.create<arith::AddFOp>(loc, total, v);
  return total;
}

OwningOpRef<ModuleOp> moec::frontend::generateModule(const Spec &spec,
                                                     MLIRContext *context,
                                                     llvm::SourceMgr &sourceMgr) {
  context->loadDialect<MoeDialect, func::FuncDialect, arith::ArithDialect>();
  return ModuleEmitter(spec, context, sourceMgr).run();
}
