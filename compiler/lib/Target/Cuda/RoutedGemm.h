//===- RoutedGemm.h - grouped GEMMs over routed assignments -----*- C++ -*-===//
//
// What every routed op's kernels share (moe.expert_ffn, moe.expert_map,
// moe.expert_reduce and their gradients): a dispatch launch that sorts the
// kept (token, choice) assignments by expert (runtime/device/experts.cuh),
// grouped GEMMs over row tiles of every expert that gather their rows by
// index while loading, per-expert GEMMs and column sums for weight
// gradients, and the combine that sums a token's rows in choice order. No
// per-expert copies of activations exist in device memory.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TARGET_CUDA_ROUTEDGEMM_H
#define MOEC_TARGET_CUDA_ROUTEDGEMM_H

#include "GemmTiles.h"

namespace mlir::moe::cuda {

/// The routing, tiles and dispatch scratch of one routed group.
struct RoutedGemm {
  Value expert, slot;
  /// Tokens: the rows of the routed op's per-token operand.
  SymDim tokens;
  int64_t e = 0, k = 0;
  /// The dispatch kernels' threads.
  int64_t dispatchThreads = 0;
  Type f32, i32;
  /// The CUDA type token rows and weights are stored in (float, bf16).
  std::string t;
  /// The device GEMM tile for that storage, in the model's tile sizes (see
  /// gemmTileFor).
  GemmTile gemm;
  /// The type of scratch rows that only this group's GEMMs read (the
  /// expert FFN's hidden layer and its gradients): bf16 when `gemm` runs on
  /// the tensor cores, which round their operands to bf16 anyway, so that
  /// storing them rounded changes no product, halves their traffic and lets
  /// the cp.async pipeline copy them; else f32.
  Type operandType;
  /// Dispatch scratch: per-expert offsets and row-tile starts (E + 1 each)
  /// and the assignments sorted by expert.
  int64_t offsets = -1, tileStart = -1, order = -1;

  /// Every assignment (token, choice) is a row.
  SymDim assignments() const { return tokens * SymDim(k); }

  /// The row-major weight of this block's expert `ex`: `[rows, ld]` per
  /// expert, stored as `t`.
  std::string expertWeight(llvm::StringRef layout, llvm::StringRef ptr,
                           int64_t rows, int64_t ld) const;
  /// Rows `order[row0 + m] / div` of `ptr` (`width` columns, stored as
  /// `t`), each scaled by `scale[assignment]` (null: 1): div = k gathers a
  /// token's row, div = 1 the assignment's own row.
  std::string gatheredRows(llvm::StringRef ptr, int64_t div, int64_t width,
                           llvm::StringRef scale) const;
  /// The transposed view of gatheredRows (no scale).
  std::string gatheredCols(llvm::StringRef ptr, int64_t div,
                           int64_t width) const;
  /// This block's rows of an operand scratch (of operandType) of `ld`
  /// columns per sorted row.
  std::string scratchRows(llvm::StringRef layout, llvm::StringRef ptr,
                          int64_t ld) const;
};

/// The routing of `expert`/`slot` with `tokens` rows, the group's GEMM tiles,
/// and a GEMM tile function for operands stored like `a` and `b`.
RoutedGemm routedGemm(GroupEmitter &e, Value expert, Value slot,
                      SymDim tokens, Value a, Value b);

inline constexpr const char *kNoFloats = "moec::gptr<const float>()";

/// Declares `name` bound to `v`'s buffer, or a null pointer of type `t`.
void declareOptional(GroupEmitter &e, CodeWriter &w, llvm::StringRef name,
                     Value v, llvm::StringRef t);
/// Declares `name` bound to scratch buffer `id` of element type `type`.
void declareScratch(GroupEmitter &e, CodeWriter &w, llvm::StringRef name,
                    int64_t id, Type type, bool writable);

/// The dispatch launch; `zero` (may be null) is a [T * k] float buffer it
/// clears (gate gradients of dropped assignments).
void dispatch(GroupEmitter &e, const RoutedGemm &r, Value zero);

/// A grouped GEMM over row tiles of every expert: `n` output columns, `k`
/// deep; `declare` binds what loadA/loadB/store read. In the body `ex` is
/// the block's expert and `row0`, `rows` its sorted rows.
void groupedGemm(GroupEmitter &e, const RoutedGemm &r, llvm::StringRef phase,
                 int64_t n, int64_t k,
                 llvm::function_ref<void(CodeWriter &)> declare,
                 llvm::StringRef loadA, llvm::StringRef loadB,
                 llvm::StringRef store);

/// A GEMM per expert over its rows: C_e [m, n] = sum over the expert's rows
/// of A(m, row) B(row, n); grid (n tiles, m tiles, experts).
void perExpertGemm(GroupEmitter &e, const RoutedGemm &r, llvm::StringRef phase,
                   int64_t m, int64_t n,
                   llvm::function_ref<void(CodeWriter &)> declare,
                   llvm::StringRef loadA, llvm::StringRef loadB,
                   llvm::StringRef store);

/// Column sums per expert over its rows: out[e * n + c] = sum_rows load.
void perExpertColumnSums(GroupEmitter &e, const RoutedGemm &r,
                         llvm::StringRef phase, int64_t n,
                         llvm::function_ref<void(CodeWriter &)> declare,
                         llvm::StringRef load, llvm::StringRef out);

/// Declares `offsets` and `order` (the assignments sorted by expert).
void declareSorted(GroupEmitter &e, CodeWriter &w, const RoutedGemm &r);

/// The combine launch: per token, the sum over its kept assignments of the
/// rows (`width` columns) of float scratch `rowsId` (named `rowsName`, in
/// choice order), handed as (element, value) to the epilogue `outputs`
/// declares and returns.
void combine(GroupEmitter &e, const RoutedGemm &r, int64_t width,
             llvm::StringRef rowsName, int64_t rowsId,
             llvm::function_ref<std::string(CodeWriter &)> outputs);

/// With k = 1 a token has one row: its grouped GEMM stores the row through
/// the combine's epilogue itself, and this launch hands the epilogue a zero
/// for every token no expert kept.
void combineDropped(GroupEmitter &e, const RoutedGemm &r, int64_t width,
                    llvm::function_ref<std::string(CodeWriter &)> outputs);

/// The combine epilogue of a routed op's result `result` (stored if anything
/// outside the group reads it), followed by the group's residual add when
/// the group has one (its second op).
std::string combineEpilogue(GroupEmitter &e, CodeWriter &w, Value result);

} // namespace mlir::moe::cuda

#endif // MOEC_TARGET_CUDA_ROUTEDGEMM_H
