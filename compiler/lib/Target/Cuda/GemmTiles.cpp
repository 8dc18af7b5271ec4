//===- GemmTiles.cpp - which device GEMM a block calls --------------------===//

#include "GemmTiles.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "moe/IR/MoeOps.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cuda;

GemmTile mlir::moe::cuda::gemmTileFor(Value a, Value b, int64_t tm, int64_t tn,
                                      int64_t tk, int64_t threads) {
  auto isBf16 = [](Value v) {
    return isa<BFloat16Type>(getElementTypeOrSelf(v.getType()));
  };
  bool fits = tm % 32 == 0 && tn % 32 == 0 && tk % 16 == 0 && threads == 256;
  // gemmTileBf16Async runs its cp.async pipeline where the loaders allow it
  // and gemmTileBf16 elsewhere (float scratch operands, misaligned rows).
  auto tile = [&](StringRef function, TileArithmetic arithmetic) {
    return GemmTile{function, arithmetic, tm, tn, tk, threads};
  };
  if (isBf16(a) && isBf16(b) && fits)
    return tile("moec::gemmTileBf16Async", TileArithmetic::Bf16);
  auto isF32 = [](Value v) {
    return isa<Float32Type>(getElementTypeOrSelf(v.getType()));
  };
  if (isF32(a) && isF32(b) && fits) {
    StringRef precision = f32MatmulOf(a);
    if (precision == "tf32")
      return tile("moec::gemmTileTf32", TileArithmetic::Tf32);
    if (precision == "tf32x3")
      return tile("moec::gemmTile3xTf32", TileArithmetic::Tf32x3);
  }
  return tile("moec::gemmTile", TileArithmetic::Fp32);
}

bool mlir::moe::cuda::decodes(Operation *op) {
  auto func = op->getParentOfType<func::FuncOp>();
  auto entry =
      func ? func->getAttrOfType<StringAttr>(attrs::kEntry) : StringAttr();
  return entry && entry.getValue() == "decode";
}

namespace {

/// The operand rounding of moec::gemmRows that matches a tile's: 3xTF32
/// sums its split products to about fp32's precision, so fp32 matches it.
StringRef rowsRoundingFor(TileArithmetic arithmetic) {
  switch (arithmetic) {
  case TileArithmetic::Bf16:
    return "moec::RowsRounding::Bf16";
  case TileArithmetic::Tf32:
    return "moec::RowsRounding::Tf32";
  case TileArithmetic::Fp32:
  case TileArithmetic::Tf32x3:
    return "moec::RowsRounding::Fp32";
  }
  llvm_unreachable("unknown tile arithmetic");
}

} // namespace

void mlir::moe::cuda::writeGemmTileCall(CodeWriter &w, const GemmTile &tile,
                                        StringRef m0, StringRef m,
                                        StringRef operands, bool fewRows) {
  if (fewRows) {
    w.line(fill("if (${m} <= moec::kGemmRowsMax) {", {{"m", m}}));
    w.indent();
    w.line(fill("moec::gemmRows<${TN}, ${threads}, ${rounding}>(${operands});",
                {{"TN", tile.tn},
                 {"threads", tile.threads},
                 {"rounding", rowsRoundingFor(tile.arithmetic)},
                 {"operands", operands}}));
    w.dedent();
    w.line("} else {");
    w.indent();
  }
  w.line(fill("${gemm}<${TM}, ${TN}, ${TK}, ${threads}>(${m0}, ${operands});",
              {{"gemm", tile.function},
               {"TM", tile.tm},
               {"TN", tile.tn},
               {"TK", tile.tk},
               {"threads", tile.threads},
               {"m0", m0},
               {"operands", operands}}));
  if (fewRows) {
    w.dedent();
    w.line("}");
  }
}
