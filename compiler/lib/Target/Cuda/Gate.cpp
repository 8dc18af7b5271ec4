//===- Gate.cpp - row scaling and the finite fill of the X-MoE gate -------===//
//
// row_scale: moe.normalize_rows or moe.rescale_rows, rows_per_block rows
// per block on threads / rows_per_block lanes each (gate.cuh's scaleRows);
// row_scale_grad the same layout. finite_or_min and its gradient: a
// fixed grid of blocks finds the finite minimum (and the dy sum over the
// entries it replaces), then a grid-stride launch fills.
//
//===----------------------------------------------------------------------===//

#include "GroupEmitter.h"
#include "moe/IR/MoeOps.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cuda;

namespace {

/// Blocks of the minimum pass: fixed, so that its partials have a static
/// size and are combined in the same order whatever the tensor's size.
constexpr int64_t kMinBlocks = 64;
constexpr int64_t kMinThreads = 256;

/// The row layout of a row_scale group: width, lanes per row, rows per
/// block.
struct RowLayout {
  int64_t width, lanes, rowsPerBlock;
};

FailureOr<RowLayout> rowLayout(GroupEmitter &e, Value x) {
  auto type = cast<RankedTensorType>(x.getType());
  if (type.getRank() == 0 || type.isDynamicDim(type.getRank() - 1))
    return e.error("row scaling needs a static row width");
  int64_t threads = e.tile(e.tiles().getThreads());
  int64_t rows = e.tile(e.tiles().getRowsPerBlock());
  int64_t lanes = threads / rows;
  if (lanes * rows != threads || lanes > 32 || (lanes & (lanes - 1)) != 0)
    return e.error("row scaling needs a power-of-two group of at most 32 "
                   "lanes per row");
  return RowLayout{type.getShape().back(), lanes, rows};
}

/// The scratch of the minimum pass and its final results.
struct MinBuffers {
  int64_t partValue, partIndex, partSum, stats, arg, ticket;
};

/// Emits the minimum pass over `x` (with `dy`, the gradient's dy sum).
MinBuffers emitMinPass(GroupEmitter &e, Value x, Value dy) {
  MLIRContext *ctx = x.getContext();
  Type f32 = Float32Type::get(ctx), i64 = IntegerType::get(ctx, 64),
       i32 = IntegerType::get(ctx, 32);
  MinBuffers m;
  m.partValue = e.scratch(f32, {SymDim(kMinBlocks)});
  m.partIndex = e.scratch(i64, {SymDim(kMinBlocks)});
  m.partSum = e.scratch(f32, {SymDim(kMinBlocks)});
  m.stats = e.scratch(f32, {SymDim(2)});
  m.arg = e.scratch(i64, {SymDim(1)});
  m.ticket = e.scratch(i32, {SymDim(1)}, "ticket");
  e.beginKernel("min");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "n", e.numElements(x));
  std::string xp = e.declared(w, x, false, "x");
  std::string dyp = dy ? e.declared(w, dy, false, "dy")
                       : "moec::gptr<const " + storageTypeOf(x) + ">()";
  w.line(fill("moec::finiteMinPass<${threads}>(n, ${x}, ${dy}, ${value}, "
              "${index}, ${sum}, ${stats}, ${arg}, "
              "moec::bufferArg<unsigned>(p, ${ticket}));",
              {{"threads", kMinThreads},
               {"x", xp},
               {"dy", dyp},
               {"value", e.bufferExpr(e.argument(m.partValue), f32, true)},
               {"index", e.bufferExpr(e.argument(m.partIndex), i64, true)},
               {"sum", e.bufferExpr(e.argument(m.partSum), f32, true)},
               {"stats", e.bufferExpr(e.argument(m.stats), f32, true)},
               {"arg", e.bufferExpr(e.argument(m.arg), i64, true)},
               {"ticket", int64_t(e.argument(m.ticket))}}));
  e.finishKernel(w.str(), GridDim{SymDim(kMinBlocks), 1}, GridDim(), GridDim(),
                 kMinThreads);
  return m;
}

} // namespace

LogicalResult mlir::moe::cuda::emitRowScaleGroup(GroupEmitter &e) {
  Operation *op = e.first();
  Value x = op->getOperand(0), y = op->getResult(0);
  FailureOr<RowLayout> layout = rowLayout(e, x);
  if (failed(layout))
    return failure();
  bool rescale = isa<RescaleRowsOp>(op);
  double param = rescale ? cast<RescaleRowsOp>(op).getNorm().convertToDouble()
                         : cast<NormalizeRowsOp>(op).getEps().convertToDouble();
  SymDim rows = e.rowsOf(x);
  e.beginKernel("");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "rows", rows);
  std::string xp = e.declared(w, x, false, "x");
  std::string yp = e.declared(w, y, true, "y");
  w.line(fill("moec::scaleRows<${d}, ${lanes}, ${rows}, ${rescale}>(rows, "
              "${param}, ${x}, ${y});",
              {{"d", layout->width},
               {"lanes", layout->lanes},
               {"rows", layout->rowsPerBlock},
               {"rescale", rescale},
               {"param", floatLiteral(param)},
               {"x", xp},
               {"y", yp}}));
  e.finishKernel(w.str(), GridDim{rows, layout->rowsPerBlock}, GridDim(),
                 GridDim(), layout->lanes * layout->rowsPerBlock);
  return success();
}

LogicalResult mlir::moe::cuda::emitRowScaleGradGroup(GroupEmitter &e) {
  auto op = cast<NormalizeRowsGradOp>(e.first());
  FailureOr<RowLayout> layout = rowLayout(e, op.getX());
  if (failed(layout))
    return failure();
  SymDim rows = e.rowsOf(op.getX());
  e.beginKernel("");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "rows", rows);
  std::string xp = e.declared(w, op.getX(), false, "x");
  std::string dyp = e.declared(w, op.getDy(), false, "dy");
  std::string dxp = e.declared(w, op.getDx(), true, "dx");
  w.line(fill("moec::normalizeRowsGrad<${d}, ${lanes}, ${rows}>(rows, "
              "${eps}, ${x}, ${dy}, ${dx});",
              {{"d", layout->width},
               {"lanes", layout->lanes},
               {"rows", layout->rowsPerBlock},
               {"eps", floatLiteral(op.getEps().convertToDouble())},
               {"x", xp},
               {"dy", dyp},
               {"dx", dxp}}));
  e.finishKernel(w.str(), GridDim{rows, layout->rowsPerBlock}, GridDim(),
                 GridDim(), layout->lanes * layout->rowsPerBlock);
  return success();
}

LogicalResult mlir::moe::cuda::emitFiniteOrMinGroup(GroupEmitter &e) {
  auto op = cast<FiniteOrMinOp>(e.first());
  MinBuffers m = emitMinPass(e, op.getX(), Value());
  Type f32 = Float32Type::get(op->getContext()),
       i64 = IntegerType::get(op->getContext(), 64);
  int64_t threads = e.tile(e.tiles().getThreads());
  int64_t items = e.tile(e.tiles().getItems());
  SymDim n = e.numElements(op.getX());
  e.beginKernel("fill");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "n", n);
  std::string xp = e.declared(w, op.getX(), false, "x");
  std::string yp = e.declared(w, op.getResult(), true, "y");
  w.line(llvm::formatv("moec::finiteFill(n, {0}, {1}, {2}, {3});", xp,
                       e.bufferExpr(e.argument(m.stats), f32, false),
                       e.bufferExpr(e.argument(m.arg), i64, false), yp));
  e.finishKernel(w.str(), GridDim{n, threads * items}, GridDim(), GridDim(),
                 threads);
  return success();
}

LogicalResult mlir::moe::cuda::emitFiniteOrMinGradGroup(GroupEmitter &e) {
  auto op = cast<FiniteOrMinGradOp>(e.first());
  MinBuffers m = emitMinPass(e, op.getX(), op.getDy());
  Type f32 = Float32Type::get(op->getContext()),
       i64 = IntegerType::get(op->getContext(), 64);
  int64_t threads = e.tile(e.tiles().getThreads());
  int64_t items = e.tile(e.tiles().getItems());
  SymDim n = e.numElements(op.getX());
  e.beginKernel("fill");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "n", n);
  std::string xp = e.declared(w, op.getX(), false, "x");
  std::string dyp = e.declared(w, op.getDy(), false, "dy");
  std::string dxp = e.declared(w, op.getDx(), true, "dx");
  w.line(llvm::formatv("moec::finiteFillGrad(n, {0}, {1}, {2}, {3}, {4});", xp,
                       dyp, e.bufferExpr(e.argument(m.stats), f32, false),
                       e.bufferExpr(e.argument(m.arg), i64, false), dxp));
  e.finishKernel(w.str(), GridDim{n, threads * items}, GridDim(), GridDim(),
                 threads);
  return success();
}
