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
#include "llvm/Support/FormatVariadic.h"

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

  std::string act_() const { return deviceEnum(act); }
};

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
  x.tm = em.tile(em.tiles().getTileM());
  x.tn = em.tile(em.tiles().getTileN());
  x.tk = em.tile(em.tiles().getTileK());
  x.threads = em.tile(em.tiles().getThreads());
  x.dispatchThreads = em.tile(em.tiles().getDispatchThreads());
  MLIRContext *ctx = op->getContext();
  x.f32 = Float32Type::get(ctx);
  x.t = cudaType(cast<TensorType>(x.x.getType()).getElementType());
  x.gemm = gemmTileFunction(x.x, x.w1, x.tm, x.tn, x.tk, x.threads).str();
  x.i32 = IntegerType::get(ctx, 32);
  x.offsets = em.scratch(x.i32, {SymDim(x.e + 1)});
  x.tileStart = em.scratch(x.i32, {SymDim(x.e + 1)});
  x.order = em.scratch(x.i32, {x.tokens * SymDim(x.k)});
  return x;
}

/// Declares `name` bound to `v`'s buffer, or a null pointer of type `t`.
void declareOptional(GroupEmitter &e, CodeWriter &w, StringRef name, Value v,
                     StringRef t) {
  if (v)
    e.declare(w, name, v, false);
  else
    w.line(llvm::formatv("const moec::gptr<const {0}> {1} = moec::gptr<const "
                         "{0}>();",
                         t, name));
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
  w.line(llvm::formatv(
      "moec::expertDispatch<{0}, {1}, {2}, {3}>(tokens, {4}, {5}, {6}, {7}, "
      "{8}, {9});",
      x.e, x.k, x.tm, x.dispatchThreads, expert, slot,
      e.bufferExpr(e.argument(x.offsets), x.i32, true),
      e.bufferExpr(e.argument(x.tileStart), x.i32, true),
      e.bufferExpr(e.argument(x.order), x.i32, true), zp));
  e.finishKernel(w.str(), GridDim(), GridDim(), GridDim(), x.dispatchThreads);
}

/// Declares offsets/tileStart/order and looks up this block's tile: `ex`
/// (expert), `row0`, `rows`.
void tileLookup(GroupEmitter &e, CodeWriter &w, const Experts &x) {
  w.line(llvm::formatv("const moec::gptr<const int32_t> offsets = {0};",
                       e.bufferExpr(e.argument(x.offsets), x.i32, false)));
  w.line(llvm::formatv("const moec::gptr<const int32_t> tileStart = {0};",
                       e.bufferExpr(e.argument(x.tileStart), x.i32, false)));
  w.line(llvm::formatv("const moec::gptr<const int32_t> order = {0};",
                       e.bufferExpr(e.argument(x.order), x.i32, false)));
  w.line("int ex;");
  w.line("int64_t row0, rows;");
  w.line(llvm::formatv("if (!moec::expertTile<{0}, {1}>(offsets, tileStart, "
                       "blockIdx.y, ex, row0, rows))",
                       x.e, x.tm));
  w.line("  return;");
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
  w.line(llvm::formatv("const auto store = {0};", store));
  w.line(llvm::formatv("{8}<{0}, {1}, {2}, {3}>(0, "
                       "static_cast<int64_t>(blockIdx.x) * {1}, rows, {4}, {5}, "
                       "{6}, {7}, store);",
                       x.tm, x.tn, x.tk, x.threads, n, k, loadA, loadB, x.gemm));
  e.finishKernel(w.str(), GridDim{SymDim(n), x.tn},
                 GridDim{x.tokens * SymDim(x.k), x.tm, x.e}, GridDim(),
                 x.threads);
}

/// Declares `offsets` (each expert's first row) and `order` (the
/// assignments sorted by expert).
void declareSorted(GroupEmitter &e, CodeWriter &w, const Experts &x) {
  w.line(llvm::formatv("const moec::gptr<const int32_t> offsets = {0};",
                       e.bufferExpr(e.argument(x.offsets), x.i32, false)));
  w.line(llvm::formatv("const moec::gptr<const int32_t> order = {0};",
                       e.bufferExpr(e.argument(x.order), x.i32, false)));
}

/// declareSorted, the expert `ex` of this block (`axis`) and its rows
/// `row0` .. `row0 + rows - 1` of `order`.
void expertRows(GroupEmitter &e, CodeWriter &w, const Experts &x,
                StringRef axis) {
  declareSorted(e, w, x);
  w.line(llvm::formatv("const int ex = {0};", axis));
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
  w.line(llvm::formatv("const auto store = {0};", store));
  w.line(llvm::formatv("{8}<{0}, {1}, {2}, {3}>(static_cast<int64_t>("
                       "blockIdx.y) * {0}, static_cast<int64_t>(blockIdx.x) * "
                       "{1}, {4}, {5}, rows, {6}, {7}, store);",
                       x.tm, x.tn, x.tk, x.threads, m, n, loadA, loadB, x.gemm));
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
  w.line(llvm::formatv("moec::columnSums(rows, {0}, {1}, [=](int64_t c, float "
                       "s) {{ {2}[ex * {0} + c] = s; });",
                       n, load, out));
  e.finishKernel(w.str(), GridDim{SymDim(n), 32}, GridDim{SymDim(x.e), 1},
                 GridDim(), 256);
}

} // namespace

LogicalResult mlir::moe::cuda::emitExpertsGroup(GroupEmitter &e) {
  auto op = cast<ExpertFfnOp>(e.first());
  Experts x = expertsOf(e, op);
  SymDim rowsAll = x.tokens * SymDim(x.k);
  int64_t hidden = e.scratch(x.f32, {rowsAll, SymDim(x.f)});
  int64_t up = x.w3 ? e.scratch(x.f32, {rowsAll, SymDim(x.f)}) : -1;
  int64_t yk = e.scratch(x.f32, {rowsAll, SymDim(x.d)});
  dispatch(e, x, Value());

  std::string gatherX =
      llvm::formatv("moec::GatherRows<{2}>{{xs, order, row0, {0}, {1}, "
                    "moec::gptr<const float>()}",
                    x.k, x.d, x.t);
  if (x.w3) {
    groupedGemm(
        e, x, "up3", x.f, x.d,
        [&](CodeWriter &w) {
          e.declare(w, "xs", x.x, false);
          e.declare(w, "w3", x.w3, false);
          w.line("const moec::gptr<float> up = " +
                 e.bufferExpr(e.argument(up), x.f32, true) + ";");
        },
        gatherX,
        llvm::formatv("moec::RowMajor<{2}>{{w3 + static_cast<int64_t>(ex) * "
                      "{0}, {1}}",
                      x.d * x.f, x.f, x.t)
            .str(),
        llvm::formatv("[=](int64_t m, int64_t n, float acc) {{ up[(row0 + m) * "
                      "{0} + n] = acc; }",
                      x.f)
            .str());
  }
  groupedGemm(
      e, x, "up", x.f, x.d,
      [&](CodeWriter &w) {
        e.declare(w, "xs", x.x, false);
        e.declare(w, "w1", x.w1, false);
        declareOptional(e, w, "b1", x.b1, x.t);
        w.line("const moec::gptr<const float> up = " +
               (x.w3 ? e.bufferExpr(e.argument(up), x.f32, false)
                     : std::string("moec::gptr<const float>()")) +
               ";");
        w.line("const moec::gptr<float> hidden = " +
               e.bufferExpr(e.argument(hidden), x.f32, true) + ";");
      },
      gatherX,
      llvm::formatv("moec::RowMajor<{2}>{{w1 + static_cast<int64_t>(ex) * "
                    "{0}, {1}}",
                    x.d * x.f, x.f, x.t)
          .str(),
      llvm::formatv("[=](int64_t m, int64_t n, float acc) {{ const int64_t i = "
                    "(row0 + m) * {0} + n; const float a = acc + (b1 ? "
                    "moec::toFloat(b1[ex * {0} + n]) : 0.0f); hidden[i] = moec::activate<{1}>(a) * (up "
                    "? up[i] : 1.0f); }",
                    x.f, x.act_())
          .str());
  groupedGemm(
      e, x, "down", x.d, x.f,
      [&](CodeWriter &w) {
        w.line("const moec::gptr<const float> hidden = " +
               e.bufferExpr(e.argument(hidden), x.f32, false) + ";");
        e.declare(w, "w2", x.w2, false);
        declareOptional(e, w, "b2", x.b2, x.t);
        e.declare(w, "gates", x.gates, false);
        w.line("const moec::gptr<float> yk = " +
               e.bufferExpr(e.argument(yk), x.f32, true) + ";");
      },
      llvm::formatv("moec::RowMajor<float>{{hidden + row0 * {0}, {0}}", x.f)
          .str(),
      llvm::formatv("moec::RowMajor<{2}>{{w2 + static_cast<int64_t>(ex) * "
                    "{0}, {1}}",
                    x.f * x.d, x.d, x.t)
          .str(),
      llvm::formatv("[=](int64_t m, int64_t n, float acc) {{ const int64_t a = "
                    "order[row0 + m]; yk[a * {0} + n] = gates[a] * (acc + (b2 ? "
                    "moec::toFloat(b2[ex * {0} + n]) : 0.0f)); }",
                    x.d)
          .str());

  // Combine, with the group's residual add.
  e.beginKernel("combine");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "tokens", x.tokens);
  std::string slot = e.declared(w, x.slot, false, "slot");
  w.line("const moec::gptr<const float> yk = " +
         e.bufferExpr(e.argument(yk), x.f32, false) + ";");
  std::string epilogue;
  {
    llvm::raw_string_ostream os(epilogue);
    os << "[=](int64_t i, float y) {";
    if (e.escapes(op.getResult())) {
      std::string out = e.declared(w, op.getResult(), true, "y");
      os << " " << out << "[i] = y;";
    }
    if (e.group().ops.size() > 1) {
      Operation *add = e.group().ops[1];
      if (!isa<arith::AddFOp>(add))
        return add->emitOpError("cannot follow an expert FFN in its kernel");
      Value other = add->getOperand(0) == op.getResult() ? add->getOperand(1)
                                                         : add->getOperand(0);
      std::string res = e.declared(w, other, false, "res");
      std::string out = e.declared(w, add->getResult(0), true, "sum");
      os << " " << out << "[i] = moec::toFloat(" << res << "[i]) + y;";
    }
    os << " }";
  }
  w.line(llvm::formatv("moec::expertCombine<{0}, {1}>(tokens, {2}, yk, {3});",
                       x.k, x.d, slot, epilogue));
  e.finishKernel(w.str(), GridDim{x.tokens * SymDim(x.d), 1024}, GridDim(),
                 GridDim(), 256);
  return success();
}

LogicalResult mlir::moe::cuda::emitExpertsGradGroup(GroupEmitter &e) {
  auto op = cast<ExpertFfnGradOp>(e.first());
  Experts x = expertsOf(e, op);
  SymDim rowsAll = x.tokens * SymDim(x.k);
  SymShape hiddenShape{rowsAll, SymDim(x.f)};
  int64_t pre = e.scratch(x.f32, hiddenShape);
  int64_t up = x.w3 ? e.scratch(x.f32, hiddenShape) : -1;
  int64_t g = e.scratch(x.f32, hiddenShape);
  int64_t hidden = e.scratch(x.f32, hiddenShape);
  int64_t da = e.scratch(x.f32, hiddenShape);
  int64_t du = x.w3 ? e.scratch(x.f32, hiddenShape) : -1;
  int64_t dxk = e.scratch(x.f32, {rowsAll, SymDim(x.d)});
  Value dgates = op.getDgates();
  // Results: dx, dgates, then one per weight in operand order.
  auto dweights = op.getDweights();
  unsigned wi = 0;
  Value dw1 = dweights[wi++];
  Value db1 = x.b1 ? dweights[wi++] : Value();
  Value dw2 = dweights[wi++];
  Value db2 = x.b2 ? dweights[wi++] : Value();
  Value dw3 = x.w3 ? dweights[wi++] : Value();
  std::string buf = "moec::gptr<const float>()";
  auto in = [&](int64_t id) { return e.bufferExpr(e.argument(id), x.f32, false); };
  auto out = [&](int64_t id) { return e.bufferExpr(e.argument(id), x.f32, true); };

  dispatch(e, x, dgates);
  std::string gatherX =
      llvm::formatv("moec::GatherRows<{2}>{{xs, order, row0, {0}, {1}, "
                    "moec::gptr<const float>()}",
                    x.k, x.d, x.t);
  auto declX = [&](CodeWriter &w) {
    e.declare(w, "xs", x.x, false);
  };
  // Recompute the pre-activations (and the GLU up branch).
  for (auto [name, weight, bias, target] :
       {std::make_tuple("pre", x.w1, x.b1, pre),
        std::make_tuple("up3", x.w3, Value(), up)}) {
    if (!weight)
      continue;
    groupedGemm(
        e, x, name, x.f, x.d,
        [&](CodeWriter &w) {
          declX(w);
          e.declare(w, "w", weight, false);
          declareOptional(e, w, "b", bias, x.t);
          w.line("const moec::gptr<float> target = " + out(target) + ";");
        },
        gatherX,
        llvm::formatv("moec::RowMajor<{2}>{{w + static_cast<int64_t>(ex) * "
                      "{0}, {1}}",
                      x.d * x.f, x.f, x.t)
            .str(),
        llvm::formatv("[=](int64_t m, int64_t n, float acc) {{ target[(row0 + "
                      "m) * {0} + n] = acc + (b ? moec::toFloat(b[ex * {0} + n]) : 0.0f); }",
                      x.f)
            .str());
  }
  // G = dy W2^T, gathered by token.
  groupedGemm(
      e, x, "g", x.f, x.d,
      [&](CodeWriter &w) {
        e.declare(w, "dy", op.getDy(), false);
        e.declare(w, "w2", x.w2, false);
        w.line("const moec::gptr<float> g = " + out(g) + ";");
      },
      llvm::formatv("moec::GatherRows<{2}>{{dy, order, row0, {0}, {1}, "
                    "moec::gptr<const float>()}",
                    x.k, x.d, x.t)
          .str(),
      llvm::formatv("moec::ColMajor<{2}>{{w2 + static_cast<int64_t>(ex) * "
                    "{0}, {1}}",
                    x.f * x.d, x.d, x.t)
          .str(),
      llvm::formatv("[=](int64_t m, int64_t n, float acc) {{ g[(row0 + m) * "
                    "{0} + n] = acc; }",
                    x.f)
          .str());
  // Hidden-layer gradient rows and dgates.
  {
    e.beginKernel("hidden");
    CodeWriter w;
    w.indent();
    declareSorted(e, w, x);
    std::string gates = e.declared(w, x.gates, false, "gates");
    std::string dy = e.declared(w, op.getDy(), false, "dy");
    std::string b2 = x.b2 ? e.declared(w, x.b2, false, "b2")
                          : "moec::gptr<const " + x.t + ">()";
    std::string dg = e.declared(w, dgates, true, "dgates");
    w.line(llvm::formatv(
        "moec::expertHiddenGrad<{0}, {1}, {2}, {3}, {16}>(offsets, {4}, order, "
        "{5}, "
        "{6}, {7}, {8}, {9}, {10}, {11}, {12}, {13}, {14}, [](float v) {{ "
        "return moec::activate<{15}>(v); }, [](float v) {{ return "
        "moec::activateGrad<{15}>(v); }, 8);",
        x.f, x.d, x.k, x.w3 ? "true" : "false", x.e, gates, in(pre),
        x.w3 ? in(up) : buf, in(g), dy, b2, dg, out(hidden), out(da),
        x.w3 ? out(du) : std::string("moec::gptr<float>()"), x.act_(), x.t));
    e.finishKernel(w.str(), GridDim{rowsAll, 8}, GridDim(), GridDim(), 256);
  }
  // Weight gradients, one GEMM per expert over its rows.
  auto declOrderless = [&](CodeWriter &) {};
  (void)declOrderless;
  if (e.escapes(dw2))
    perExpertGemm(
        e, x, "dw2", x.f, x.d,
        [&](CodeWriter &w) {
          w.line("const moec::gptr<const float> hidden = " + in(hidden) + ";");
          e.declare(w, "dy", op.getDy(), false);
          e.declare(w, "gates", x.gates, false);
          e.declare(w, "dw", dw2, true);
        },
        llvm::formatv("moec::ColMajor<float>{{hidden + row0 * {0}, {0}}", x.f)
            .str(),
        llvm::formatv("moec::GatherRows<{2}>{{dy, order, row0, {0}, {1}, "
                      "gates}",
                      x.k, x.d, x.t)
            .str(),
        llvm::formatv("[=](int64_t m, int64_t n, float acc) {{ dw[(ex * {0} + "
                      "m) * {1} + n] = acc; }",
                      x.f, x.d)
            .str());
  if (db2 && e.escapes(db2))
    perExpertColumnSums(
        e, x, "db2", x.d,
        [&](CodeWriter &w) {
          e.declare(w, "dy", op.getDy(), false);
          e.declare(w, "gates", x.gates, false);
          e.declare(w, "db", db2, true);
        },
        llvm::formatv("[=](int64_t r, int64_t c) {{ const int64_t a = "
                      "order[row0 + r]; return gates[a] * moec::toFloat(dy[(a / "
                      "{0}) * {1} + c]); }",
                      x.k, x.d)
            .str(),
        "db");
  for (auto [name, result, source] :
       {std::make_tuple("dw1", dw1, da), std::make_tuple("dw3", dw3, du)}) {
    if (!result || !e.escapes(result))
      continue;
    perExpertGemm(
        e, x, name, x.d, x.f,
        [&](CodeWriter &w) {
          declX(w);
          w.line("const moec::gptr<const float> src = " + in(source) + ";");
          e.declare(w, "dw", result, true);
        },
        llvm::formatv("moec::GatherCols<{2}>{{xs, order, row0, {0}, {1}}",
                      x.k, x.d, x.t)
            .str(),
        llvm::formatv("moec::RowMajor<float>{{src + row0 * {0}, {0}}", x.f)
            .str(),
        llvm::formatv("[=](int64_t m, int64_t n, float acc) {{ dw[(ex * {0} + "
                      "m) * {1} + n] = acc; }",
                      x.d, x.f)
            .str());
  }
  if (db1 && e.escapes(db1))
    perExpertColumnSums(
        e, x, "db1", x.f,
        [&](CodeWriter &w) {
          w.line("const moec::gptr<const float> da = " + in(da) + ";");
          e.declare(w, "db", db1, true);
        },
        llvm::formatv("[=](int64_t r, int64_t c) {{ return da[(row0 + r) * {0} "
                      "+ c]; }",
                      x.f)
            .str(),
        "db");
  if (!e.escapes(op.getDx()))
    return success();
  // dx rows per assignment: da W1^T (+ du W3^T), then the combine.
  for (auto [name, weight, source, accumulate] :
       {std::make_tuple("dxk", x.w1, da, false),
        std::make_tuple("dxk3", x.w3, du, true)}) {
    if (!weight)
      continue;
    groupedGemm(
        e, x, name, x.d, x.f,
        [&](CodeWriter &w) {
          w.line("const moec::gptr<const float> src = " + in(source) + ";");
          e.declare(w, "w", weight, false);
          w.line("const moec::gptr<float> dxk = " + out(dxk) + ";");
        },
        llvm::formatv("moec::RowMajor<float>{{src + row0 * {0}, {0}}", x.f)
            .str(),
        llvm::formatv("moec::ColMajor<{2}>{{w + static_cast<int64_t>(ex) * "
                      "{0}, {1}}",
                      x.d * x.f, x.f, x.t)
            .str(),
        llvm::formatv("[=](int64_t m, int64_t n, float acc) {{ const int64_t i "
                      "= static_cast<int64_t>(order[row0 + m]) * {0} + n; "
                      "dxk[i] = {1}acc; }",
                      x.d, accumulate ? "dxk[i] + " : "")
            .str());
  }
  e.beginKernel("combine");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "tokens", x.tokens);
  std::string slot = e.declared(w, x.slot, false, "slot");
  std::string dx = e.declared(w, op.getDx(), true, "dx");
  w.line(llvm::formatv("moec::expertCombine<{0}, {1}>(tokens, {2}, {3}, "
                       "[=](int64_t i, float v) {{ {4}[i] = v; });",
                       x.k, x.d, slot, in(dxk), dx));
  e.finishKernel(w.str(), GridDim{x.tokens * SymDim(x.d), 1024}, GridDim(),
                 GridDim(), 256);
  return success();
}
