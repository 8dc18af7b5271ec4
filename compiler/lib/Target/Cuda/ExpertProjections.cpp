//===- ExpertProjections.cpp - routed query and output projections --------===//
//
// moe.expert_map: dispatch, one grouped GEMM that gathers token rows and
// writes each assignment's h-wide block of the result in place (dropped
// blocks are zeroed). moe.expert_reduce: dispatch, one grouped GEMM over the
// assignments' c blocks writing gated rows, and the combine with the group's
// residual add. Their gradients reuse the same dispatch, grouped GEMMs for
// the data gradients and per-expert GEMMs for the weight gradients.
//
//===----------------------------------------------------------------------===//

#include "RoutedGemm.h"
#include "moe/IR/MoeOps.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cuda;

namespace {

/// The static sizes of a map or reduce group: the weight is [E, rows, cols].
struct Projection : RoutedGemm {
  int64_t rows = 0, cols = 0;
};

Projection projectionOf(GroupEmitter &e, Value expert, Value slot,
                        Value perToken, Value weight, Value storage) {
  Projection p;
  static_cast<RoutedGemm &>(p) =
      routedGemm(e, expert, slot, e.rowsOf(perToken), storage, weight);
  auto w = cast<RankedTensorType>(weight.getType());
  p.rows = w.getDimSize(1);
  p.cols = w.getDimSize(2);
  return p;
}

/// Zeroes the `width`-wide blocks of the dropped assignments of `rows`.
void clearDropped(GroupEmitter &e, const Projection &p, Value rows,
                  int64_t width) {
  e.beginKernel("clear");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "tokens", p.tokens);
  std::string slot = e.declared(w, p.slot, false, "slot");
  std::string out = e.declared(w, rows, true, "rows");
  w.line(fill("moec::expertClearDropped<${W}>(tokens * ${K}, ${slot}, "
              "${rows});",
              {{"W", width}, {"K", p.k}, {"slot", slot}, {"rows", out}}));
  e.finishKernel(w.str(), GridDim{p.assignments() * SymDim(width), 1024},
                 GridDim(), GridDim(), 256);
}

/// Stores GEMM row m, column n into row order[row0 + m] of `ptr` (`ld`
/// wide), scaled by `scale[a]` unless it is empty.
std::string storeByAssignment(StringRef ptr, int64_t ld, StringRef scale) {
  return fill("[=](int64_t m, int64_t n, float acc) { const int64_t a = "
              "order[row0 + m]; ${ptr}[a * ${ld} + n] = ${scale}acc; }",
              {{"ptr", ptr},
               {"ld", ld},
               {"scale", scale.empty() ? std::string()
                                       : scale.str() + "[a] * "}});
}

/// Stores expert ex's weight gradient [M, N] row-major.
std::string storeWeightGrad(int64_t m, int64_t n) {
  return fill("[=](int64_t m, int64_t n, float acc) { dw[(ex * ${M} + m) * "
              "${N} + n] = acc; }",
              {{"M", m}, {"N", n}});
}

} // namespace

LogicalResult mlir::moe::cuda::emitExpertMapGroup(GroupEmitter &e) {
  auto op = cast<ExpertMapOp>(e.first());
  Projection p = projectionOf(e, op.getExpert(), op.getSlot(), op.getX(),
                              op.getWeight(), op.getX());
  int64_t d = p.rows, h = p.cols;
  dispatch(e, p, Value());
  clearDropped(e, p, op.getResult(), h);
  groupedGemm(
      e, p, "map", h, d,
      [&](CodeWriter &w) {
        e.declare(w, "xs", op.getX(), false);
        e.declare(w, "w", op.getWeight(), false);
        e.declare(w, "y", op.getResult(), true);
      },
      p.gatheredRows("xs", p.k, d, kNoFloats),
      p.expertWeight("RowMajor", "w", d, h), storeByAssignment("y", h, ""));
  return success();
}

LogicalResult mlir::moe::cuda::emitExpertMapGradGroup(GroupEmitter &e) {
  auto op = cast<ExpertMapGradOp>(e.first());
  Projection p = projectionOf(e, op.getExpert(), op.getSlot(), op.getX(),
                              op.getWeight(), op.getX());
  int64_t d = p.rows, h = p.cols;
  dispatch(e, p, Value());
  // dW_e = x^T dy over the expert's rows.
  if (e.escapes(op.getDweight()))
    perExpertGemm(
        e, p, "dw", d, h,
        [&](CodeWriter &w) {
          e.declare(w, "xs", op.getX(), false);
          e.declare(w, "dy", op.getDy(), false);
          e.declare(w, "dw", op.getDweight(), true);
        },
        p.gatheredCols("xs", p.k, d), p.gatheredRows("dy", 1, h, kNoFloats),
        storeWeightGrad(d, h));
  if (!e.escapes(op.getDx()))
    return success();
  // dx: dy W^T per assignment, then the combine per token.
  int64_t dxk = e.scratch(p.f32, {p.assignments(), SymDim(d)});
  groupedGemm(
      e, p, "dxk", d, h,
      [&](CodeWriter &w) {
        e.declare(w, "dy", op.getDy(), false);
        e.declare(w, "w", op.getWeight(), false);
        declareScratch(e, w, "dxk", dxk, p.f32, true);
      },
      p.gatheredRows("dy", 1, h, kNoFloats),
      p.expertWeight("ColMajor", "w", d, h), storeByAssignment("dxk", d, ""));
  combine(e, p, d, "dxk", dxk, [&](CodeWriter &w) {
    std::string dx = e.declared(w, op.getDx(), true, "dx");
    return "[=](int64_t i, float v) { " + dx + "[i] = v; }";
  });
  return success();
}

LogicalResult mlir::moe::cuda::emitExpertReduceGroup(GroupEmitter &e) {
  auto op = cast<ExpertReduceOp>(e.first());
  Projection p = projectionOf(e, op.getExpert(), op.getSlot(), op.getResult(),
                              op.getWeight(), op.getC());
  int64_t h = p.rows, d = p.cols;
  int64_t yk = e.scratch(p.f32, {p.assignments(), SymDim(d)});
  dispatch(e, p, Value());
  // yk = gate * c W_e, one row per assignment.
  groupedGemm(
      e, p, "reduce", d, h,
      [&](CodeWriter &w) {
        e.declare(w, "c", op.getC(), false);
        e.declare(w, "w", op.getWeight(), false);
        e.declare(w, "gates", op.getGates(), false);
        declareScratch(e, w, "yk", yk, p.f32, true);
      },
      p.gatheredRows("c", 1, h, kNoFloats),
      p.expertWeight("RowMajor", "w", h, d),
      storeByAssignment("yk", d, "gates"));
  combine(e, p, d, "yk", yk, [&](CodeWriter &w) {
    return combineEpilogue(e, w, op.getResult());
  });
  return success();
}

LogicalResult mlir::moe::cuda::emitExpertReduceGradGroup(GroupEmitter &e) {
  auto op = cast<ExpertReduceGradOp>(e.first());
  Projection p = projectionOf(e, op.getExpert(), op.getSlot(), op.getDy(),
                              op.getWeight(), op.getC());
  int64_t h = p.rows, d = p.cols;
  bool needRows = e.escapes(op.getDc()) || e.escapes(op.getDgates());
  // dispatch also zeroes dgates (dropped assignments stay 0).
  dispatch(e, p, e.escapes(op.getDgates()) ? op.getDgates() : Value());
  if (e.escapes(op.getDweight()))
    perExpertGemm(
        e, p, "dw", h, d,
        [&](CodeWriter &w) {
          e.declare(w, "c", op.getC(), false);
          e.declare(w, "dy", op.getDy(), false);
          e.declare(w, "gates", op.getGates(), false);
          e.declare(w, "dw", op.getDweight(), true);
        },
        p.gatheredCols("c", 1, h), p.gatheredRows("dy", p.k, d, "gates"),
        storeWeightGrad(h, d));
  if (!needRows)
    return success();
  // G = dy W_e^T in sorted rows, then dc and dgates per row.
  int64_t g = e.scratch(p.f32, {p.assignments(), SymDim(h)});
  groupedGemm(
      e, p, "g", h, d,
      [&](CodeWriter &w) {
        e.declare(w, "dy", op.getDy(), false);
        e.declare(w, "w", op.getWeight(), false);
        declareScratch(e, w, "g", g, p.f32, true);
      },
      p.gatheredRows("dy", p.k, d, kNoFloats),
      p.expertWeight("ColMajor", "w", h, d),
      fill("[=](int64_t m, int64_t n, float acc) { g[(row0 + m) * ${H} + n] "
           "= acc; }",
           {{"H", h}}));
  if (e.escapes(op.getDc()))
    clearDropped(e, p, op.getDc(), h);
  e.beginKernel("rows");
  CodeWriter w;
  w.indent();
  declareSorted(e, w, p);
  std::string gates = e.declared(w, op.getGates(), false, "gates");
  std::string c = e.declared(w, op.getC(), false, "c");
  std::string dc = e.escapes(op.getDc())
                       ? e.declared(w, op.getDc(), true, "dc")
                       : "moec::gptr<" + p.t + ">()";
  std::string dgates = e.escapes(op.getDgates())
                           ? e.declared(w, op.getDgates(), true, "dgates")
                           : std::string("moec::gptr<float>()");
  w.line(fill("moec::expertReduceRows<${H}, ${t}>(offsets, ${E}, order, "
              "${gates}, ${c}, ${g}, ${dc}, ${dgates}, 8);",
              {{"H", h},
               {"t", p.t},
               {"E", p.e},
               {"gates", gates},
               {"c", c},
               {"g", e.bufferExpr(e.argument(g), p.f32, false)},
               {"dc", dc},
               {"dgates", dgates}}));
  e.finishKernel(w.str(), GridDim{p.assignments(), 8}, GridDim(), GridDim(),
                 256);
  return success();
}

LogicalResult mlir::moe::cuda::emitCvLossGroup(GroupEmitter &e) {
  auto op = cast<CvLossOp>(e.first());
  int64_t threads = e.tile(e.tiles().getThreads());
  e.beginKernel("");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "assignments", e.numElements(op.getGates()));
  std::string gates = e.declared(w, op.getGates(), false, "gates");
  std::string expert = e.declared(w, op.getExpert(), false, "expert");
  std::string loss = e.declared(w, op.getLoss(), true, "loss");
  w.line(fill("moec::cvLoss<${E}, ${threads}>(assignments, ${gates}, "
              "${expert}, ${loss});",
              {{"E", static_cast<int64_t>(op.getNumExperts())},
               {"threads", threads},
               {"gates", gates},
               {"expert", expert},
               {"loss", loss}}));
  e.finishKernel(w.str(), GridDim(), GridDim(), GridDim(), threads);
  return success();
}

LogicalResult mlir::moe::cuda::emitCvLossGradGroup(GroupEmitter &e) {
  auto op = cast<CvLossGradOp>(e.first());
  int64_t threads = e.tile(e.tiles().getThreads());
  e.beginKernel("");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "assignments", e.numElements(op.getGates()));
  std::string gates = e.declared(w, op.getGates(), false, "gates");
  std::string expert = e.declared(w, op.getExpert(), false, "expert");
  std::string dloss = e.declared(w, op.getDloss(), false, "dloss");
  std::string dgates = e.declared(w, op.getDgates(), true, "dgates");
  w.line(fill("moec::cvLossGrad<${E}, ${threads}>(assignments, ${gates}, "
              "${expert}, ${dloss}, ${dgates});",
              {{"E", static_cast<int64_t>(op.getNumExperts())},
               {"threads", threads},
               {"gates", gates},
               {"expert", expert},
               {"dloss", dloss},
               {"dgates", dgates}}));
  e.finishKernel(w.str(), GridDim(), GridDim(), GridDim(), threads);
  return success();
}
