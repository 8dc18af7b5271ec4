//===- TileKernels.cpp - moe-tile-kernels ---------------------------------===//
//
// Picks the launch shape of every kernel group for one architecture. The
// choices are simple, explicit rules on the static sizes, recorded so that
// lit tests and users see them:
//
//   gemm/gemm_grad/experts: block tile tile_m x tile_n, k-step tile_k,
//     each of `threads` threads computing (tile_m*tile_n/threads) outputs;
//     sm_90 (more shared memory and SMs) takes 128-row tiles for wide N.
//   attention: tile_q queries per block against tile_k-key tiles staged in
//     shared memory; the tile shrinks until K and V tiles fit the budget.
//     The bf16 tensor-core forward takes 16 queries a warp and 64 keys.
//   norm/row kernels and the router: one warp per row, rows_per_block
//     rows per block; row_scale: a power-of-two group of lanes per row,
//     as wide as the row up to a warp.
//   elementwise/gathers/reductions: 256 threads, `items` elements per
//     thread.
//   window_mean (and gradient), head_mixture_grad, sample_expert: 128
//     threads, one column, head group or row each; gate_stats one block.
//
//===----------------------------------------------------------------------===//

#include "moec/Analysis/AttentionPath.h"
#include "moec/Analysis/KernelGroups.h"
#include "moec/Transforms/Passes.h"
#include "moec/Analysis/ShapeAnalysis.h"
#include "moe/IR/MoeOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOETILEKERNELS
#include "moec/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

struct ArchLimits {
  int64_t sharedBytes; // opt-in dynamic shared memory per block
  bool large;          // favour larger tiles
};

FailureOr<ArchLimits> limitsOf(StringRef arch) {
  if (arch == "sm_80")
    return ArchLimits{163 * 1024, false};
  if (arch == "sm_90")
    return ArchLimits{227 * 1024, true};
  return failure();
}

/// The static size of the last dimension of `v`, or 0.
int64_t lastDim(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || type.getRank() == 0 || type.isDynamicDim(type.getRank() - 1))
    return 0;
  return type.getShape().back();
}

class Tiler {
public:
  Tiler(MLIRContext *ctx, ArchLimits limits) : ctx(ctx), limits(limits) {}

  TilesAttr tilesFor(const KernelGroup &group) {
    fields = Fields();
    Operation *first = group.ops.front();
    using K = KernelKind;
    switch (group.kind) {
    case K::Gemm:
    case K::GemmGrad: {
      Value w = first->getOperand(1);
      auto type = cast<RankedTensorType>(w.getType());
      auto linear = dyn_cast<LinearOp>(first);
      int64_t n =
          type.getDimSize(linear && linear.getTransposeWeight() ? 0 : 1);
      gemmTiles(n);
      break;
    }
    case K::Experts:
    case K::ExpertsGrad: {
      auto w1 = cast<RankedTensorType>(first->getOperand(4).getType());
      gemmTiles(w1.getDimSize(2));
      fields.dispatchThreads = 1024;
      break;
    }
    case K::ExpertMap:
    case K::ExpertMapGrad: {
      // The weight [E, d, h]: the forward's outputs are h wide.
      auto w = cast<RankedTensorType>(first->getOperand(3).getType());
      gemmTiles(w.getDimSize(2));
      fields.dispatchThreads = 1024;
      break;
    }
    case K::ExpertReduce:
    case K::ExpertReduceGrad: {
      // The weight [E, h, d]: the forward's outputs are d wide.
      auto w = cast<RankedTensorType>(first->getOperand(4).getType());
      gemmTiles(w.getDimSize(2));
      fields.dispatchThreads = 1024;
      break;
    }
    case K::CvLoss:
    case K::CvLossGrad:
    case K::RoutingStats:
    case K::GateStats:
      fields.threads = 256;
      break;
    case K::WindowMean:
    case K::WindowMeanGrad:
    case K::HeadMixtureGrad:
    case K::SampleExpert:
      // One thread per column, head group or row: short blocks, so that
      // small batches still spread over the SMs.
      fields.threads = 128;
      break;
    case K::Attention:
    case K::AttentionGrad:
      attentionTiles(first);
      break;
    case K::Norm:
    case K::NormGrad:
    case K::RouterGrad:
    case K::SwitchLossGrad:
    case K::ZLossGrad:
      fields.threads = 128;
      fields.rowsPerBlock = 4;
      break;
    case K::Router:
      // One warp per token; the last block to finish sums the losses.
      fields.threads = 256;
      fields.rowsPerBlock = 8;
      break;
    case K::CrossEntropy:
    case K::CrossEntropyGrad: {
      int64_t vocab = lastDim(first->getOperand(0));
      fields.threads =
          vocab >= 256 ? 256 : std::max<int64_t>(32, roundUp(vocab, 32));
      fields.rowsPerBlock = 1;
      break;
    }
    case K::RowScale:
    case K::RowScaleGrad: {
      // Rows share a warp when they are short (the X-MoE embeddings are 16
      // wide): a power-of-two group of up to 32 lanes per row.
      int64_t width = lastDim(first->getOperand(0)), lanes = 1;
      while (lanes < 32 && lanes < width)
        lanes *= 2;
      fields.threads = 256;
      fields.rowsPerBlock = 256 / lanes;
      break;
    }
    case K::Scalar:
      fields.threads = 1;
      break;
    case K::Elementwise:
    case K::Embedding:
    case K::EmbeddingGrad:
    case K::PositionsGrad:
    case K::KvWrite:
    case K::GlobalNorm:
    case K::Optimizer:
    case K::FiniteOrMin:
    case K::FiniteOrMinGrad:
    case K::BatchNorm:
    case K::BatchNormGrad:
      fields.threads = 256;
      fields.items = 4;
      break;
    }
    return TilesAttr::get(ctx, fields.threads, fields.tileM, fields.tileN,
                          fields.tileK, fields.tileQ, fields.headDim,
                          fields.dispatchThreads, fields.rowsPerBlock,
                          fields.items);
  }

private:
  struct Fields {
    std::optional<int64_t> threads, tileM, tileN, tileK, tileQ, headDim,
        dispatchThreads, rowsPerBlock, items;
  };

  static int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

  void gemmTiles(int64_t n) {
    fields.tileN = n >= 64 ? 64 : 32;
    fields.tileM = limits.large && n >= 128 ? 128 : 64;
    fields.tileK = 16;
    fields.threads = 256;
  }

  void attentionTiles(Operation *op) {
    int64_t headDim = isa<AttentionOp>(op)
                          ? attentionHeadDim(cast<AttentionOp>(op))
                          : attentionHeadDim(cast<AttentionGradOp>(op));
    // The kernels stage Q and dO tiles (tile_q x head_dim) and K and V
    // tiles (tile_k x head_dim) in static shared memory, which is 48 KiB on
    // every architecture, counted here as rows an odd number of floats
    // apart (against bank conflicts, attention.cuh), a bound: the tiles a
    // warp reads row by row are unpadded. sm_90 starts from larger key
    // tiles.
    int64_t tileQ = 32, tileK = limits.large ? 64 : 32;
    auto bytes = [&](int64_t dim) {
      int64_t stagedRow = dim % 2 ? dim : dim + 1;
      return 4 * (2 * tileQ * stagedRow + 2 * tileK * stagedRow +
                  2 * 4 * std::max(tileQ, tileK) + 2 * tileQ);
    };
    while (bytes(headDim) > kSharedBytes && (tileK > 8 || tileQ > 4)) {
      if (tileK > 8 && tileK >= tileQ)
        tileK /= 2;
      else
        tileQ /= 2;
    }
    // The smallest tiles (a query a warp, two keys a warp) and still too
    // wide: NVRTC would refuse the kernel.
    if (bytes(headDim) > kSharedBytes) {
      int64_t widest = headDim;
      while (widest > 1 && bytes(widest) > kSharedBytes)
        --widest;
      op->emitError() << "attention head_dim " << headDim
                      << " is too wide: its kernels stage query and key rows "
                         "in 48 KiB of shared memory, which holds "
                      << tileQ << " queries and " << tileK
                      << " keys of at most " << widest << " dims";
      failed = true;
    }
    fields.tileQ = tileQ;
    fields.tileK = tileK;
    fields.threads = 128;
    fields.headDim = headDim;
    // The tensor-core forward: 16 queries a warp, and K and V tiles
    // double-buffered as bf16 rows padded by 16 bytes: 64 keys up to head
    // dim 64 (at most 2 * 2 * 64 * 72 * 2 = 36 KiB), 32 up to 128, which
    // keeps the S fragments to 16 registers and the stages to 2 * 2 * 32 *
    // 136 * 2 = 34 KiB at 128, and 16 beyond (2 * 16 * (264 + 136) * 2 =
    // 25 KiB at 256, V staged for the block's 128 output columns).
    if (auto attention = dyn_cast<AttentionOp>(op);
        attention && attentionOnTensorCores(attention)) {
      fields.tileQ = 16 * (*fields.threads / 32);
      fields.tileK = headDim <= 64 ? 64 : headDim <= 128 ? 32 : 16;
    }
  }

public:
  /// Set when a group has no tiles that fit (its op has the error).
  bool failed = false;

private:
  /// The static shared memory of every kernel.
  static constexpr int64_t kSharedBytes = 48 * 1024;

  MLIRContext *ctx;
  ArchLimits limits;
  Fields fields;
};

struct MoeTileKernelsPass
    : public mlir::moe::impl::MoeTileKernelsBase<MoeTileKernelsPass> {
  using MoeTileKernelsBase::MoeTileKernelsBase;

  void runOnOperation() override {
    FailureOr<ArchLimits> limits = limitsOf(arch);
    if (failed(limits)) {
      getOperation().emitError("unsupported architecture '")
          << arch << "' (sm_80 or sm_90)";
      return signalPassFailure();
    }
    Tiler tiler(&getContext(), *limits);
    for (auto func : getOperation().getOps<func::FuncOp>())
      for (KernelGroup &group : collectGroups(func))
        group.op.setTilesAttr(tiler.tilesFor(group));
    if (tiler.failed)
      signalPassFailure();
  }
};

} // namespace
