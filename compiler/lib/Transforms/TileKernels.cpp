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
//   norm/row kernels and the router: one warp per row, rows_per_block
//     rows per block.
//   elementwise/gathers/reductions: 256 threads, `items` elements per
//     thread.
//
//===----------------------------------------------------------------------===//

#include "moec/Transforms/KernelGroups.h"
#include "moec/Transforms/Passes.h"
#include "moec/Transforms/ShapeAnalysis.h"
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
  Tiler(MLIRContext *ctx, ArchLimits limits) : b(ctx), limits(limits) {}

  DictionaryAttr tilesFor(const KernelGroup &group) {
    fields.clear();
    Operation *first = group.ops.front();
    StringRef kind = group.kind;
    if (kind == "gemm" || kind == "gemm_grad") {
      Value w = first->getOperand(1);
      auto type = cast<RankedTensorType>(w.getType());
      int64_t n = type.getDimSize(isa<LinearOp>(first) &&
                                          cast<LinearOp>(first).getTransposeWeight()
                                      ? 0
                                      : 1);
      gemmTiles(n);
    } else if (kind == "experts" || kind == "experts_grad") {
      auto w1 = cast<RankedTensorType>(first->getOperand(4).getType());
      gemmTiles(w1.getDimSize(2));
      set("dispatch_threads", 1024);
    } else if (kind == "attention" || kind == "attention_grad") {
      attentionTiles(first);
    } else if (kind == "norm" || kind == "norm_grad" || kind == "router_grad" ||
               kind == "switch_loss_grad" || kind == "z_loss_grad") {
      set("threads", 128);
      set("rows_per_block", 4);
    } else if (kind == "router") {
      // One warp per token; the last block to finish sums the losses.
      set("threads", 256);
      set("rows_per_block", 8);
    } else if (kind == "cross_entropy" || kind == "cross_entropy_grad") {
      int64_t vocab = lastDim(first->getOperand(0));
      set("threads", vocab >= 256 ? 256 : std::max<int64_t>(32, roundUp(vocab, 32)));
      set("rows_per_block", 1);
    } else if (kind == "scalar") {
      set("threads", 1);
    } else {
      // elementwise, embedding, kv_write, embedding_grad, positions_grad,
      // global_norm, optimizer.
      set("threads", 256);
      set("items", 4);
    }
    return b.getDictionaryAttr(fields);
  }

private:
  static int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

  void set(StringRef name, int64_t value) {
    fields.push_back(b.getNamedAttr(name, b.getI64IntegerAttr(value)));
  }

  void gemmTiles(int64_t n) {
    int64_t tileN = n >= 64 ? 64 : 32;
    int64_t tileM = limits.large && n >= 128 ? 128 : 64;
    set("tile_m", tileM);
    set("tile_n", tileN);
    set("tile_k", 16);
    set("threads", 256);
  }

  void attentionTiles(Operation *op) {
    int64_t width = lastDim(op->getOperand(0));
    int64_t heads = op->getAttrOfType<IntegerAttr>("num_heads").getInt();
    int64_t headDim = heads > 0 ? width / heads : width;
    // The kernels stage Q and dO tiles (tile_q x head_dim) and K and V
    // tiles (tile_k x head_dim) in static shared memory, which is 48 KiB on
    // every architecture; sm_90 starts from larger key tiles.
    int64_t tileQ = 32, tileK = limits.large ? 64 : 32;
    auto bytes = [&] {
      return 4 * (2 * tileQ * headDim + 2 * tileK * headDim +
                  2 * 4 * std::max(tileQ, tileK) + 2 * tileQ);
    };
    while (bytes() > 48 * 1024 && (tileK > 8 || tileQ > 4)) {
      if (tileK > 8 && tileK >= tileQ)
        tileK /= 2;
      else
        tileQ /= 2;
    }
    set("tile_q", tileQ);
    set("tile_k", tileK);
    set("threads", 128);
    set("head_dim", headDim);
  }

  Builder b;
  ArchLimits limits;
  SmallVector<NamedAttribute> fields;
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
      for (const KernelGroup &group : collectGroups(func))
        group.ops.front()->setAttr(fusion::kTiles, tiler.tilesFor(group));
  }
};

} // namespace
