//===- Losses.cpp - cross-entropy and its gradient ------------------------===//

#include "GroupEmitter.h"
#include "moe/IR/MoeOps.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cuda;

namespace {
std::string smoothingLiteral(const APFloat &smoothing) {
  return floatLiteral(smoothing.convertToDouble());
}
} // namespace

LogicalResult mlir::moe::cuda::emitCrossEntropyGroup(GroupEmitter &e) {
  auto op = cast<CrossEntropyOp>(e.first());
  int64_t vocab = cast<RankedTensorType>(op.getLogits().getType()).getShape().back();
  int64_t threads = e.tile(e.tiles().getThreads());
  SymDim rows = e.rowsOf(op.getLogits());
  Type f32 = Float32Type::get(op->getContext());
  Type i32 = IntegerType::get(op->getContext(), 32);
  int64_t rowLoss = e.scratch(f32, {rows});
  int64_t ticket = e.scratch(i32, {SymDim(1)}, "ticket");
  e.beginKernel("");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "rows", rows);
  std::string logits = e.declared(w, op.getLogits(), false, "logits");
  std::string targets = e.declared(w, op.getTargets(), false, "targets");
  auto optionalOut = [&](Value v, StringRef name) {
    return e.escapes(v) ? e.declared(w, v, true, name)
                        : std::string("moec::gptr<float>()");
  };
  std::string loss = optionalOut(op.getLoss(), "loss");
  std::string count = optionalOut(op.getCount(), "count");
  // A program that leaves `correct` out or unread skips the argmax.
  std::string correct = "moec::gptr<float>()", rowHit = correct;
  if (Value c = op.getCorrect(); c && e.escapes(c)) {
    correct = e.declared(w, c, true, "correct");
    rowHit = e.bufferExpr(e.argument(e.scratch(f32, {rows})), f32, true);
  }
  w.line(fill("moec::crossEntropyForward<${V}, ${threads}>(rows, "
              "${smoothing}, ${logits}, ${targets}, ${rowLoss}, ${rowHit}, "
              "${loss}, ${count}, ${correct}, "
              "moec::bufferArg<unsigned>(p, ${ticket}));",
              {{"V", vocab},
               {"threads", threads},
               {"smoothing", smoothingLiteral(op.getLabelSmoothing())},
               {"logits", logits},
               {"targets", targets},
               {"rowLoss", e.bufferExpr(e.argument(rowLoss), f32, true)},
               {"rowHit", rowHit},
               {"loss", loss},
               {"count", count},
               {"correct", correct},
               {"ticket", int64_t(e.argument(ticket))}}));
  e.finishKernel(w.str(), GridDim{rows, 1}, GridDim(), GridDim(), threads);
  return success();
}

LogicalResult mlir::moe::cuda::emitCrossEntropyGradGroup(GroupEmitter &e) {
  auto op = cast<CrossEntropyGradOp>(e.first());
  int64_t vocab = cast<RankedTensorType>(op.getLogits().getType()).getShape().back();
  int64_t threads = e.tile(e.tiles().getThreads());
  SymDim rows = e.rowsOf(op.getLogits());
  Type f32 = Float32Type::get(op->getContext());
  int64_t count = e.scratch(f32, {SymDim(1)});
  e.beginKernel("count");
  {
    CodeWriter w;
    w.indent();
    e.declareScalar(w, "rows", rows);
    std::string targets = e.declared(w, op.getTargets(), false, "targets");
    w.line(llvm::formatv("moec::countTargets<256>(rows, {0}, {1});", targets,
                         e.bufferExpr(e.argument(count), f32, true)));
    e.finishKernel(w.str(), GridDim(), GridDim(), GridDim(), 256);
  }
  e.beginKernel("rows");
  CodeWriter w;
  w.indent();
  std::string logits = e.declared(w, op.getLogits(), false, "logits");
  std::string targets = e.declared(w, op.getTargets(), false, "targets");
  std::string dloss = e.declared(w, op.getDloss(), false, "dloss");
  std::string out = e.declared(w, op.getDlogits(), true, "dlogits");
  w.line(fill("moec::crossEntropyBackward<${V}, ${threads}>(${smoothing}, "
              "${logits}, ${targets}, ${dloss}, ${count}, ${dlogits});",
              {{"V", vocab},
               {"threads", threads},
               {"smoothing", smoothingLiteral(op.getLabelSmoothing())},
               {"logits", logits},
               {"targets", targets},
               {"dloss", dloss},
               {"count", e.bufferExpr(e.argument(count), f32, false)},
               {"dlogits", out}}));
  e.finishKernel(w.str(), GridDim{rows, 1}, GridDim(), GridDim(), threads);
  return success();
}
