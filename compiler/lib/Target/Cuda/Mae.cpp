//===- Mae.cpp - the MAE layer's pooled summary, mixture and sampling ----===//
//
// window_mean and window_mean_grad: one thread per (sequence, feature)
// column (mae.cuh's windowMean / windowMeanGrad). head_mixture_grad: one
// block per (row group, head). sample_expert: one row per thread.
// gate_stats: one block. moe.head_mixture itself joins elementwise runs
// (Elementwise.cpp).
//
//===----------------------------------------------------------------------===//

#include "GroupEmitter.h"
#include "moe/IR/MoeOps.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cuda;

namespace {

/// The static size of the last dimension of `v`, or an error at the group.
FailureOr<int64_t> staticWidth(GroupEmitter &e, Value v, StringRef what) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getRank() == 0 || type.isDynamicDim(type.getRank() - 1)) {
    e.error("needs a static ") << what;
    return failure();
  }
  return type.getShape().back();
}

/// Declares a pointer to the optional i32 mask, or names a null one.
std::string maskPointer(GroupEmitter &e, CodeWriter &w, Value mask) {
  return mask ? e.declared(w, mask, false, "mask")
              : std::string("moec::gptr<const int32_t>()");
}

/// Rows of context that share one row of g: S for one gate per sequence,
/// 1 for one per position.
SymDim rowsPerGateRow(GroupEmitter &e, Value context, Value g) {
  const SymShape &gs = e.shapeOf(g);
  return gs[1] == SymDim(1) ? e.shapeOf(context)[1] : SymDim(1);
}

} // namespace

LogicalResult mlir::moe::cuda::emitWindowMeanGroup(GroupEmitter &e) {
  auto op = cast<WindowMeanOp>(e.first());
  FailureOr<int64_t> width = staticWidth(e, op.getX(), "feature width");
  if (failed(width))
    return failure();
  int64_t threads = e.tile(e.tiles().getThreads());
  const SymShape &x = e.shapeOf(op.getX());
  Value src = op.getHistory() ? op.getHistory() : op.getX();
  e.beginKernel("");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "batch", x[0]);
  e.declareScalar(w, "seq", x[1]);
  e.declareScalar(w, "len", e.shapeOf(src)[1]);
  std::string srcp = e.declared(w, src, false, "src");
  std::string past = "0";
  if (op.getPast()) {
    std::string pastp = e.declared(w, op.getPast(), false, "past");
    past = pastp + "[0]";
  }
  std::string mask = maskPointer(e, w, op.getMask());
  std::string y = e.declared(w, op.getResult(), true, "y");
  w.line(fill("moec::windowMean<${D}, ${window}>(batch, seq, len, ${past}, "
              "${size}, ${src}, ${mask}, ${y});",
              {{"D", *width},
               {"window", deviceEnum(op.getWindow())},
               {"past", past},
               {"size", static_cast<int64_t>(op.getSize())},
               {"src", srcp},
               {"mask", mask},
               {"y", y}}));
  e.finishKernel(w.str(), GridDim{x[0] * SymDim(*width), threads}, GridDim(),
                 GridDim(), threads);
  return success();
}

LogicalResult mlir::moe::cuda::emitWindowMeanGradGroup(GroupEmitter &e) {
  auto op = cast<WindowMeanGradOp>(e.first());
  FailureOr<int64_t> width = staticWidth(e, op.getX(), "feature width");
  if (failed(width))
    return failure();
  int64_t threads = e.tile(e.tiles().getThreads());
  const SymShape &x = e.shapeOf(op.getX());
  e.beginKernel("");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "batch", x[0]);
  e.declareScalar(w, "seq", x[1]);
  std::string dy = e.declared(w, op.getDy(), false, "dy");
  std::string mask = maskPointer(e, w, op.getMask());
  std::string dx = e.declared(w, op.getDx(), true, "dx");
  w.line(fill("moec::windowMeanGrad<${D}, ${window}>(batch, seq, ${size}, "
              "${dy}, ${mask}, ${dx});",
              {{"D", *width},
               {"window", deviceEnum(op.getWindow())},
               {"size", static_cast<int64_t>(op.getSize())},
               {"dy", dy},
               {"mask", mask},
               {"dx", dx}}));
  e.finishKernel(w.str(), GridDim{x[0] * SymDim(*width), threads}, GridDim(),
                 GridDim(), threads);
  return success();
}

LogicalResult mlir::moe::cuda::emitHeadMixtureGradGroup(GroupEmitter &e) {
  auto op = cast<HeadMixtureGradOp>(e.first());
  FailureOr<int64_t> width = staticWidth(e, op.getContext(), "context width");
  if (failed(width))
    return failure();
  int64_t heads = static_cast<int64_t>(op.getNumHeads());
  int64_t threads = e.tile(e.tiles().getThreads());
  const SymShape &g = e.shapeOf(op.getG());
  SymDim groups = g[0] * g[1];
  e.beginKernel("");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "groups", groups);
  e.declareScalar(w, "rowsPerGroup",
                  rowsPerGateRow(e, op.getContext(), op.getG()));
  std::string dy = e.declared(w, op.getDy(), false, "dy");
  std::string context = e.declared(w, op.getContext(), false, "context");
  std::string gp = e.declared(w, op.getG(), false, "g");
  std::string dcontext = e.declared(w, op.getDcontext(), true, "dcontext");
  std::string dg = e.declared(w, op.getDg(), true, "dg");
  w.line(fill("moec::headMixtureGrad<${H}, ${DH}, ${threads}>(groups, "
              "rowsPerGroup, ${dy}, ${context}, ${g}, ${dcontext}, ${dg});",
              {{"H", heads},
               {"DH", *width / heads},
               {"threads", threads},
               {"dy", dy},
               {"context", context},
               {"g", gp},
               {"dcontext", dcontext},
               {"dg", dg}}));
  e.finishKernel(w.str(), GridDim{groups * SymDim(heads), 1}, GridDim(),
                 GridDim(), threads);
  return success();
}

LogicalResult mlir::moe::cuda::emitSampleExpertGroup(GroupEmitter &e) {
  auto op = cast<SampleExpertOp>(e.first());
  int64_t threads = e.tile(e.tiles().getThreads());
  const SymShape &p = e.shapeOf(op.getP());
  SymDim rows = p[0] * p[1];
  e.beginKernel("");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "rows", rows);
  e.declareScalar(w, "groups", p[1]);
  e.declareScalar(w, "width", p[2]);
  std::string pp = e.declared(w, op.getP(), false, "p");
  std::string seed = e.declared(w, op.getSeed(), false, "seed");
  std::string y = e.declared(w, op.getResult(), true, "y");
  w.line(fill("moec::sampleExpert<${N}, ${uniform}>(rows, groups, width, "
              "static_cast<uint64_t>(${seed}[0]), ${stream}ull, ${p}, ${y});",
              {{"N", static_cast<int64_t>(op.getNumExperts())},
               {"uniform", op.getUniform()},
               {"seed", seed},
               {"stream", std::to_string(static_cast<uint64_t>(op.getStream()))},
               {"p", pp},
               {"y", y}}));
  e.finishKernel(w.str(), GridDim{rows, threads}, GridDim(), GridDim(),
                 threads);
  return success();
}

LogicalResult mlir::moe::cuda::emitGateStatsGroup(GroupEmitter &e) {
  auto op = cast<GateStatsOp>(e.first());
  FailureOr<int64_t> heads = staticWidth(e, op.getG(), "number of experts");
  if (failed(heads))
    return failure();
  int64_t threads = e.tile(e.tiles().getThreads());
  e.beginKernel("");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "rows", e.rowsOf(op.getG()));
  std::string g = e.declared(w, op.getG(), false, "g");
  std::string stats = e.declared(w, op.getStats(), true, "stats");
  w.line(fill("moec::gateStats<${H}, ${threads}>(rows, ${g}, ${stats});",
              {{"H", *heads}, {"threads", threads}, {"g", g}, {"stats", stats}}));
  e.finishKernel(w.str(), GridDim(), GridDim(), GridDim(), threads);
  return success();
}
