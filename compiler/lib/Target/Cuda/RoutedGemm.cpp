//===- RoutedGemm.cpp - grouped GEMMs over routed assignments -------------===//

#include "RoutedGemm.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cuda;

std::string RoutedGemm::expertWeight(StringRef layout, StringRef ptr,
                                     int64_t rows, int64_t ld) const {
  return fill("moec::${layout}<${t}>{${ptr} + static_cast<int64_t>(ex) * "
              "${stride}, ${ld}}",
              {{"layout", layout},
               {"t", t},
               {"ptr", ptr},
               {"stride", rows * ld},
               {"ld", ld}});
}

std::string RoutedGemm::gatheredRows(StringRef ptr, int64_t div, int64_t width,
                                     StringRef scale) const {
  return fill("moec::GatherRows<${t}>{${ptr}, order, row0, ${div}, ${width}, "
              "${scale}}",
              {{"t", t},
               {"ptr", ptr},
               {"div", div},
               {"width", width},
               {"scale", scale}});
}

std::string RoutedGemm::gatheredCols(StringRef ptr, int64_t div,
                                     int64_t width) const {
  return fill("moec::GatherCols<${t}>{${ptr}, order, row0, ${div}, ${width}}",
              {{"t", t}, {"ptr", ptr}, {"div", div}, {"width", width}});
}

std::string RoutedGemm::scratchRows(StringRef layout, StringRef ptr,
                                    int64_t ld) const {
  return fill("moec::${layout}<${t}>{${ptr} + row0 * ${ld}, ${ld}}",
              {{"layout", layout},
               {"t", cudaType(operandType)},
               {"ptr", ptr},
               {"ld", ld}});
}

RoutedGemm mlir::moe::cuda::routedGemm(GroupEmitter &e, Value expert,
                                       Value slot, SymDim tokens, Value a,
                                       Value b) {
  RoutedGemm r;
  r.expert = expert;
  r.slot = slot;
  r.tokens = tokens;
  r.k = cast<RankedTensorType>(expert.getType()).getShape().back();
  r.e = cast<RankedTensorType>(b.getType()).getDimSize(0);
  TilesAttr tiles = e.tiles();
  r.dispatchThreads = e.tile(tiles.getDispatchThreads());
  MLIRContext *ctx = expert.getContext();
  r.f32 = Float32Type::get(ctx);
  r.i32 = IntegerType::get(ctx, 32);
  r.t = storageTypeOf(a);
  r.gemm = gemmTileFor(a, b, e.tile(tiles.getTileM()), e.tile(tiles.getTileN()),
                       e.tile(tiles.getTileK()), e.tile(tiles.getThreads()));
  r.operandType = r.gemm.arithmetic == TileArithmetic::Bf16
                      ? Type(BFloat16Type::get(ctx))
                      : r.f32;
  r.offsets = e.scratch(r.i32, {SymDim(r.e + 1)});
  r.tileStart = e.scratch(r.i32, {SymDim(r.e + 1)});
  r.order = e.scratch(r.i32, {r.assignments()});
  return r;
}

void mlir::moe::cuda::declareOptional(GroupEmitter &e, CodeWriter &w,
                                      StringRef name, Value v, StringRef t) {
  if (v)
    e.declare(w, name, v, false);
  else
    w.line(fill("const moec::gptr<const ${t}> ${name} = moec::gptr<const "
                "${t}>();",
                {{"t", t}, {"name", name}}));
}

void mlir::moe::cuda::declareScratch(GroupEmitter &e, CodeWriter &w,
                                     StringRef name, int64_t id, Type type,
                                     bool writable) {
  w.line(fill("const moec::gptr<${const}${t}> ${name} = ${expr};",
              {{"const", writable ? "" : "const "},
               {"t", cudaType(type)},
               {"name", name},
               {"expr", e.bufferExpr(e.argument(id), type, writable)}}));
}

void mlir::moe::cuda::dispatch(GroupEmitter &e, const RoutedGemm &r,
                               Value zero) {
  e.beginKernel("dispatch");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "tokens", r.tokens);
  std::string expert = e.declared(w, r.expert, false, "expert");
  std::string slot = e.declared(w, r.slot, false, "slot");
  // Without gradients to zero, a null pointer in the same argument slot: the
  // forward's dispatch is then the backward's kernel.
  std::string zp = zero
                       ? e.declared(w, zero, true, "zero")
                       : e.declaredNull(w, Float32Type::get(r.i32.getContext()),
                                        true, "zero");
  w.line(
      fill("moec::expertDispatch<${E}, ${K}, ${TM}, ${threads}>(tokens, "
           "${expert}, ${slot}, ${offsets}, ${tileStart}, ${order}, "
           "${zero});",
           {{"E", r.e},
            {"K", r.k},
            {"TM", r.gemm.tm},
            {"threads", r.dispatchThreads},
            {"expert", expert},
            {"slot", slot},
            {"offsets", e.bufferExpr(e.argument(r.offsets), r.i32, true)},
            {"tileStart", e.bufferExpr(e.argument(r.tileStart), r.i32, true)},
            {"order", e.bufferExpr(e.argument(r.order), r.i32, true)},
            {"zero", zp}}));
  e.finishKernel(w.str(), GridDim(), GridDim(), GridDim(), r.dispatchThreads);
}

namespace {

/// Declares offsets/tileStart/order and looks up this block's tile: `ex`
/// (expert), `row0`, `rows`.
void tileLookup(GroupEmitter &e, CodeWriter &w, const RoutedGemm &r) {
  for (auto [name, id] : {std::make_pair("offsets", r.offsets),
                          std::make_pair("tileStart", r.tileStart),
                          std::make_pair("order", r.order)})
    w.line(fill("const moec::gptr<const int32_t> ${name} = ${expr};",
                {{"name", name},
                 {"expr", e.bufferExpr(e.argument(id), r.i32, false)}}));
  w.line("int ex;");
  w.line("int64_t row0, rows;");
  w.line(fill("if (!moec::expertTile<${E}, ${TM}>(offsets, tileStart, "
              "blockIdx.y, ex, row0, rows))",
              {{"E", r.e}, {"TM", r.gemm.tm}}));
  w.line("  return;");
}

/// Writes the GEMM call of one block: C [m, n] over `depth`, the block's
/// output tile at (`m0`, `n0`). With `fewRows`, see writeGemmTileCall.
void gemmCall(CodeWriter &w, const RoutedGemm &r, StringRef m0, StringRef n0,
              StringRef m, int64_t n, StringRef depth, StringRef loadA,
              StringRef loadB, bool fewRows = false) {
  std::string operands =
      fill("${n0}, ${m}, ${n}, ${depth}, ${loadA}, ${loadB}, store",
           {{"n0", n0},
            {"m", m},
            {"n", n},
            {"depth", depth},
            {"loadA", loadA},
            {"loadB", loadB}});
  writeGemmTileCall(w, r.gemm, m0, m, operands, fewRows);
}

/// declareSorted, the expert `ex` of this block (`axis`) and its rows
/// `row0` .. `row0 + rows - 1` of `order`.
void expertRows(GroupEmitter &e, CodeWriter &w, const RoutedGemm &r,
                StringRef axis) {
  declareSorted(e, w, r);
  w.line("const int ex = " + axis + ";");
  w.line("const int64_t row0 = offsets[ex], rows = offsets[ex + 1] - row0;");
}

} // namespace

void mlir::moe::cuda::groupedGemm(GroupEmitter &e, const RoutedGemm &r,
                                  StringRef phase, int64_t n, int64_t k,
                                  llvm::function_ref<void(CodeWriter &)> declare,
                                  StringRef loadA, StringRef loadB,
                                  StringRef store) {
  e.beginKernel(phase);
  CodeWriter w;
  w.indent();
  declare(w);
  tileLookup(e, w, r);
  w.line("const auto store = " + store.str() + ";");
  // In decoding, an expert has a few tokens: its blocks of at most
  // kGemmRowsMax rows stream the expert's weight once (gemmRows).
  gemmCall(
      w, r, "0",
      fill("static_cast<int64_t>(blockIdx.x) * ${TN}", {{"TN", r.gemm.tn}}),
      "rows", n, std::to_string(k), loadA, loadB, decodes(e.first()));
  e.finishKernel(w.str(), GridDim{SymDim(n), r.gemm.tn},
                 GridDim{r.assignments(), r.gemm.tm, r.e}, GridDim(),
                 r.gemm.threads);
}

void mlir::moe::cuda::declareSorted(GroupEmitter &e, CodeWriter &w,
                                    const RoutedGemm &r) {
  for (auto [name, id] : {std::make_pair("offsets", r.offsets),
                          std::make_pair("order", r.order)})
    w.line(fill("const moec::gptr<const int32_t> ${name} = ${expr};",
                {{"name", name},
                 {"expr", e.bufferExpr(e.argument(id), r.i32, false)}}));
}

void mlir::moe::cuda::perExpertGemm(
    GroupEmitter &e, const RoutedGemm &r, StringRef phase, int64_t m,
    int64_t n, llvm::function_ref<void(CodeWriter &)> declare, StringRef loadA,
    StringRef loadB, StringRef store) {
  e.beginKernel(phase);
  CodeWriter w;
  w.indent();
  declare(w);
  expertRows(e, w, r, "blockIdx.z");
  w.line("const auto store = " + store.str() + ";");
  gemmCall(
      w, r,
      fill("static_cast<int64_t>(blockIdx.y) * ${TM}", {{"TM", r.gemm.tm}}),
      fill("static_cast<int64_t>(blockIdx.x) * ${TN}", {{"TN", r.gemm.tn}}),
      std::to_string(m), n, "rows", loadA, loadB);
  e.finishKernel(w.str(), GridDim{SymDim(n), r.gemm.tn},
                 GridDim{SymDim(m), r.gemm.tm}, GridDim{SymDim(r.e), 1},
                 r.gemm.threads);
}

void mlir::moe::cuda::perExpertColumnSums(
    GroupEmitter &e, const RoutedGemm &r, StringRef phase, int64_t n,
    llvm::function_ref<void(CodeWriter &)> declare, StringRef load,
    StringRef out) {
  e.beginKernel(phase);
  CodeWriter w;
  w.indent();
  declare(w);
  expertRows(e, w, r, "blockIdx.y");
  w.line(fill("moec::columnSums(rows, ${n}, ${load}, [=](int64_t c, float s) "
              "{ ${out}[ex * ${n} + c] = s; });",
              {{"n", n}, {"load", load}, {"out", out}}));
  e.finishKernel(w.str(), GridDim{SymDim(n), 32}, GridDim{SymDim(r.e), 1},
                 GridDim(), 256);
}

void mlir::moe::cuda::combine(
    GroupEmitter &e, const RoutedGemm &r, int64_t width, StringRef rowsName,
    int64_t rowsId, llvm::function_ref<std::string(CodeWriter &)> outputs) {
  e.beginKernel("combine");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "tokens", r.tokens);
  std::string slot = e.declared(w, r.slot, false, "slot");
  declareScratch(e, w, rowsName, rowsId, r.f32, false);
  std::string epilogue = outputs(w);
  w.line(fill("moec::expertCombine<${K}, ${D}>(tokens, ${slot}, ${rows}, "
              "${epilogue});",
              {{"K", r.k},
               {"D", width},
               {"slot", slot},
               {"rows", rowsName},
               {"epilogue", epilogue}}));
  e.finishKernel(w.str(), GridDim{r.tokens * SymDim(width), 1024}, GridDim(),
                 GridDim(), 256);
}

void mlir::moe::cuda::combineDropped(
    GroupEmitter &e, const RoutedGemm &r, int64_t width,
    llvm::function_ref<std::string(CodeWriter &)> outputs) {
  e.beginKernel("dropped");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "tokens", r.tokens);
  std::string slot = e.declared(w, r.slot, false, "slot");
  std::string epilogue = outputs(w);
  w.line(fill("moec::expertDropped<${D}>(tokens, ${slot}, ${epilogue});",
              {{"D", width}, {"slot", slot}, {"epilogue", epilogue}}));
  e.finishKernel(w.str(), GridDim{r.tokens * SymDim(width), 1024}, GridDim(),
                 GridDim(), 256);
}

std::string mlir::moe::cuda::combineEpilogue(GroupEmitter &e, CodeWriter &w,
                                             Value result) {
  std::string epilogue = "[=](int64_t i, float y) {";
  if (e.escapes(result)) {
    std::string out = e.declared(w, result, true, "y");
    epilogue += " " + out + "[i] = y;";
  }
  if (e.group().ops.size() > 1) {
    Operation *add = e.group().ops[1];
    Value other = add->getOperand(0) == result ? add->getOperand(1)
                                               : add->getOperand(0);
    std::string res = e.declared(w, other, false, "res");
    std::string out = e.declared(w, add->getResult(0), true, "sum");
    epilogue += " " + out + "[i] = moec::toFloat(" + res + "[i]) + y;";
  }
  return epilogue + " }";
}
