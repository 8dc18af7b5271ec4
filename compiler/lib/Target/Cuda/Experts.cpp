//===- Experts.cpp - gathered expert FFNs and their gradients -------------===//
//
// Forward launches: dispatch (per-expert offsets and assignment order),
// [GLU up branch], up-projection with the activation in its epilogue,
// down-projection writing gated rows per assignment, and the combine with
// the group's residual add; with k = 1 the down-projection stores through
// the combine's epilogue itself and a last launch covers the dropped
// tokens. The gradient recomputes the hidden layer and produces dgates,
// the weight gradients per expert (each output summed by one thread over
// the expert's rows in order) and dx through the same row-per-assignment
// combine (or, with k = 1 and no GLU, from its GEMM directly).
//
//===----------------------------------------------------------------------===//

#include "RoutedGemm.h"
#include "moe/IR/MoeOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cuda;

namespace {

/// The operands and static sizes of one expert FFN group.
struct Experts : RoutedGemm {
  Value x, gates, w1, b1, w2, b2, w3;
  Activation act;
  int64_t d = 0, f = 0;

  /// Token rows of `ptr` (`[T, d]`) gathered in assignment order, each
  /// scaled by `scale` (null: 1).
  std::string gatheredTokens(StringRef ptr, StringRef scale) const {
    return gatheredRows(ptr, k, d, scale);
  }
};

template <typename OpT> Experts expertsOf(GroupEmitter &em, OpT op) {
  Experts x;
  static_cast<RoutedGemm &>(x) = routedGemm(
      em, op.getExpert(), op.getSlot(), em.rowsOf(op.getX()), op.getX(),
      op.getW1());
  x.x = op.getX();
  x.gates = op.getGates();
  x.w1 = op.getW1();
  x.b1 = op.getB1();
  x.w2 = op.getW2();
  x.b2 = op.getB2();
  x.w3 = op.getW3();
  x.act = op.getActivation();
  auto w1 = cast<RankedTensorType>(x.w1.getType());
  x.d = w1.getDimSize(1);
  x.f = w1.getDimSize(2);
  return x;
}

} // namespace

//===----------------------------------------------------------------------===//
// The forward launches.
//===----------------------------------------------------------------------===//

namespace {

/// hidden = act(x W1 + b1) [* up], and with GLU up = x W3 first.
void forwardHidden(GroupEmitter &e, const Experts &x, int64_t hidden,
                   int64_t up) {
  std::string gatherX = x.gatheredTokens("xs", kNoFloats);
  if (x.w3)
    groupedGemm(
        e, x, "up3", x.f, x.d,
        [&](CodeWriter &w) {
          e.declare(w, "xs", x.x, false);
          e.declare(w, "w3", x.w3, false);
          declareScratch(e, w, "up", up, x.f32, true);
        },
        gatherX, x.expertWeight("RowMajor", "w3", x.d, x.f),
        fill("[=](int64_t m, int64_t n, float acc) { up[(row0 + m) * ${F} + "
             "n] = acc; }",
             {{"F", x.f}}));
  groupedGemm(
      e, x, "up", x.f, x.d,
      [&](CodeWriter &w) {
        e.declare(w, "xs", x.x, false);
        e.declare(w, "w1", x.w1, false);
        declareOptional(e, w, "b1", x.b1, x.t);
        if (x.w3)
          declareScratch(e, w, "up", up, x.f32, false);
        else
          w.line("const moec::gptr<const float> up = " + std::string(kNoFloats) +
                 ";");
        declareScratch(e, w, "hidden", hidden, x.operandType, true);
      },
      gatherX, x.expertWeight("RowMajor", "w1", x.d, x.f),
      fill("[=](int64_t m, int64_t n, float acc) { const int64_t i = (row0 + "
           "m) * ${F} + n; const float a = acc + (b1 ? moec::toFloat(b1[ex * "
           "${F} + n]) : 0.0f); hidden[i] = moec::activate<${act}>(a) * (up ? "
           "up[i] : 1.0f); }",
           {{"F", x.f}, {"act", deviceEnum(x.act)}}));
}

} // namespace

LogicalResult mlir::moe::cuda::emitExpertsGroup(GroupEmitter &e) {
  auto op = cast<ExpertFfnOp>(e.first());
  Experts x = expertsOf(e, op);
  // With k = 1 the down-projection's row is the token's whole sum: it goes
  // to the combine's epilogue from the GEMM, with no per-assignment rows.
  bool direct = x.k == 1;
  int64_t hidden = e.scratch(x.operandType, {x.assignments(), SymDim(x.f)});
  int64_t up = x.w3 ? e.scratch(x.f32, {x.assignments(), SymDim(x.f)}) : -1;
  int64_t yk = direct ? -1 : e.scratch(x.f32, {x.assignments(), SymDim(x.d)});
  auto outputs = [&](CodeWriter &w) {
    return combineEpilogue(e, w, op.getResult());
  };
  dispatch(e, x, Value());
  forwardHidden(e, x, hidden, up);
  // y = gate * (hidden W2 + b2): yk's row of the assignment, or with k = 1
  // the token's output.
  std::string store =
      fill(direct ? "combined(a * ${D} + n, y)" : "yk[a * ${D} + n] = y",
           {{"D", x.d}});
  groupedGemm(
      e, x, "down", x.d, x.f,
      [&](CodeWriter &w) {
        declareScratch(e, w, "hidden", hidden, x.operandType, false);
        e.declare(w, "w2", x.w2, false);
        declareOptional(e, w, "b2", x.b2, x.t);
        e.declare(w, "gates", x.gates, false);
        if (direct)
          w.line("const auto combined = " + outputs(w) + ";");
        else
          declareScratch(e, w, "yk", yk, x.f32, true);
      },
      x.scratchRows("RowMajor", "hidden", x.f),
      x.expertWeight("RowMajor", "w2", x.f, x.d),
      fill("[=](int64_t m, int64_t n, float acc) { const int64_t a = "
           "order[row0 + m]; const float y = gates[a] * (acc + (b2 ? "
           "moec::toFloat(b2[ex * ${D} + n]) : 0.0f)); ${store}; }",
           {{"D", x.d}, {"store", store}}));
  // The combine, with the group's residual add.
  if (direct)
    combineDropped(e, x, x.d, outputs);
  else
    combine(e, x, x.d, "yk", yk, outputs);
  return success();
}

//===----------------------------------------------------------------------===//
// The gradient, by phase.
//===----------------------------------------------------------------------===//

namespace {

/// The scratch of the gradient, `[assignments, F]` unless noted, and the
/// op's results: float, except hidden, da and du, which only GEMMs and
/// column sums read (operandType).
struct GradState {
  int64_t pre, up, g, hidden, da, du, dxk /* [assignments, d] */;
  Value dy, dgates, dx, dw1, db1, dw2, db2, dw3;
};

/// Whether dx's GEMM stores the token's gradient itself: with k = 1 and
/// one input projection its row is the whole sum (GLU adds two GEMMs'
/// rows, which the combine sums in f32 before dx is rounded to its type).
bool directInputGradient(const Experts &x) { return x.k == 1 && !x.w3; }

GradState gradState(GroupEmitter &e, const Experts &x, ExpertFfnGradOp op) {
  SymShape hiddenShape{x.assignments(), SymDim(x.f)};
  GradState s;
  s.pre = e.scratch(x.f32, hiddenShape);
  s.up = x.w3 ? e.scratch(x.f32, hiddenShape) : -1;
  s.g = e.scratch(x.f32, hiddenShape);
  s.hidden = e.scratch(x.operandType, hiddenShape);
  s.da = e.scratch(x.operandType, hiddenShape);
  s.du = x.w3 ? e.scratch(x.operandType, hiddenShape) : -1;
  s.dxk = directInputGradient(x)
              ? -1
              : e.scratch(x.f32, {x.assignments(), SymDim(x.d)});
  s.dy = op.getDy();
  s.dgates = op.getDgates();
  s.dx = op.getDx();
  // One weight gradient per weight operand, in operand order.
  auto dweights = op.getDweights();
  unsigned next = 0;
  s.dw1 = dweights[next++];
  s.db1 = x.b1 ? dweights[next++] : Value();
  s.dw2 = dweights[next++];
  s.db2 = x.b2 ? dweights[next++] : Value();
  s.dw3 = x.w3 ? dweights[next++] : Value();
  return s;
}

/// pre = x W1 + b1 (and up = x W3 with GLU), recomputed per assignment;
/// g = dy W2^T gathered by token.
void recomputeForGradient(GroupEmitter &e, const Experts &x,
                          const GradState &s) {
  std::string gatherX = x.gatheredTokens("xs", kNoFloats);
  for (auto [name, weight, bias, target] :
       {std::make_tuple("pre", x.w1, x.b1, s.pre),
        std::make_tuple("up3", x.w3, Value(), s.up)}) {
    if (!weight)
      continue;
    groupedGemm(
        e, x, name, x.f, x.d,
        // Structured bindings are captured by copy (C++17).
        [&, weight = weight, bias = bias, target = target](CodeWriter &w) {
          e.declare(w, "xs", x.x, false);
          e.declare(w, "w", weight, false);
          declareOptional(e, w, "b", bias, x.t);
          declareScratch(e, w, "target", target, x.f32, true);
        },
        gatherX, x.expertWeight("RowMajor", "w", x.d, x.f),
        fill("[=](int64_t m, int64_t n, float acc) { target[(row0 + m) * "
             "${F} + n] = acc + (b ? moec::toFloat(b[ex * ${F} + n]) : "
             "0.0f); }",
             {{"F", x.f}}));
  }
  groupedGemm(
      e, x, "g", x.f, x.d,
      [&](CodeWriter &w) {
        e.declare(w, "dy", s.dy, false);
        e.declare(w, "w2", x.w2, false);
        declareScratch(e, w, "g", s.g, x.f32, true);
      },
      x.gatheredTokens("dy", kNoFloats), x.expertWeight("ColMajor", "w2", x.f, x.d),
      fill("[=](int64_t m, int64_t n, float acc) { g[(row0 + m) * ${F} + n] = "
           "acc; }",
           {{"F", x.f}}));
}

/// Per assignment: dgates, the hidden activations again, and the gradients
/// of the pre-activations (da) and of the GLU branch (du).
void hiddenGradients(GroupEmitter &e, const Experts &x, const GradState &s) {
  e.beginKernel("hidden");
  CodeWriter w;
  w.indent();
  declareSorted(e, w, x);
  std::string gates = e.declared(w, x.gates, false, "gates");
  std::string dy = e.declared(w, s.dy, false, "dy");
  std::string b2 = x.b2 ? e.declared(w, x.b2, false, "b2")
                        : "moec::gptr<const " + x.t + ">()";
  std::string dgates = e.declared(w, s.dgates, true, "dgates");
  auto in = [&](int64_t id) {
    return id < 0 ? std::string(kNoFloats)
                  : e.bufferExpr(e.argument(id), x.f32, false);
  };
  auto out = [&](int64_t id) {
    return id < 0 ? "moec::gptr<" + cudaType(x.operandType) + ">()"
                  : e.bufferExpr(e.argument(id), x.operandType, true);
  };
  w.line(fill(
      "moec::expertHiddenGrad<${F}, ${D}, ${K}, ${glu}, ${t}, ${h}>(offsets, "
      "${E}, "
      "order, ${gates}, ${pre}, ${up}, ${g}, ${dy}, ${b2}, ${dgates}, "
      "${hidden}, ${da}, ${du}, [](float v) { return "
      "moec::activate<${act}>(v); }, [](float v) { return "
      "moec::activateGrad<${act}>(v); }, 8);",
      {{"F", x.f},
       {"D", x.d},
       {"K", x.k},
       {"glu", static_cast<bool>(x.w3)},
       {"t", x.t},
       {"h", cudaType(x.operandType)},
       {"E", x.e},
       {"gates", gates},
       {"pre", in(s.pre)},
       {"up", in(s.up)},
       {"g", in(s.g)},
       {"dy", dy},
       {"b2", b2},
       {"dgates", dgates},
       {"hidden", out(s.hidden)},
       {"da", out(s.da)},
       {"du", out(s.du)},
       {"act", deviceEnum(x.act)}}));
  e.finishKernel(w.str(), GridDim{x.assignments(), 8}, GridDim(), GridDim(),
                 256);
}

/// dW2, db2, dW1, db1, dW3: one GEMM (or column sum) per expert over its
/// rows, for the gradients anything reads.
void weightGradients(GroupEmitter &e, const Experts &x, const GradState &s) {
  auto store = [&](int64_t m, int64_t n) {
    return fill("[=](int64_t m, int64_t n, float acc) { dw[(ex * ${M} + m) * "
                "${N} + n] = acc; }",
                {{"M", m}, {"N", n}});
  };
  if (e.escapes(s.dw2))
    perExpertGemm(
        e, x, "dw2", x.f, x.d,
        [&](CodeWriter &w) {
          declareScratch(e, w, "hidden", s.hidden, x.operandType, false);
          e.declare(w, "dy", s.dy, false);
          e.declare(w, "gates", x.gates, false);
          e.declare(w, "dw", s.dw2, true);
        },
        x.scratchRows("ColMajor", "hidden", x.f),
        x.gatheredTokens("dy", "gates"), store(x.f, x.d));
  if (s.db2 && e.escapes(s.db2))
    perExpertColumnSums(
        e, x, "db2", x.d,
        [&](CodeWriter &w) {
          e.declare(w, "dy", s.dy, false);
          e.declare(w, "gates", x.gates, false);
          e.declare(w, "db", s.db2, true);
        },
        fill("[=](int64_t r, int64_t c) { const int64_t a = order[row0 + r]; "
             "return gates[a] * moec::toFloat(dy[(a / ${K}) * ${D} + c]); }",
             {{"K", x.k}, {"D", x.d}}),
        "db");
  for (auto [name, result, source] :
       {std::make_tuple("dw1", s.dw1, s.da),
        std::make_tuple("dw3", s.dw3, s.du)}) {
    if (!result || !e.escapes(result))
      continue;
    perExpertGemm(
        e, x, name, x.d, x.f,
        [&, result = result, source = source](CodeWriter &w) {
          e.declare(w, "xs", x.x, false);
          declareScratch(e, w, "src", source, x.operandType, false);
          e.declare(w, "dw", result, true);
        },
        x.gatheredCols("xs", x.k, x.d), x.scratchRows("RowMajor", "src", x.f),
        store(x.d, x.f));
  }
  if (s.db1 && e.escapes(s.db1))
    perExpertColumnSums(
        e, x, "db1", x.f,
        [&](CodeWriter &w) {
          declareScratch(e, w, "da", s.da, x.operandType, false);
          e.declare(w, "db", s.db1, true);
        },
        fill("[=](int64_t r, int64_t c) { return moec::toFloat(da[(row0 + r) "
             "* ${F} + c]); }",
             {{"F", x.f}}),
        "db");
}

/// dx: per assignment da W1^T (+ du W3^T), then the combine per token;
/// or, see directInputGradient, da W1^T stored into dx by its GEMM and
/// zeros for the tokens no expert kept.
void inputGradient(GroupEmitter &e, const Experts &x, const GradState &s) {
  auto dxStore = [&](CodeWriter &w) {
    std::string dx = e.declared(w, s.dx, true, "dx");
    return "[=](int64_t i, float v) { " + dx + "[i] = v; }";
  };
  if (directInputGradient(x)) {
    groupedGemm(
        e, x, "dx", x.d, x.f,
        [&](CodeWriter &w) {
          declareScratch(e, w, "src", s.da, x.operandType, false);
          e.declare(w, "w", x.w1, false);
          w.line("const auto combined = " + dxStore(w) + ";");
        },
        x.scratchRows("RowMajor", "src", x.f),
        x.expertWeight("ColMajor", "w", x.d, x.f),
        fill("[=](int64_t m, int64_t n, float acc) { "
             "combined(static_cast<int64_t>(order[row0 + m]) * ${D} + n, "
             "acc); }",
             {{"D", x.d}}));
    combineDropped(e, x, x.d, dxStore);
    return;
  }
  for (auto [name, weight, source, accumulate] :
       {std::make_tuple("dxk", x.w1, s.da, false),
        std::make_tuple("dxk3", x.w3, s.du, true)}) {
    if (!weight)
      continue;
    groupedGemm(
        e, x, name, x.d, x.f,
        [&, weight = weight, source = source](CodeWriter &w) {
          declareScratch(e, w, "src", source, x.operandType, false);
          e.declare(w, "w", weight, false);
          declareScratch(e, w, "dxk", s.dxk, x.f32, true);
        },
        x.scratchRows("RowMajor", "src", x.f),
        x.expertWeight("ColMajor", "w", x.d, x.f),
        fill("[=](int64_t m, int64_t n, float acc) { const int64_t i = "
             "static_cast<int64_t>(order[row0 + m]) * ${D} + n; dxk[i] = "
             "${add}acc; }",
             {{"D", x.d}, {"add", accumulate ? "dxk[i] + " : ""}}));
  }
  combine(e, x, x.d, "dxk", s.dxk, dxStore);
}

} // namespace

LogicalResult mlir::moe::cuda::emitExpertsGradGroup(GroupEmitter &e) {
  auto op = cast<ExpertFfnGradOp>(e.first());
  Experts x = expertsOf(e, op);
  GradState s = gradState(e, x, op);
  dispatch(e, x, s.dgates);
  recomputeForGradient(e, x, s);
  hiddenGradients(e, x, s);
  weightGradients(e, x, s);
  if (e.escapes(s.dx))
    inputGradient(e, x, s);
  return success();
}
