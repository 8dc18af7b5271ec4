//===- FuseKernels.cpp - moe-fuse-kernels ---------------------------------===//
//
// Groups the ops of each entry function into kernels. Every group starts at
// an op that decides its kind and absorbs the ops the kind's rules allow:
//
//   embedding   moe.embedding [+ moe.add_positions] [+ moe.dropout]
//   gemm        moe.linear [+ moe.activation] [+ residual arith.addf]
//   router      moe.linear (logits) + moe.topk_router + moe.z_loss +
//               moe.switch_loss + moe.expert_load
//   experts     moe.expert_ffn [+ residual arith.addf]
//   norm        residual arith.addf + moe.layer_norm / moe.rms_norm
//   global_norm moe.global_norm + the 0-d arith ops that use it (clipping)
//   optimizer   every moe.adam_update / moe.sgd_update of the program
//   elementwise runs of elementwise ops over the same number of elements
//   scalar      runs of 0-d ops (loss weighting, moe.lr_schedule)
//
// and every other op forms a group of its own. Groups are contiguous runs of
// ops (constants in between are buffers, not steps); the ops the router
// group absorbs are moved up next to it first (all ops are pure, and the
// move keeps every operand defined before its use).
//
//===----------------------------------------------------------------------===//

#include "moec/Transforms/KernelGroups.h"
#include "moec/Transforms/Passes.h"
#include "moec/Transforms/ShapeAnalysis.h"
#include "moe/IR/MoeOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEFUSEKERNELS
#include "moec/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

bool isScalar(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getRank() == 0;
}

bool isElementwise(Operation *op) {
  return isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
             arith::NegFOp, arith::MaximumFOp, arith::MinimumFOp, ActivationOp,
             ActivationGradOp, DropoutOp, DropoutGradOp, CastOp>(op);
}

/// The kind of the group an op starts.
StringRef kindOf(Operation *op) {
  if (isElementwise(op) || isa<LrScheduleOp>(op))
    return op->getNumResults() == 1 && isScalar(op->getResult(0))
               ? "scalar"
               : "elementwise";
  return llvm::TypeSwitch<Operation *, StringRef>(op)
      .Case<EmbeddingOp, AddPositionsOp>([](auto) { return "embedding"; })
      .Case([](LinearOp linear) -> StringRef {
        for (Operation *user : linear.getResult().getUsers())
          if (isa<TopKRouterOp>(user))
            return "router";
        return "gemm";
      })
      .Case<LinearGradOp>([](auto) { return "gemm_grad"; })
      .Case<LayerNormOp, RmsNormOp>([](auto) { return "norm"; })
      .Case<LayerNormGradOp, RmsNormGradOp>([](auto) { return "norm_grad"; })
      .Case<AttentionOp>([](auto) { return "attention"; })
      .Case<AttentionGradOp>([](auto) { return "attention_grad"; })
      .Case<KvCacheWriteOp>([](auto) { return "kv_write"; })
      .Case<TopKRouterOp, ZLossOp, SwitchLossOp, ExpertLoadOp>(
          [](auto) { return "router"; })
      .Case<TopKRouterGradOp>([](auto) { return "router_grad"; })
      .Case<SwitchLossGradOp>([](auto) { return "switch_loss_grad"; })
      .Case<ZLossGradOp>([](auto) { return "z_loss_grad"; })
      .Case<ExpertFfnOp>([](auto) { return "experts"; })
      .Case<ExpertFfnGradOp>([](auto) { return "experts_grad"; })
      .Case<CrossEntropyOp>([](auto) { return "cross_entropy"; })
      .Case<CrossEntropyGradOp>([](auto) { return "cross_entropy_grad"; })
      .Case<EmbeddingGradOp>([](auto) { return "embedding_grad"; })
      .Case<AddPositionsGradOp>([](auto) { return "positions_grad"; })
      .Case<GlobalNormOp>([](auto) { return "global_norm"; })
      .Case<AdamUpdateOp, SgdUpdateOp>([](auto) { return "optimizer"; })
      .Default([](Operation *) { return StringRef(); });
}

class Fuser {
public:
  Fuser(func::FuncOp func, llvm::DenseMap<Value, SymShape> shapes)
      : func(func), shapes(std::move(shapes)) {}

  void run() {
    Block &body = func.getBody().front();
    int64_t next = 0;
    for (Operation *op = &body.front(); op && !op->hasTrait<OpTrait::IsTerminator>();
         op = op->getNextNode()) {
      if (isa<arith::ConstantOp>(op) || op->hasAttr(fusion::kGroup))
        continue;
      StringRef kind = kindOf(op);
      if (kind.empty())
        continue;
      group = {op};
      groupKind = kind;
      // A residual add feeding a norm belongs to the norm's group.
      if (isa<arith::AddFOp>(op) && kind == "elementwise")
        if (Operation *nextOp = nextNonConstant(op))
          if (isa<LayerNormOp, RmsNormOp>(nextOp) &&
              nextOp->getOperand(0) == op->getResult(0))
            groupKind = "norm";
      if (groupKind == "router")
        hoistRouterConsumers(op);
      grow();
      OpBuilder b(func.getContext());
      for (auto [i, member] : llvm::enumerate(group)) {
        member->setAttr(fusion::kGroup, b.getI64IntegerAttr(next));
        if (i == 0)
          member->setAttr(fusion::kKernel, b.getStringAttr(groupKind));
      }
      ++next;
      op = group.back();
    }
  }

private:
  static Operation *nextNonConstant(Operation *op) {
    Operation *n = op->getNextNode();
    while (n && isa<arith::ConstantOp>(n))
      n = n->getNextNode();
    return n;
  }

  bool inGroup(Value v) const {
    Operation *def = v.getDefiningOp();
    return def && llvm::is_contained(group, def);
  }

  /// Whether `v` is available before the group starts (argument, constant
  /// or an earlier op).
  bool before(Value v) const {
    Operation *def = v.getDefiningOp();
    return !def || isa<arith::ConstantOp>(def) ||
           def->isBeforeInBlock(group.front());
  }

  /// Whether every operand of `op` is inside the group or available before
  /// it, and at least one comes from the group.
  bool feedsFromGroup(Operation *op) const {
    bool fromGroup = false;
    for (Value v : op->getOperands()) {
      if (inGroup(v))
        fromGroup = true;
      else if (!before(v))
        return false;
    }
    return fromGroup;
  }

  bool sameElements(Value a, Value b) const {
    auto ia = shapes.find(a), ib = shapes.find(b);
    if (ia == shapes.end() || ib == shapes.end())
      return false;
    return symProduct(ia->second) == symProduct(ib->second);
  }

  /// Whether every operand of `op` is available: inside the group or
  /// before it.
  bool available(Operation *op) const {
    return llvm::all_of(op->getOperands(),
                        [&](Value v) { return inGroup(v) || before(v); });
  }

  /// Whether the group, as it stands, may take `op` next. Runs of scalar
  /// or same-sized elementwise ops fuse even when independent; the other
  /// kinds only take consumers of their own values.
  bool absorbs(Operation *op) const {
    if (op->hasAttr(fusion::kGroup) || isa<arith::ConstantOp>(op))
      return false;
    if (groupKind == "global_norm" || groupKind == "scalar")
      return kindOf(op) == "scalar" && available(op);
    if (groupKind == "elementwise")
      return kindOf(op) == "elementwise" && available(op) &&
             sameElements(op->getResult(0), group.front()->getResult(0));
    if (!feedsFromGroup(op))
      return false;
    Operation *last = group.back();
    if (groupKind == "embedding")
      return (isa<AddPositionsOp>(op) &&
              op->getOperand(0) == last->getResult(0)) ||
             (isa<DropoutOp>(op) && op->getOperand(0) == last->getResult(0));
    if (groupKind == "gemm") {
      // The epilogue applies to the last value; values that other ops also
      // read (the pre-activation the backward needs) are stored as well.
      Value tail = last->getResult(0);
      if (!llvm::is_contained(op->getOperands(), tail))
        return false;
      if (isa<ActivationOp>(op) && isa<LinearOp>(last))
        return true;
      return isa<arith::AddFOp>(op) && !isa<arith::AddFOp>(last) &&
             !isScalar(op->getResult(0));
    }
    if (groupKind == "router")
      return isa<TopKRouterOp, ZLossOp, SwitchLossOp, ExpertLoadOp>(op);
    if (groupKind == "experts")
      return isa<arith::AddFOp>(op) && isa<ExpertFfnOp>(last) &&
             llvm::is_contained(op->getOperands(), last->getResult(0));
    if (groupKind == "norm")
      return isa<LayerNormOp, RmsNormOp>(op) && isa<arith::AddFOp>(last) &&
             op->getOperand(0) == last->getResult(0);
    return false;
  }

  /// Extends the group with the ops that follow it while they qualify.
  void grow() {
    for (Operation *op = nextNonConstant(group.back()); op;
         op = nextNonConstant(group.back())) {
      bool take = groupKind == "optimizer"
                      ? isa<AdamUpdateOp, SgdUpdateOp>(op) &&
                            !op->hasAttr(fusion::kGroup)
                      : absorbs(op);
      if (!take)
        break;
      // Constants between members stay where they are: groups are
      // contiguous up to constants, which are buffers, not steps.
      group.push_back(op);
    }
  }

  /// Moves the router's statistics and losses up next to it.
  void hoistRouterConsumers(Operation *first) {
    Operation *insertAfter = first;
    // The router op itself first, then what reads the logits or routing.
    llvm::SmallVector<Operation *> candidates;
    for (Operation *op = first->getNextNode(); op; op = op->getNextNode())
      if (isa<TopKRouterOp>(op) && op->getOperand(0) == first->getResult(0)) {
        candidates.push_back(op);
        break;
      }
    if (isa<TopKRouterOp>(first))
      candidates.clear();
    Operation *router = candidates.empty()
                            ? (isa<TopKRouterOp>(first) ? first : nullptr)
                            : candidates.front();
    for (Operation *op = first->getNextNode(); op; op = op->getNextNode()) {
      bool readsRouting =
          (router && llvm::any_of(op->getOperands(), [&](Value v) {
             return v.getDefiningOp() == router;
           })) ||
          (isa<ZLossOp>(op) && op->getOperand(0) == first->getResult(0));
      if (isa<ZLossOp, SwitchLossOp, ExpertLoadOp>(op) && readsRouting)
        candidates.push_back(op);
    }
    for (Operation *op : candidates) {
      bool ready = llvm::all_of(op->getOperands(), [&](Value v) {
        Operation *def = v.getDefiningOp();
        return !def || def == insertAfter || def->isBeforeInBlock(insertAfter);
      });
      if (!ready)
        continue;
      op->moveAfter(insertAfter);
      insertAfter = op;
    }
  }

  func::FuncOp func;
  llvm::DenseMap<Value, SymShape> shapes;
  llvm::SmallVector<Operation *> group;
  StringRef groupKind;
};

struct MoeFuseKernelsPass
    : public mlir::moe::impl::MoeFuseKernelsBase<MoeFuseKernelsPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!func->hasAttr(attrs::kEntry))
        continue;
      llvm::DenseMap<Value, SymShape> shapes;
      if (failed(computeSymbolicShapes(func, shapes)))
        return signalPassFailure();
      Fuser(func, std::move(shapes)).run();
    }
  }
};

} // namespace
