//===- Experts.cpp - gathered expert FFNs and their gradients -------------===//
//
// Forward launches: dispatch (per-expert offsets and assignment order),
// [GLU up branch], up-projection with the activation in its epilogue,
// down-projection writing gated rows per assignment, and the combine with
// the group's residual add. The gradient recomputes the hidden layer and
// produces dgates, the weight gradients per expert (each output summed by
// one thread over the expert's rows in order) and dx through the same
// row-per-assignment combine.
//
//===----------------------------------------------------------------------===//

#include "GroupEmitter.h"
#include "moe/IR/MoeOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cuda;

namespace {

/// The static sizes and scratch buffers of one expert group.
struct Experts {
  Value x, expert, gates, slot, w1, b1, w2, b2, w3;
  Activation act;
  int64_t e, k, d, f;
  SymDim tokens;
  int64_t tm, tn, tk, threads, dispatchThreads;
  Type f32, i32;
  /// The CUDA type tokens, weights and dy are stored in (float, bf16).
  std::string t;
  /// The device GEMM tile for that storage (see gemmTileFunction).
  std::string gemm;
  int64_t offsets, tileStart, order;

  /// Every assignment (token, choice) is a row.
  SymDim assignments() const { return tokens * SymDim(k); }

  /// The row-major weight of this block's expert `ex`: `[rows, ld]` per
  /// expert, stored as `t`.
  std::string expertWeight(StringRef layout, StringRef ptr, int64_t rows,
                           int64_t ld) const {
    return fill("moec::${layout}<${t}>{${ptr} + static_cast<int64_t>(ex) * "
                "${stride}, ${ld}}",
                {{"layout", layout},
                 {"t", t},
                 {"ptr", ptr},
                 {"stride", rows * ld},
                 {"ld", ld}});
  }
  /// Token rows of `ptr` (`[T, d]`, stored as `t`) gathered in assignment
  /// order, each scaled by `scale` (null: 1).
  std::string gatheredRows(StringRef ptr, StringRef scale) const {
    return fill("moec::GatherRows<${t}>{${ptr}, order, row0, ${k}, ${d}, "
                "${scale}}",
                {{"t", t}, {"ptr", ptr}, {"k", k}, {"d", d}, {"scale", scale}});
  }
  /// This block's rows of a float scratch of `ld` columns per assignment.
  static std::string scratchRows(StringRef layout, StringRef ptr, int64_t ld) {
    return fill("moec::${layout}<float>{${ptr} + row0 * ${ld}, ${ld}}",
                {{"layout", layout}, {"ptr", ptr}, {"ld", ld}});
  }
};

constexpr const char *kNoFloats = "moec::gptr<const float>()";

template <typename OpT> Experts expertsOf(GroupEmitter &em, OpT op) {
  Experts x;
  x.x = op.getX();
  x.expert = op.getExpert();
  x.gates = op.getGates();
  x.slot = op.getSlot();
  x.w1 = op.getW1();
  x.b1 = op.getB1();
  x.w2 = op.getW2();
  x.b2 = op.getB2();
  x.w3 = op.getW3();
  x.act = op.getActivation();
  auto w1 = cast<RankedTensorType>(x.w1.getType());
  x.e = w1.getDimSize(0);
  x.d = w1.getDimSize(1);
  x.f = w1.getDimSize(2);
  x.k = cast<RankedTensorType>(x.expert.getType()).getShape().back();
  x.tokens = em.rowsOf(x.x);
  TilesAttr tiles = em.tiles();
  x.tm = em.tile(tiles.getTileM());
  x.tn = em.tile(tiles.getTileN());
  x.tk = em.tile(tiles.getTileK());
  x.threads = em.tile(tiles.getThreads());
  x.dispatchThreads = em.tile(tiles.getDispatchThreads());
  MLIRContext *ctx = op->getContext();
  x.f32 = Float32Type::get(ctx);
  x.t = cudaType(cast<TensorType>(x.x.getType()).getElementType());
  x.gemm = gemmTileFunction(x.x, x.w1, x.tm, x.tn, x.tk, x.threads).str();
  x.i32 = IntegerType::get(ctx, 32);
  x.offsets = em.scratch(x.i32, {SymDim(x.e + 1)});
  x.tileStart = em.scratch(x.i32, {SymDim(x.e + 1)});
  x.order = em.scratch(x.i32, {x.assignments()});
  return x;
}

/// Declares `name` bound to `v`'s buffer, or a null pointer of type `t`.
void declareOptional(GroupEmitter &e, CodeWriter &w, StringRef name, Value v,
                     StringRef t) {
  if (v)
    e.declare(w, name, v, false);
  else
    w.line(fill("const moec::gptr<const ${t}> ${name} = moec::gptr<const "
                "${t}>();",
                {{"t", t}, {"name", name}}));
}

/// Declares `name` bound to float scratch buffer `id`.
void declareScratch(GroupEmitter &e, CodeWriter &w, StringRef name, int64_t id,
                    Type f32, bool writable) {
  w.line(fill("const moec::gptr<${const}float> ${name} = ${expr};",
              {{"const", writable ? "" : "const "},
               {"name", name},
               {"expr", e.bufferExpr(e.argument(id), f32, writable)}}));
}

/// The dispatch launch; `zero` clears a [T*k] float buffer (dgates).
void dispatch(GroupEmitter &e, const Experts &x, Value zero) {
  e.beginKernel("dispatch");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "tokens", x.tokens);
  std::string expert = e.declared(w, x.expert, false, "expert");
  std::string slot = e.declared(w, x.slot, false, "slot");
  std::string zp = zero ? e.declared(w, zero, true, "zero")
                        : std::string("moec::gptr<float>()");
  w.line(fill("moec::expertDispatch<${E}, ${K}, ${TM}, ${threads}>(tokens, "
              "${expert}, ${slot}, ${offsets}, ${tileStart}, ${order}, "
              "${zero});",
              {{"E", x.e},
               {"K", x.k},
               {"TM", x.tm},
               {"threads", x.dispatchThreads},
               {"expert", expert},
               {"slot", slot},
               {"offsets", e.bufferExpr(e.argument(x.offsets), x.i32, true)},
               {"tileStart",
                e.bufferExpr(e.argument(x.tileStart), x.i32, true)},
               {"order", e.bufferExpr(e.argument(x.order), x.i32, true)},
               {"zero", zp}}));
  e.finishKernel(w.str(), GridDim(), GridDim(), GridDim(), x.dispatchThreads);
}

/// Declares offsets/tileStart/order and looks up this block's tile: `ex`
/// (expert), `row0`, `rows`.
void tileLookup(GroupEmitter &e, CodeWriter &w, const Experts &x) {
  for (auto [name, id] : {std::make_pair("offsets", x.offsets),
                          std::make_pair("tileStart", x.tileStart),
                          std::make_pair("order", x.order)})
    w.line(fill("const moec::gptr<const int32_t> ${name} = ${expr};",
                {{"name", name},
                 {"expr", e.bufferExpr(e.argument(id), x.i32, false)}}));
  w.line("int ex;");
  w.line("int64_t row0, rows;");
  w.line(fill("if (!moec::expertTile<${E}, ${TM}>(offsets, tileStart, "
              "blockIdx.y, ex, row0, rows))",
              {{"E", x.e}, {"TM", x.tm}}));
  w.line("  return;");
}

/// The GEMM tile call of one block: C [m, n] over `depth`, the block's
/// output tile at (`m0`, `n0`).
std::string gemmCall(const Experts &x, StringRef m0, StringRef n0, StringRef m,
                     int64_t n, StringRef depth, StringRef loadA,
                     StringRef loadB) {
  return fill("${gemm}<${TM}, ${TN}, ${TK}, ${threads}>(${m0}, ${n0}, ${m}, "
              "${n}, ${depth}, ${loadA}, ${loadB}, store);",
              {{"gemm", x.gemm},
               {"TM", x.tm},
               {"TN", x.tn},
               {"TK", x.tk},
               {"threads", x.threads},
               {"m0", m0},
               {"n0", n0},
               {"m", m},
               {"n", n},
               {"depth", depth},
               {"loadA", loadA},
               {"loadB", loadB}});
}

/// A grouped GEMM over row tiles of every expert: n output columns, k deep.
void groupedGemm(GroupEmitter &e, const Experts &x, StringRef phase,
                 int64_t n, int64_t k,
                 llvm::function_ref<void(CodeWriter &)> declare,
                 StringRef loadA, StringRef loadB, StringRef store) {
  e.beginKernel(phase);
  CodeWriter w;
  w.indent();
  declare(w);
  tileLookup(e, w, x);
  w.line("const auto store = " + store + ";");
  w.line(gemmCall(x, "0", fill("static_cast<int64_t>(blockIdx.x) * ${TN}",
                               {{"TN", x.tn}}),
                  "rows", n, std::to_string(k), loadA, loadB));
  e.finishKernel(w.str(), GridDim{SymDim(n), x.tn},
                 GridDim{x.assignments(), x.tm, x.e}, GridDim(), x.threads);
}

/// Declares `offsets` (each expert's first row) and `order` (the
/// assignments sorted by expert).
void declareSorted(GroupEmitter &e, CodeWriter &w, const Experts &x) {
  for (auto [name, id] : {std::make_pair("offsets", x.offsets),
                          std::make_pair("order", x.order)})
    w.line(fill("const moec::gptr<const int32_t> ${name} = ${expr};",
                {{"name", name},
                 {"expr", e.bufferExpr(e.argument(id), x.i32, false)}}));
}

/// declareSorted, the expert `ex` of this block (`axis`) and its rows
/// `row0` .. `row0 + rows - 1` of `order`.
void expertRows(GroupEmitter &e, CodeWriter &w, const Experts &x,
                StringRef axis) {
  declareSorted(e, w, x);
  w.line("const int ex = " + axis + ";");
  w.line("const int64_t row0 = offsets[ex], rows = offsets[ex + 1] - row0;");
}

/// A GEMM per expert over its rows: C_e [m, n] = sum over the expert's
/// rows of A(m, row) B(row, n); grid (n tiles, m tiles, experts).
void perExpertGemm(GroupEmitter &e, const Experts &x, StringRef phase,
                   int64_t m, int64_t n,
                   llvm::function_ref<void(CodeWriter &)> declare,
                   StringRef loadA, StringRef loadB, StringRef store) {
  e.beginKernel(phase);
  CodeWriter w;
  w.indent();
  declare(w);
  expertRows(e, w, x, "blockIdx.z");
  w.line("const auto store = " + store + ";");
  w.line(gemmCall(
      x, fill("static_cast<int64_t>(blockIdx.y) * ${TM}", {{"TM", x.tm}}),
      fill("static_cast<int64_t>(blockIdx.x) * ${TN}", {{"TN", x.tn}}),
      std::to_string(m), n, "rows", loadA, loadB));
  e.finishKernel(w.str(), GridDim{SymDim(n), x.tn}, GridDim{SymDim(m), x.tm},
                 GridDim{SymDim(x.e), 1}, x.threads);
}

/// Column sums per expert over its rows: out[e * n + c] = sum_rows load.
void perExpertColumnSums(GroupEmitter &e, const Experts &x, StringRef phase,
                         int64_t n,
                         llvm::function_ref<void(CodeWriter &)> declare,
                         StringRef load, StringRef out) {
  e.beginKernel(phase);
  CodeWriter w;
  w.indent();
  declare(w);
  expertRows(e, w, x, "blockIdx.y");
  w.line(fill("moec::columnSums(rows, ${n}, ${load}, [=](int64_t c, float s) "
              "{ ${out}[ex * ${n} + c] = s; });",
              {{"n", n}, {"load", load}, {"out", out}}));
  e.finishKernel(w.str(), GridDim{SymDim(n), 32}, GridDim{SymDim(x.e), 1},
                 GridDim(), 256);
}

/// The combine launch: per token, the sum over its kept assignments of the
/// rows of float scratch `rowsId` (named `rowsName`, in choice order),
/// handed as (element, value) to the epilogue `outputs` declares and
/// returns.
void combine(GroupEmitter &e, const Experts &x, StringRef rowsName,
             int64_t rowsId,
             llvm::function_ref<std::string(CodeWriter &)> outputs) {
  e.beginKernel("combine");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "tokens", x.tokens);
  std::string slot = e.declared(w, x.slot, false, "slot");
  declareScratch(e, w, rowsName, rowsId, x.f32, false);
  std::string epilogue = outputs(w);
  w.line(fill("moec::expertCombine<${K}, ${D}>(tokens, ${slot}, ${rows}, "
              "${epilogue});",
              {{"K", x.k},
               {"D", x.d},
               {"slot", slot},
               {"rows", rowsName},
               {"epilogue", epilogue}}));
  e.finishKernel(w.str(), GridDim{x.tokens * SymDim(x.d), 1024}, GridDim(),
                 GridDim(), 256);
}

//===----------------------------------------------------------------------===//
// The forward launches.
//===----------------------------------------------------------------------===//

/// hidden = act(x W1 + b1) [* up], and with GLU up = x W3 first.
void forwardHidden(GroupEmitter &e, const Experts &x, int64_t hidden,
                   int64_t up) {
  std::string gatherX = x.gatheredRows("xs", kNoFloats);
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
        declareScratch(e, w, "hidden", hidden, x.f32, true);
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
  int64_t hidden = e.scratch(x.f32, {x.assignments(), SymDim(x.f)});
  int64_t up = x.w3 ? e.scratch(x.f32, {x.assignments(), SymDim(x.f)}) : -1;
  int64_t yk = e.scratch(x.f32, {x.assignments(), SymDim(x.d)});
  dispatch(e, x, Value());
  forwardHidden(e, x, hidden, up);
  // yk = gate * (hidden W2 + b2), one row per assignment.
  groupedGemm(
      e, x, "down", x.d, x.f,
      [&](CodeWriter &w) {
        declareScratch(e, w, "hidden", hidden, x.f32, false);
        e.declare(w, "w2", x.w2, false);
        declareOptional(e, w, "b2", x.b2, x.t);
        e.declare(w, "gates", x.gates, false);
        declareScratch(e, w, "yk", yk, x.f32, true);
      },
      Experts::scratchRows("RowMajor", "hidden", x.f),
      x.expertWeight("RowMajor", "w2", x.f, x.d),
      fill("[=](int64_t m, int64_t n, float acc) { const int64_t a = "
           "order[row0 + m]; yk[a * ${D} + n] = gates[a] * (acc + (b2 ? "
           "moec::toFloat(b2[ex * ${D} + n]) : 0.0f)); }",
           {{"D", x.d}}));

  // Combine, with the group's residual add.
  combine(e, x, "yk", yk, [&](CodeWriter &w) {
    std::string epilogue = "[=](int64_t i, float y) {";
    if (e.escapes(op.getResult())) {
      std::string out = e.declared(w, op.getResult(), true, "y");
      epilogue += " " + out + "[i] = y;";
    }
    if (e.group().ops.size() > 1) {
      Operation *add = e.group().ops[1];
      Value other = add->getOperand(0) == op.getResult() ? add->getOperand(1)
                                                         : add->getOperand(0);
      std::string res = e.declared(w, other, false, "res");
      std::string out = e.declared(w, add->getResult(0), true, "sum");
      epilogue += " " + out + "[i] = moec::toFloat(" + res + "[i]) + y;";
    }
    return epilogue + " }";
  });
  return success();
}

//===----------------------------------------------------------------------===//
// The gradient, by phase.
//===----------------------------------------------------------------------===//

namespace {

/// The float scratch of the gradient, `[assignments, F]` unless noted, and
/// the op's results.
struct GradState {
  int64_t pre, up, g, hidden, da, du, dxk /* [assignments, d] */;
  Value dy, dgates, dx, dw1, db1, dw2, db2, dw3;
};

GradState gradState(GroupEmitter &e, const Experts &x, ExpertFfnGradOp op) {
  SymShape hiddenShape{x.assignments(), SymDim(x.f)};
  GradState s;
  s.pre = e.scratch(x.f32, hiddenShape);
  s.up = x.w3 ? e.scratch(x.f32, hiddenShape) : -1;
  s.g = e.scratch(x.f32, hiddenShape);
  s.hidden = e.scratch(x.f32, hiddenShape);
  s.da = e.scratch(x.f32, hiddenShape);
  s.du = x.w3 ? e.scratch(x.f32, hiddenShape) : -1;
  s.dxk = e.scratch(x.f32, {x.assignments(), SymDim(x.d)});
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
  std::string gatherX = x.gatheredRows("xs", kNoFloats);
  for (auto [name, weight, bias, target] :
       {std::make_tuple("pre", x.w1, x.b1, s.pre),
        std::make_tuple("up3", x.w3, Value(), s.up)}) {
    if (!weight)
      continue;
    groupedGemm(
        e, x, name, x.f, x.d,
        [&](CodeWriter &w) {
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
      x.gatheredRows("dy", kNoFloats), x.expertWeight("ColMajor", "w2", x.f, x.d),
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
    return id < 0 ? std::string("moec::gptr<float>()")
                  : e.bufferExpr(e.argument(id), x.f32, true);
  };
  w.line(fill(
      "moec::expertHiddenGrad<${F}, ${D}, ${K}, ${glu}, ${t}>(offsets, ${E}, "
      "order, ${gates}, ${pre}, ${up}, ${g}, ${dy}, ${b2}, ${dgates}, "
      "${hidden}, ${da}, ${du}, [](float v) { return "
      "moec::activate<${act}>(v); }, [](float v) { return "
      "moec::activateGrad<${act}>(v); }, 8);",
      {{"F", x.f},
       {"D", x.d},
       {"K", x.k},
       {"glu", static_cast<bool>(x.w3)},
       {"t", x.t},
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
          declareScratch(e, w, "hidden", s.hidden, x.f32, false);
          e.declare(w, "dy", s.dy, false);
          e.declare(w, "gates", x.gates, false);
          e.declare(w, "dw", s.dw2, true);
        },
        Experts::scratchRows("ColMajor", "hidden", x.f),
        x.gatheredRows("dy", "gates"), store(x.f, x.d));
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
        [&](CodeWriter &w) {
          e.declare(w, "xs", x.x, false);
          declareScratch(e, w, "src", source, x.f32, false);
          e.declare(w, "dw", result, true);
        },
        fill("moec::GatherCols<${t}>{xs, order, row0, ${K}, ${D}}",
             {{"t", x.t}, {"K", x.k}, {"D", x.d}}),
        Experts::scratchRows("RowMajor", "src", x.f), store(x.d, x.f));
  }
  if (s.db1 && e.escapes(s.db1))
    perExpertColumnSums(
        e, x, "db1", x.f,
        [&](CodeWriter &w) {
          declareScratch(e, w, "da", s.da, x.f32, false);
          e.declare(w, "db", s.db1, true);
        },
        fill("[=](int64_t r, int64_t c) { return da[(row0 + r) * ${F} + c]; }",
             {{"F", x.f}}),
        "db");
}

/// dx: per assignment da W1^T (+ du W3^T), then the combine per token.
void inputGradient(GroupEmitter &e, const Experts &x, const GradState &s) {
  for (auto [name, weight, source, accumulate] :
       {std::make_tuple("dxk", x.w1, s.da, false),
        std::make_tuple("dxk3", x.w3, s.du, true)}) {
    if (!weight)
      continue;
    groupedGemm(
        e, x, name, x.d, x.f,
        [&](CodeWriter &w) {
          declareScratch(e, w, "src", source, x.f32, false);
          e.declare(w, "w", weight, false);
          declareScratch(e, w, "dxk", s.dxk, x.f32, true);
        },
        Experts::scratchRows("RowMajor", "src", x.f),
        x.expertWeight("ColMajor", "w", x.d, x.f),
        fill("[=](int64_t m, int64_t n, float acc) { const int64_t i = "
             "static_cast<int64_t>(order[row0 + m]) * ${D} + n; dxk[i] = "
             "${add}acc; }",
             {{"D", x.d}, {"add", accumulate ? "dxk[i] + " : ""}}));
  }
  combine(e, x, "dxk", s.dxk, [&](CodeWriter &w) {
    std::string dx = e.declared(w, s.dx, true, "dx");
    return "[=](int64_t i, float v) { " + dx + "[i] = v; }";
  });
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
