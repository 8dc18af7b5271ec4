//===- FuseKernels.cpp - moe-fuse-kernels ---------------------------------===//
//
// Groups the ops of each entry function into kernels and outlines every
// group into a `moe.kernel` region. A group starts at an op that decides
// its kind and absorbs the ops the kind's rules allow:
//
//   embedding   moe.embedding [+ moe.add_positions] [+ moe.dropout]
//   gemm        moe.linear [+ moe.activation] [+ residual arith.addf]
//               or moe.linear [+ the moe.kv_cache_write of its product]
//               [+ more linears of the same input whose products go into
//               caches, each with its write: decoding's q, k, v]
//   router      moe.linear (logits) + moe.topk_router + moe.z_loss +
//               moe.switch_loss + moe.expert_load
//   experts     moe.expert_ffn [+ residual arith.addf]
//   norm        residual arith.addf + moe.layer_norm / moe.rms_norm
//   global_norm moe.global_norm + the 0-d arith ops that use it (clipping)
//   optimizer   every moe.adam_update / moe.sgd_update of the program
//   row_scale   moe.normalize_rows or moe.rescale_rows
//   kv_write    moe.kv_cache_write [+ the later ones of the same position
//               whose operands are ready]: the writes no GEMM takes (keys
//               rotated after their projection, an MAE layer's pool)
//   batch_norm  moe.batch_norm (and batch_norm_grad its gradient)
//   elementwise runs of elementwise ops over the same number of elements
//               (moe.rope among them, when its x comes from before the run,
//               and moe.head_mixture, when its g does)
//   scalar      runs of 0-d ops (loss weighting, moe.lr_schedule)
//
// and every other op forms a group of its own. A group is a contiguous run
// of ops (constants in between are buffers, not steps); the ops the router,
// kv_write and cache-writing gemm groups absorb are moved up next to them
// first (all ops are pure, and the move keeps every operand defined before
// its use). The `moe.kernel` verifier checks the same rules on any plan.
//
//===----------------------------------------------------------------------===//

#include "moec/Analysis/KernelGroups.h"
#include "moec/Transforms/Passes.h"
#include "moec/Analysis/ShapeAnalysis.h"
#include "moe/IR/MoeOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEFUSEKERNELS
#include "moec/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

/// The kind of the group an op starts, if it starts one.
std::optional<KernelKind> kindOf(Operation *op) {
  using K = KernelKind;
  if (isElementwiseOp(op) || isa<LrScheduleOp, RopeOp, HeadMixtureOp>(op))
    return op->getNumResults() == 1 && isScalarTensor(op->getResult(0))
               ? K::Scalar
               : K::Elementwise;
  return llvm::TypeSwitch<Operation *, std::optional<KernelKind>>(op)
      .Case<EmbeddingOp, AddPositionsOp>([](auto) { return K::Embedding; })
      .Case([](LinearOp linear) {
        for (Operation *user : linear.getResult().getUsers())
          if (isa<TopKRouterOp>(user))
            return K::Router;
        return K::Gemm;
      })
      .Case<LinearGradOp>([](auto) { return K::GemmGrad; })
      .Case<LayerNormOp, RmsNormOp>([](auto) { return K::Norm; })
      .Case<LayerNormGradOp, RmsNormGradOp>([](auto) { return K::NormGrad; })
      .Case<AttentionOp>([](auto) { return K::Attention; })
      .Case<AttentionGradOp>([](auto) { return K::AttentionGrad; })
      .Case<KvCacheWriteOp>([](auto) { return K::KvWrite; })
      .Case<TopKRouterOp, ZLossOp, SwitchLossOp, ExpertLoadOp>(
          [](auto) { return K::Router; })
      .Case<TopKRouterGradOp>([](auto) { return K::RouterGrad; })
      .Case<SwitchLossGradOp>([](auto) { return K::SwitchLossGrad; })
      .Case<ZLossGradOp>([](auto) { return K::ZLossGrad; })
      .Case<ExpertFfnOp>([](auto) { return K::Experts; })
      .Case<ExpertFfnGradOp>([](auto) { return K::ExpertsGrad; })
      .Case<ExpertMapOp>([](auto) { return K::ExpertMap; })
      .Case<ExpertMapGradOp>([](auto) { return K::ExpertMapGrad; })
      .Case<ExpertReduceOp>([](auto) { return K::ExpertReduce; })
      .Case<ExpertReduceGradOp>([](auto) { return K::ExpertReduceGrad; })
      .Case<CvLossOp>([](auto) { return K::CvLoss; })
      .Case<RoutingStatsOp>([](auto) { return K::RoutingStats; })
      .Case<CvLossGradOp>([](auto) { return K::CvLossGrad; })
      .Case<CrossEntropyOp>([](auto) { return K::CrossEntropy; })
      .Case<CrossEntropyGradOp>([](auto) { return K::CrossEntropyGrad; })
      .Case<EmbeddingGradOp>([](auto) { return K::EmbeddingGrad; })
      .Case<AddPositionsGradOp>([](auto) { return K::PositionsGrad; })
      .Case<GlobalNormOp>([](auto) { return K::GlobalNorm; })
      .Case<AdamUpdateOp, SgdUpdateOp>([](auto) { return K::Optimizer; })
      .Case<NormalizeRowsOp, RescaleRowsOp>([](auto) { return K::RowScale; })
      .Case<NormalizeRowsGradOp>([](auto) { return K::RowScaleGrad; })
      .Case<FiniteOrMinOp>([](auto) { return K::FiniteOrMin; })
      .Case<FiniteOrMinGradOp>([](auto) { return K::FiniteOrMinGrad; })
      .Case<BatchNormOp>([](auto) { return K::BatchNorm; })
      .Case<BatchNormGradOp>([](auto) { return K::BatchNormGrad; })
      .Case<WindowMeanOp>([](auto) { return K::WindowMean; })
      .Case<WindowMeanGradOp>([](auto) { return K::WindowMeanGrad; })
      .Case<HeadMixtureGradOp>([](auto) { return K::HeadMixtureGrad; })
      .Case<SampleExpertOp>([](auto) { return K::SampleExpert; })
      .Case<GateStatsOp>([](auto) { return K::GateStats; })
      .Default([](Operation *) { return std::nullopt; });
}

Operation *nextNonConstant(Operation *op) {
  Operation *n = op->getNextNode();
  while (n && isa<arith::ConstantOp>(n))
    n = n->getNextNode();
  return n;
}

/// Finds the groups of one function (in program order).
class Grouper {
public:
  struct Group {
    KernelKind kind;
    llvm::SmallVector<Operation *> ops;
  };

  Grouper(func::FuncOp func, llvm::DenseMap<Value, SymShape> shapes)
      : func(func), shapes(std::move(shapes)) {}

  std::vector<Group> run() {
    std::vector<Group> groups;
    Block &body = func.getBody().front();
    hoistCacheWritesOfProducts(body);
    for (Operation *op = &body.front();
         op && !op->hasTrait<OpTrait::IsTerminator>(); op = op->getNextNode()) {
      if (isa<arith::ConstantOp>(op) || grouped.contains(op))
        continue;
      std::optional<KernelKind> kind = kindOf(op);
      if (!kind)
        continue;
      group = {op};
      groupKind = *kind;
      // A residual add feeding a norm belongs to the norm's group.
      if (isa<arith::AddFOp>(op) && groupKind == KernelKind::Elementwise)
        if (Operation *nextOp = nextNonConstant(op))
          if (isa<LayerNormOp, RmsNormOp>(nextOp) &&
              nextOp->getOperand(0) == op->getResult(0))
            groupKind = KernelKind::Norm;
      if (groupKind == KernelKind::Router)
        hoistRouterConsumers(op);
      if (auto write = dyn_cast<KvCacheWriteOp>(op))
        hoistCacheWrites(write);
      grow();
      grouped.insert(group.begin(), group.end());
      groups.push_back({groupKind, group});
      op = group.back();
    }
    return groups;
  }

private:
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
    using K = KernelKind;
    if (grouped.contains(op) || isa<arith::ConstantOp>(op))
      return false;
    std::optional<KernelKind> kind = kindOf(op);
    if (groupKind == K::GlobalNorm || groupKind == K::Scalar)
      return kind == K::Scalar && available(op);
    if (groupKind == K::Elementwise)
      return kind == K::Elementwise && available(op) &&
             sameElements(op->getResult(0), group.front()->getResult(0)) &&
             !(isa<RopeOp>(op) && inGroup(op->getOperand(0))) &&
             !(isa<HeadMixtureOp>(op) && inGroup(op->getOperand(1)));
    if (groupKind == K::Optimizer)
      return isa<AdamUpdateOp, SgdUpdateOp>(op);
    if (groupKind == K::KvWrite)
      return isa<KvCacheWriteOp>(op) &&
             llvm::all_of(op->getOperands(),
                          [&](Value v) { return before(v); });
    if (auto linear = dyn_cast<LinearOp>(op); linear && groupKind == K::Gemm)
      return joinsProjections(linear);
    if (!feedsFromGroup(op))
      return false;
    Operation *last = group.back();
    switch (groupKind) {
    case K::Embedding:
      return isa<AddPositionsOp, DropoutOp>(op) &&
             op->getOperand(0) == last->getResult(0);
    case K::Gemm: {
      // The epilogue applies to the last value; values that other ops also
      // read (the pre-activation the backward needs) are stored as well.
      Value tail = last->getResult(0);
      if (!llvm::is_contained(op->getOperands(), tail))
        return false;
      // An epilogue follows a group of one projection.
      bool oneLinear = llvm::count_if(group, [](Operation *member) {
                         return isa<LinearOp>(member);
                       }) == 1;
      if (!oneLinear && !isa<KvCacheWriteOp>(op))
        return false;
      if (isa<ActivationOp>(op) && isa<LinearOp>(last))
        return true;
      // A decoding layer's key or value projection stores into the cache.
      if (auto write = dyn_cast<KvCacheWriteOp>(op))
        return isa<LinearOp>(last) && write.getUpdate() == tail &&
               before(write.getCache()) && before(write.getPast());
      return isa<arith::AddFOp>(op) && !isa<arith::AddFOp>(last) &&
             !isScalarTensor(op->getResult(0));
    }
    case K::Router:
      return isa<TopKRouterOp, ZLossOp, SwitchLossOp, ExpertLoadOp>(op);
    case K::Experts:
    case K::ExpertReduce:
      // The residual add in the combine's epilogue.
      return isa<arith::AddFOp>(op) && isa<ExpertFfnOp, ExpertReduceOp>(last) &&
             llvm::is_contained(op->getOperands(), last->getResult(0));
    case K::Norm:
      return isa<LayerNormOp, RmsNormOp>(op) && isa<arith::AddFOp>(last) &&
             op->getOperand(0) == last->getResult(0);
    default:
      return false;
    }
  }

  /// Extends the group with the ops that follow it while they qualify.
  void grow() {
    for (Operation *op = nextNonConstant(group.back()); op && absorbs(op);
         op = nextNonConstant(group.back()))
      group.push_back(op);
  }

  /// Moves the router's statistics and losses up next to it.
  void hoistRouterConsumers(Operation *first) {
    Operation *insertAfter = first;
    Block *block = first->getBlock();
    // Later ops of this block among the users of `v`, in block order. Users
    // rather than a scan of the rest of the block: one scan per router would
    // cost N^2 in a model of N layers.
    auto laterUsers = [&](Value v, llvm::SmallVectorImpl<Operation *> &out) {
      for (Operation *user : v.getUsers())
        if (user->getBlock() == block && first->isBeforeInBlock(user) &&
            !llvm::is_contained(out, user))
          out.push_back(user);
    };
    // The router op itself first, then what reads the logits or routing.
    Operation *router = isa<TopKRouterOp>(first) ? first : nullptr;
    llvm::SmallVector<Operation *> candidates;
    if (!router) {
      llvm::SmallVector<Operation *> readers;
      laterUsers(first->getResult(0), readers);
      for (Operation *op : readers)
        if (isa<TopKRouterOp>(op) && op->getOperand(0) == first->getResult(0) &&
            (!router || op->isBeforeInBlock(router)))
          router = op;
      if (router)
        candidates.push_back(router);
    }
    llvm::SmallVector<Operation *> consumers;
    if (router)
      for (Value result : router->getResults())
        laterUsers(result, consumers);
    laterUsers(first->getResult(0), consumers);
    llvm::sort(consumers, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    for (Operation *op : consumers) {
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
      // A move renumbers the block's order, which the next isBeforeInBlock
      // recomputes: move only what is out of place.
      if (op != insertAfter->getNextNode())
        op->moveAfter(insertAfter);
      insertAfter = op;
    }
  }

  /// Moves the later cache writes of the same decoding position whose
  /// operands are ready up next to `first` (an MAE layer's pool write
  /// comes after its attention), so that one kernel writes them all.
  void hoistCacheWrites(KvCacheWriteOp first) {
    // The users of `past` rather than a scan of the block (see above).
    llvm::SmallVector<Operation *> writes;
    for (Operation *user : first.getPast().getUsers())
      if (isa<KvCacheWriteOp>(user) && user->getBlock() == first->getBlock() &&
          first->isBeforeInBlock(user) && !llvm::is_contained(writes, user))
        writes.push_back(user);
    llvm::sort(writes, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    Operation *insertAfter = first;
    for (Operation *op : writes) {
      bool ready = llvm::all_of(op->getOperands(), [&](Value v) {
        Operation *def = v.getDefiningOp();
        return !def || def->isBeforeInBlock(first);
      });
      if (!ready)
        continue;
      if (op != insertAfter->getNextNode())
        op->moveAfter(insertAfter);
      insertAfter = op;
    }
  }

  /// Moves every cache write of a linear's product up next to the linear
  /// (when its cache and position are defined before it): the GEMM's
  /// epilogue then stores into the cache.
  static void hoistCacheWritesOfProducts(Block &body) {
    for (Operation &op : llvm::make_early_inc_range(body)) {
      auto write = dyn_cast<KvCacheWriteOp>(&op);
      auto linear =
          write ? write.getUpdate().getDefiningOp<LinearOp>() : LinearOp();
      if (!linear || linear->getBlock() != &body)
        continue;
      bool ready = llvm::all_of(write->getOperands(), [&](Value v) {
        Operation *def = v.getDefiningOp();
        return !def || def == linear || def->isBeforeInBlock(linear);
      });
      if (ready && write != linear->getNextNode())
        write->moveAfter(linear);
    }
  }

  /// Whether a gemm group of projections may take `linear` as one more: a
  /// product of the same input whose rows a cache write (right after it)
  /// stores, as decoding's key and value projections do. Such a group is
  /// moec's kernel anyway (cuBLASLt has no cache epilogue), so the query
  /// projection before them joins the same launch.
  bool joinsProjections(LinearOp linear) const {
    auto write = dyn_cast_or_null<KvCacheWriteOp>(nextNonConstant(linear));
    return write && write.getUpdate() == linear.getResult() &&
           projectsSameInput(cast<LinearOp>(group.front()), linear) &&
           llvm::all_of(linear->getOperands(),
                        [&](Value v) { return before(v); }) &&
           llvm::all_of(group, [](Operation *member) {
             return isa<LinearOp, KvCacheWriteOp>(member);
           });
  }

  func::FuncOp func;
  llvm::DenseMap<Value, SymShape> shapes;
  llvm::DenseSet<Operation *> grouped;
  llvm::SmallVector<Operation *> group;
  KernelKind groupKind = KernelKind::Elementwise;
};

/// Moves the ops of `group` (contiguous up to constants) into a new
/// moe.kernel at their place; values read after the group leave it through
/// moe.yield. A constant among the members moves in when only members read
/// it, else in front of the kernel.
void outline(const Grouper::Group &group) {
  Operation *first = group.ops.front(), *last = group.ops.back();
  llvm::SetVector<Operation *> members;
  for (Operation *op = first;; op = op->getNextNode()) {
    members.insert(op);
    if (op == last)
      break;
  }
  llvm::SmallVector<Operation *> inside;
  for (Operation *op : members) {
    bool onlyMembersRead = llvm::all_of(op->getUsers(), [&](Operation *user) {
      return members.contains(user);
    });
    if (isa<arith::ConstantOp>(op) && !onlyMembersRead)
      op->moveBefore(first);
    else
      inside.push_back(op);
  }
  llvm::SmallVector<Value> escaping;
  for (Operation *op : inside)
    for (Value result : op->getResults())
      if (llvm::any_of(result.getUsers(), [&](Operation *user) {
            return !members.contains(user);
          }))
        escaping.push_back(result);

  OpBuilder b(first);
  auto kernel = b.create<KernelOp>(
      first->getLoc(), ValueRange(escaping).getTypes(),
      KernelKindAttr::get(first->getContext(), group.kind), TilesAttr());
  Block *body = b.createBlock(&kernel.getBody());
  for (Operation *op : inside)
    op->moveBefore(body, body->end());
  b.setInsertionPointToEnd(body);
  b.create<YieldOp>(first->getLoc(), escaping);
  for (auto [value, result] : llvm::zip(escaping, kernel.getResults()))
    value.replaceUsesWithIf(result, [&](OpOperand &use) {
      return use.getOwner()->getParentOp() != kernel.getOperation();
    });
}

struct MoeFuseKernelsPass
    : public mlir::moe::impl::MoeFuseKernelsBase<MoeFuseKernelsPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!func->hasAttr(attrs::kEntry))
        continue;
      if (!func.getBody().front().getOps<KernelOp>().empty()) {
        func.emitOpError("is fused already");
        return signalPassFailure();
      }
      llvm::DenseMap<Value, SymShape> shapes;
      if (failed(computeSymbolicShapes(func, shapes)))
        return signalPassFailure();
      for (const Grouper::Group &group :
           Grouper(func, std::move(shapes)).run())
        outline(group);
    }
  }
};

} // namespace
