//===- GemmTiles.h - which device GEMM a block calls ------------*- C++ -*-===//
//
// The choice of device GEMM tile for a kernel's operands (fp32 FMA, bf16 or
// TF32 tensor cores) and the call that runs it, which in the decoding
// program takes moec::gemmRows for a block of a few rows.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TARGET_CUDA_GEMMTILES_H
#define MOEC_TARGET_CUDA_GEMMTILES_H

#include "GroupEmitter.h"

namespace mlir::moe::cuda {

/// How a device GEMM tile rounds its operands before it multiplies them.
enum class TileArithmetic { Fp32, Bf16, Tf32, Tf32x3 };

/// A device GEMM tile: the function's name, its arithmetic, its block's
/// output tile (TM x TN), its depth step TK and its threads.
struct GemmTile {
  StringRef function;
  TileArithmetic arithmetic = TileArithmetic::Fp32;
  int64_t tm = 0, tn = 0, tk = 0, threads = 0;
};

/// The device GEMM tile for operands stored as `a` and `b` with these
/// tiles: moec::gemmTileBf16Async (tensor cores, fp32 accumulation; it
/// picks its cp.async pipeline or gemmTileBf16 from the loaders) when both
/// are bf16 and the tiles fit gemmTileBf16's warp layout; when both are f32
/// and the model opts in (moe.model's f32_matmul, see f32MatmulOf),
/// moec::gemmTileTf32 or moec::gemmTile3xTf32 (same warp layout); else
/// moec::gemmTile (fp32 FMA), which f32 models use by default.
GemmTile gemmTileFor(Value a, Value b, int64_t tm, int64_t tn, int64_t tk,
                     int64_t threads);

/// Whether `op` is in the decoding program (`moe.entry` "decode"): after
/// the prompt, moec run and beam search decode one token a sequence, so its
/// products have a row a sequence.
bool decodes(Operation *op);

/// Writes one block's GEMM call, `tile.function<TM, TN, TK, THREADS>(m0,
/// operands)` with the tile's shape, where `operands` are "n0, M, N, K, loadA,
/// loadB, store". With `fewRows` (decoding), a block whose rows `m` are at most
/// moec::kGemmRowsMax runs moec::gemmRows on the same operands instead,
/// rounding them as the tile does; gemmRows takes rows 0 .. m - 1, so `m0`
/// must be 0 whenever `m` is that small.
void writeGemmTileCall(CodeWriter &w, const GemmTile &tile, llvm::StringRef m0,
                       llvm::StringRef m, llvm::StringRef operands,
                       bool fewRows);

} // namespace mlir::moe::cuda

#endif // MOEC_TARGET_CUDA_GEMMTILES_H
