//===- Norm.cpp - layer/RMS norm groups and their gradients ---------------===//
//
// Forward: one warp per row, with the residual add that feeds the norm read
// (and stored) in the same pass. Backward: one warp per row computes dx and
// the per-row dgamma contributions; a second launch sums the contributions
// and dy column by column in a fixed order.
//
//===----------------------------------------------------------------------===//

#include "GroupEmitter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "moe/IR/MoeOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cuda;

namespace {

struct NormInfo {
  Value x, gamma, beta, result;
  double eps;
  bool rms;
};

NormInfo normInfo(Operation *op) {
  if (auto ln = dyn_cast<LayerNormOp>(op))
    return {ln.getX(),
            ln.getGamma(),
            ln.getBeta(),
            ln.getResult(),
            ln.getEps().convertToDouble(),
            false};
  auto rms = cast<RmsNormOp>(op);
  return {rms.getX(),
          rms.getGamma(),
          Value(),
          rms.getResult(),
          rms.getEps().convertToDouble(),
          true};
}

} // namespace

LogicalResult mlir::moe::cuda::emitNormGroup(GroupEmitter &e) {
  Operation *normOp = e.group().ops.back();
  if (!isa<LayerNormOp, RmsNormOp>(normOp))
    return e.error("a norm group must end with its norm");
  NormInfo info = normInfo(normOp);
  int64_t d = cast<RankedTensorType>(info.x.getType()).getShape().back();
  int64_t rowsPerBlock = e.tile(e.tiles().getRowsPerBlock());
  SymDim rows = e.rowsOf(info.x);

  e.beginKernel("");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "rows", rows);
  std::string gamma = e.declared(w, info.gamma, false, "gamma");
  std::string gammaType = storageTypeOf(info.gamma);
  std::string beta = info.beta ? e.declared(w, info.beta, false, "beta")
                               : "moec::gptr<const " + gammaType + ">()";
  std::string y = e.declared(w, info.result, true, "y");
  // The input: x itself, or the residual sum computed (and stored) here.
  // `rowValues` are the values read or written as rows, and `pointers` the
  // buffers a 16-byte path must find aligned.
  Operation *add = e.group().ops.size() == 2 ? e.group().ops.front() : nullptr;
  SmallVector<Value> rowValues = {info.result};
  if (add)
    rowValues.append(
        {add->getOperand(0), add->getOperand(1), add->getResult(0)});
  else
    rowValues.push_back(info.x);
  // Columns per 16-byte access (4: f32, 8: bf16) where every row buffer has
  // one type and the rows are whole vectors; 0 otherwise.
  int width = 0;
  if (llvm::all_of(rowValues, [](Value v) { return elementTypeOf(v).isF32(); }))
    width = 4;
  else if (llvm::all_of(rowValues,
                        [](Value v) { return elementTypeOf(v).isBF16(); }))
    width = 8;
  if (d % std::max(width, 1) != 0)
    width = 0;
  // The loaders of one column and, with a width, of `width` columns.
  std::string load, loadVector;
  std::vector<std::string> pointers = {y};
  if (add) {
    std::string a = e.declared(w, add->getOperand(0), false, "a");
    std::string b = e.declared(w, add->getOperand(1), false, "b");
    std::string sum = e.escapes(add->getResult(0))
                          ? e.declared(w, add->getResult(0), true, "sum")
                          : std::string();
    pointers.insert(pointers.end(), {a, b});
    if (!sum.empty())
      pointers.push_back(sum);
    load =
        llvm::formatv(
            "[=](int64_t r, int64_t c) {{ const float s = "
            "moec::toFloat({0}[r * {1} + c]) + moec::toFloat({2}[r "
            "* {1} + c]);{3} return s; }",
            a, d, b,
            sum.empty() ? std::string()
                        : llvm::formatv(" {0}[r * {1} + c] = s;", sum, d).str())
            .str();
    if (width) {
      const char *sumOf =
          width == 4 ? "make_float4(u.x + w.x, u.y + w.y, u.z + w.z, u.w + "
                       "w.w)"
                     : "moec::float8{make_float4(u.lo.x + w.lo.x, u.lo.y + "
                       "w.lo.y, u.lo.z + w.lo.z, u.lo.w + w.lo.w), "
                       "make_float4(u.hi.x + w.hi.x, u.hi.y + w.hi.y, u.hi.z "
                       "+ w.hi.z, u.hi.w + w.hi.w)}";
      loadVector =
          llvm::formatv(
              "[=](int64_t r, int64_t q) {{ const auto u = "
              "moec::load{4}({0}, r * {1} + q), w = moec::load{4}({2}, r "
              "* {1} + q); const auto s = {5};{3} return s; }",
              a, d / width, b,
              sum.empty() ? std::string()
                          : llvm::formatv(" moec::store{2}({0}, r * {1} "
                                          "+ q, s);",
                                          sum, d / width, width)
                                .str(),
              width, sumOf)
              .str();
    }
  } else {
    std::string x = e.declared(w, info.x, false, "x");
    pointers.push_back(x);
    load = llvm::formatv("[=](int64_t r, int64_t c) {{ return "
                         "moec::toFloat({0}[r * {1} + c]); }",
                         x, d)
               .str();
    if (width)
      loadVector = llvm::formatv("[=](int64_t r, int64_t q) {{ return "
                                 "moec::load{2}({0}, r * {1} + q); }",
                                 x, d / width, width)
                       .str();
  }
  // One call of the row kernel `kernel` with its loader and storer.
  auto normCall = [&](StringRef kernel, const std::string &loader,
                      const std::string &storer) {
    return fill("moec::${kernel}<${d}, ${rms}, ${rowsPerBlock}, "
                "${gammaType}>(rows, ${eps}, ${load}, ${gamma}, ${beta}, "
                "${store});",
                {{"kernel", kernel},
                 {"d", d},
                 {"rms", info.rms},
                 {"rowsPerBlock", rowsPerBlock},
                 {"gammaType", gammaType},
                 {"eps", floatLiteral(info.eps)},
                 {"load", loader},
                 {"gamma", gamma},
                 {"beta", beta},
                 {"store", storer}});
  };
  std::string scalar = normCall(
      "normRows", load,
      llvm::formatv("[=](int64_t r, int64_t c, float v) {{ {0}[r * {1} + "
                    "c] = v; }",
                    y, d)
          .str());
  if (width == 0) {
    w.line(scalar);
  } else {
    // Rows of whole 16-byte vectors move one an access when every buffer
    // is aligned (a view may not be).
    w.line("if (moec::aligned16(" + llvm::join(pointers, ", ") + ")) {");
    w.indent();
    w.line(normCall("normRowsVector", loadVector,
                    llvm::formatv("[=](int64_t r, int64_t q, const auto &v) "
                                  "{{ moec::store{2}({0}, r * {1} + q, v); }",
                                  y, d / width, width)
                        .str()));
    w.dedent();
    w.line("} else {");
    w.indent();
    w.line(scalar);
    w.dedent();
    w.line("}");
  }
  e.finishKernel(w.str(), GridDim{rows, rowsPerBlock}, GridDim(), GridDim(),
                 32 * rowsPerBlock);
  return success();
}

LogicalResult mlir::moe::cuda::emitNormGradGroup(GroupEmitter &e) {
  Operation *op = e.first();
  Value x = op->getOperand(0), gamma = op->getOperand(1),
        dy = op->getOperand(2);
  bool rms = isa<RmsNormGradOp>(op);
  double eps = rms ? cast<RmsNormGradOp>(op).getEps().convertToDouble()
                   : cast<LayerNormGradOp>(op).getEps().convertToDouble();
  Value dx = op->getResult(0), dgamma = op->getResult(1);
  Value dbeta = rms ? Value() : op->getResult(2);
  auto xType = cast<RankedTensorType>(x.getType());
  Type f32 = Float32Type::get(op->getContext());
  int64_t d = xType.getShape().back();
  int64_t rowsPerBlock = e.tile(e.tiles().getRowsPerBlock());
  SymDim rows = e.rowsOf(x);
  bool needGamma = e.escapes(dgamma);
  bool needBeta = dbeta && e.escapes(dbeta);

  e.beginKernel("rows");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "rows", rows);
  std::string xp = e.declared(w, x, false, "x");
  std::string gp = e.declared(w, gamma, false, "gamma");
  std::string dyp = e.declared(w, dy, false, "dy");
  std::string dxp = e.declared(w, dx, true, "dx");
  std::string contrib = "moec::gptr<float>()";
  int64_t contribId = -1;
  if (needGamma) {
    contribId = e.scratch(f32, e.shapeOf(x));
    contrib = e.fresh("contrib");
    w.line(llvm::formatv("const moec::gptr<float> {0} = {1};", contrib,
                         e.bufferExpr(e.argument(contribId), f32, true)));
  }
  w.line(fill("moec::normGradRows<${d}, ${rms}, ${rowsPerBlock}>(rows, "
              "${eps}, ${x}, ${gamma}, ${dy}, ${dx}, ${contrib});",
              {{"d", d},
               {"rms", rms},
               {"rowsPerBlock", rowsPerBlock},
               {"eps", floatLiteral(eps)},
               {"x", xp},
               {"gamma", gp},
               {"dy", dyp},
               {"dx", dxp},
               {"contrib", contrib}}));
  e.finishKernel(w.str(), GridDim{rows, rowsPerBlock}, GridDim(), GridDim(),
                 32 * rowsPerBlock);
  if (!needGamma && !needBeta)
    return success();

  // The second launch sums what the first wrote.
  e.beginKernel("columns");
  CodeWriter c;
  c.indent();
  e.declareScalar(c, "rows", rows);
  if (needGamma) {
    std::string dg = e.declared(c, dgamma, true, "dgamma");
    c.line(llvm::formatv("const moec::gptr<const float> contrib = {0};",
                         e.bufferExpr(e.argument(contribId), f32, false)));
    c.line(llvm::formatv("moec::columnSums(rows, {0}, [=](int64_t r, int64_t "
                         "k) {{ return contrib[r * {0} + k]; }, [=](int64_t k, "
                         "float s) {{ {1}[k] = s; });",
                         d, dg));
  }
  if (needBeta) {
    std::string dyp2 = e.declared(c, dy, false, "dy");
    std::string db = e.declared(c, dbeta, true, "dbeta");
    c.line(llvm::formatv("moec::columnSums(rows, {0}, [=](int64_t r, int64_t "
                         "k) {{ return moec::toFloat({1}[r * {0} + k]); }, "
                         "[=](int64_t k, float s) {{ {2}[k] = s; });",
                         d, dyp2, db));
  }
  e.finishKernel(c.str(), GridDim{SymDim(d), 32}, GridDim(), GridDim(), 256);
  return success();
}
