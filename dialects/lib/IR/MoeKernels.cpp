//===- MoeKernels.cpp - fused kernel groups and their tiles ---------------===//
//
// The rules a fused group follows, by kind: the op its kernel starts from,
// the ops it may absorb after it, and the tiles its emitter reads. The
// fusion pass builds groups by these rules; the verifier holds any plan to
// them, so that no later pass can break a group unnoticed.
//
//===----------------------------------------------------------------------===//

#include "moe/IR/MoeOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::moe;

namespace {

bool producesScalar(Operation *op) {
  return op->getNumResults() == 1 && isScalarTensor(op->getResult(0));
}

/// Which ops a kernel of `kind` may hold: `first` for the op that starts
/// it, otherwise for the ops it absorbs.
bool kindAccepts(KernelKind kind, Operation *op, bool first) {
  switch (kind) {
  case KernelKind::Elementwise:
    // moe.rope reads a partner element of its x (verify() keeps x outside).
    // moe.rope reads a partner element of its x and moe.head_mixture its
    // head's g (verify() keeps both outside).
    return (isElementwiseOp(op) || isa<RopeOp, HeadMixtureOp>(op)) &&
           !producesScalar(op);
  case KernelKind::Scalar:
    return (isElementwiseOp(op) || isa<LrScheduleOp>(op)) &&
           producesScalar(op);
  case KernelKind::Embedding:
    return first ? isa<EmbeddingOp, AddPositionsOp>(op)
                 : isa<AddPositionsOp, DropoutOp>(op);
  case KernelKind::Gemm:
    return first ? isa<LinearOp>(op)
                 : isElementwiseOp(op) || isa<LinearOp, KvCacheWriteOp>(op);
  case KernelKind::Router:
    return first ? isa<LinearOp, TopKRouterOp, ZLossOp, SwitchLossOp,
                       ExpertLoadOp>(op)
                 : isa<TopKRouterOp, ZLossOp, SwitchLossOp, ExpertLoadOp>(op);
  case KernelKind::Experts:
    return first ? isa<ExpertFfnOp>(op) : isa<arith::AddFOp>(op);
  case KernelKind::ExpertReduce:
    return first ? isa<ExpertReduceOp>(op) : isa<arith::AddFOp>(op);
  case KernelKind::Norm:
    return first ? isa<arith::AddFOp, LayerNormOp, RmsNormOp>(op)
                 : isa<LayerNormOp, RmsNormOp>(op);
  case KernelKind::GlobalNorm:
    return first ? isa<GlobalNormOp>(op)
                 : isElementwiseOp(op) && producesScalar(op);
  case KernelKind::Optimizer:
    return isa<AdamUpdateOp, SgdUpdateOp>(op);
  // Kinds of a single op.
  case KernelKind::EmbeddingGrad:
    return first && isa<EmbeddingGradOp>(op);
  case KernelKind::PositionsGrad:
    return first && isa<AddPositionsGradOp>(op);
  case KernelKind::GemmGrad:
    return first && isa<LinearGradOp>(op);
  case KernelKind::NormGrad:
    return first && isa<LayerNormGradOp, RmsNormGradOp>(op);
  case KernelKind::Attention:
    return first && isa<AttentionOp>(op);
  case KernelKind::AttentionGrad:
    return first && isa<AttentionGradOp>(op);
  case KernelKind::KvWrite:
    // The cache writes of one decoding position share one launch.
    return isa<KvCacheWriteOp>(op);
  case KernelKind::RouterGrad:
    return first && isa<TopKRouterGradOp>(op);
  case KernelKind::SwitchLossGrad:
    return first && isa<SwitchLossGradOp>(op);
  case KernelKind::ZLossGrad:
    return first && isa<ZLossGradOp>(op);
  case KernelKind::ExpertsGrad:
    return first && isa<ExpertFfnGradOp>(op);
  case KernelKind::CrossEntropy:
    return first && isa<CrossEntropyOp>(op);
  case KernelKind::CrossEntropyGrad:
    return first && isa<CrossEntropyGradOp>(op);
  case KernelKind::ExpertMap:
    return first && isa<ExpertMapOp>(op);
  case KernelKind::ExpertMapGrad:
    return first && isa<ExpertMapGradOp>(op);
  case KernelKind::ExpertReduceGrad:
    return first && isa<ExpertReduceGradOp>(op);
  case KernelKind::CvLoss:
    return first && isa<CvLossOp>(op);
  case KernelKind::CvLossGrad:
    return first && isa<CvLossGradOp>(op);
  case KernelKind::RoutingStats:
    return first && isa<RoutingStatsOp>(op);
  case KernelKind::RowScale:
    return first && isa<NormalizeRowsOp, RescaleRowsOp>(op);
  case KernelKind::RowScaleGrad:
    return first && isa<NormalizeRowsGradOp>(op);
  case KernelKind::FiniteOrMin:
    return first && isa<FiniteOrMinOp>(op);
  case KernelKind::FiniteOrMinGrad:
    return first && isa<FiniteOrMinGradOp>(op);
  case KernelKind::BatchNorm:
    return first && isa<BatchNormOp>(op);
  case KernelKind::BatchNormGrad:
    return first && isa<BatchNormGradOp>(op);
  case KernelKind::WindowMean:
    return first && isa<WindowMeanOp>(op);
  case KernelKind::WindowMeanGrad:
    return first && isa<WindowMeanGradOp>(op);
  case KernelKind::HeadMixtureGrad:
    return first && isa<HeadMixtureGradOp>(op);
  case KernelKind::SampleExpert:
    return first && isa<SampleExpertOp>(op);
  case KernelKind::GateStats:
    return first && isa<GateStatsOp>(op);
  }
  return false;
}

/// The tile fields a kind's emitter reads, by name.
SmallVector<StringRef> requiredTiles(KernelKind kind) {
  switch (kind) {
  case KernelKind::Gemm:
  case KernelKind::GemmGrad:
    return {"threads", "tile_m", "tile_n", "tile_k"};
  case KernelKind::Experts:
  case KernelKind::ExpertsGrad:
  case KernelKind::ExpertMap:
  case KernelKind::ExpertMapGrad:
  case KernelKind::ExpertReduce:
  case KernelKind::ExpertReduceGrad:
    return {"threads", "tile_m", "tile_n", "tile_k", "dispatch_threads"};
  case KernelKind::CvLoss:
  case KernelKind::CvLossGrad:
  case KernelKind::RoutingStats:
  case KernelKind::WindowMean:
  case KernelKind::WindowMeanGrad:
  case KernelKind::HeadMixtureGrad:
  case KernelKind::SampleExpert:
  case KernelKind::GateStats:
    return {"threads"};
  case KernelKind::Attention:
  case KernelKind::AttentionGrad:
    return {"threads", "tile_q", "tile_k", "head_dim"};
  case KernelKind::Norm:
  case KernelKind::NormGrad:
  case KernelKind::Router:
  case KernelKind::RouterGrad:
  case KernelKind::SwitchLossGrad:
  case KernelKind::ZLossGrad:
  case KernelKind::CrossEntropy:
  case KernelKind::CrossEntropyGrad:
  case KernelKind::RowScale:
  case KernelKind::RowScaleGrad:
    return {"threads", "rows_per_block"};
  case KernelKind::Scalar:
    return {"threads"};
  case KernelKind::Elementwise:
  case KernelKind::Embedding:
  case KernelKind::EmbeddingGrad:
  case KernelKind::PositionsGrad:
  case KernelKind::KvWrite:
  case KernelKind::GlobalNorm:
  case KernelKind::Optimizer:
  case KernelKind::FiniteOrMin:
  case KernelKind::FiniteOrMinGrad:
  case KernelKind::BatchNorm:
  case KernelKind::BatchNormGrad:
    return {"threads", "items"};
  }
  return {};
}

/// The fields of `tiles` that are set, by name.
SmallVector<std::pair<StringRef, int64_t>> presentTiles(TilesAttr tiles) {
  SmallVector<std::pair<StringRef, int64_t>> fields;
  auto add = [&](StringRef name, std::optional<int64_t> value) {
    if (value)
      fields.push_back({name, *value});
  };
  add("threads", tiles.getThreads());
  add("tile_m", tiles.getTileM());
  add("tile_n", tiles.getTileN());
  add("tile_k", tiles.getTileK());
  add("tile_q", tiles.getTileQ());
  add("head_dim", tiles.getHeadDim());
  add("dispatch_threads", tiles.getDispatchThreads());
  add("rows_per_block", tiles.getRowsPerBlock());
  add("items", tiles.getItems());
  return fields;
}

/// A gemm kernel computes one moe.linear and its epilogue, or several
/// projections of one input in one tile (decoding's query, key and value),
/// each with at most the cache write of its product right after it.
LogicalResult verifyGemmMembers(KernelOp kernel) {
  SmallVector<Operation *> members;
  for (Operation &op : kernel.getMembers())
    if (!isa<arith::ConstantOp>(op))
      members.push_back(&op);
  bool projections =
      llvm::count_if(members, [](Operation *op) { return isa<LinearOp>(op); }) >
          1 ||
      llvm::any_of(members,
                   [](Operation *op) { return isa<KvCacheWriteOp>(op); });
  if (!projections)
    return success();
  auto first = cast<LinearOp>(members.front());
  for (auto [i, op] : llvm::enumerate(members)) {
    if (auto write = dyn_cast<KvCacheWriteOp>(op)) {
      Operation *before = members[i - 1];
      if (!isa<LinearOp>(before) || write.getUpdate() != before->getResult(0))
        return op->emitOpError("in a 'gemm' kernel stores the product of the "
                               "moe.linear just before it");
      continue;
    }
    auto linear = dyn_cast<LinearOp>(op);
    if (!linear)
      return op->emitOpError("cannot be fused into a 'gemm' kernel of "
                             "several projections or a cache write");
    if (!projectsSameInput(first, linear))
      return op->emitOpError("in a 'gemm' kernel of several projections "
                             "reads the first one's input with its weight "
                             "layout and element types");
  }
  return success();
}

} // namespace

/// `gemm`: the kind as a bare keyword.
ParseResult mlir::moe::parseKernelKind(OpAsmParser &parser,
                                       KernelKindAttr &kind) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<KernelKind> value = symbolizeKernelKind(keyword);
  if (!value)
    return parser.emitError(loc, "unknown kernel kind '") << keyword << "'";
  kind = KernelKindAttr::get(parser.getContext(), *value);
  return success();
}

void mlir::moe::printKernelKind(OpAsmPrinter &printer, Operation *,
                                KernelKindAttr kind) {
  printer << stringifyKernelKind(kind.getValue());
}

bool mlir::moe::isScalarTensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getRank() == 0;
}

bool mlir::moe::isElementwiseOp(Operation *op) {
  return isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
             arith::NegFOp, arith::MaximumFOp, arith::MinimumFOp, ActivationOp,
             ActivationGradOp, DropoutOp, DropoutGradOp, CastOp>(op);
}

bool mlir::moe::projectsSameInput(LinearOp a, LinearOp b) {
  return a.getX() == b.getX() &&
         a.getTransposeWeight() == b.getTransposeWeight() &&
         getElementTypeOrSelf(a.getWeight()) ==
             getElementTypeOrSelf(b.getWeight()) &&
         getElementTypeOrSelf(a.getResult()) ==
             getElementTypeOrSelf(b.getResult());
}

SmallVector<std::pair<StringRef, int64_t>> TilesAttr::fields() const {
  SmallVector<std::pair<StringRef, int64_t>> fields = presentTiles(*this);
  llvm::sort(fields, [](auto &a, auto &b) { return a.first < b.first; });
  return fields;
}

LogicalResult
TilesAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                  std::optional<int64_t> threads, std::optional<int64_t> tileM,
                  std::optional<int64_t> tileN, std::optional<int64_t> tileK,
                  std::optional<int64_t> tileQ, std::optional<int64_t> headDim,
                  std::optional<int64_t> dispatchThreads,
                  std::optional<int64_t> rowsPerBlock,
                  std::optional<int64_t> items) {
  for (auto [name, value] :
       {std::make_pair("tile_m", tileM), std::make_pair("tile_n", tileN),
        std::make_pair("tile_k", tileK), std::make_pair("tile_q", tileQ),
        std::make_pair("head_dim", headDim),
        std::make_pair("rows_per_block", rowsPerBlock),
        std::make_pair("items", items)})
    if (value && *value < 1)
      return emitError() << name << " must be at least 1, got " << *value;
  for (auto [name, value] :
       {std::make_pair("threads", threads),
        std::make_pair("dispatch_threads", dispatchThreads)})
    if (value && (*value < 1 || *value > 1024 ||
                  (*value != 1 && *value % 32 != 0)))
      return emitError() << name
                         << " must be 1 or a multiple of 32 up to 1024, got "
                         << *value;
  return success();
}

Value KernelOp::getYielded(unsigned resultIndex) {
  return getBody().front().getTerminator()->getOperand(resultIndex);
}

LogicalResult KernelOp::verify() {
  Block &body = getBody().front();
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("body must end in moe.yield");
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("yields ")
           << yield.getValues().getTypes() << " but its results are "
           << getResultTypes();
  bool planned = false;
  bool first = true;
  for (Operation &op : getMembers()) {
    if (isa<arith::ConstantOp>(op))
      continue;
    if (isa<KernelOp>(op))
      return op.emitOpError("cannot be nested in another moe.kernel");
    if (!kindAccepts(getKind(), &op, first))
      return op.emitOpError("cannot ")
             << (first ? "start" : "follow earlier ops in") << " a '"
             << stringifyKernelKind(getKind()) << "' kernel";
    // A kernel holds one element of a value in registers, but moe.rope
    // reads two elements of x: x must be in memory already.
    if (auto rope = dyn_cast<RopeOp>(op))
      if (Operation *def = rope.getX().getDefiningOp())
        if (def->getParentOp() == getOperation())
          return op.emitOpError("reads x at two elements, so x must come "
                                "from before its kernel");
    // moe.head_mixture reads g at its own index, not at the element.
    if (auto mixture = dyn_cast<HeadMixtureOp>(op))
      if (Operation *def = mixture.getG().getDefiningOp())
        if (def->getParentOp() == getOperation())
          return op.emitOpError("reads g per row and head, so g must come "
                                "from before its kernel");
    // Threads of one write do not see another write's cache rows; a GEMM
    // stores into a cache from before it (verifyGemmMembers: the product
    // of the projection just before the write).
    if (auto write = dyn_cast<KvCacheWriteOp>(op)) {
      auto inside = [&](Value v) {
        Operation *def = v.getDefiningOp();
        return def && def->getParentOp() == getOperation() &&
               !isa<arith::ConstantOp>(def);
      };
      if (getKind() == KernelKind::Gemm) {
        if (inside(write.getCache()) || inside(write.getPast()))
          return op.emitOpError("in a 'gemm' kernel stores into a cache "
                                "from before it");
      } else if (llvm::any_of(op.getOperands(), inside)) {
        return op.emitOpError("reads a value of its own kernel; a cache "
                              "write's operands must come from before it");
      }
    }
    first = false;
    planned = planned || op.hasAttr(attrs::kStep);
  }
  if (first)
    return emitOpError("has no ops");
  if (getKind() == KernelKind::Gemm && failed(verifyGemmMembers(*this)))
    return failure();
  if (!getTiles()) {
    if (planned)
      return emitOpError("is planned (its ops have moe.step) but has no "
                         "tiles: run moe-tile-kernels before "
                         "moe-lower-to-plan");
    return success();
  }
  SmallVector<StringRef> required = requiredTiles(getKind());
  SmallVector<std::pair<StringRef, int64_t>> present =
      presentTiles(*getTiles());
  for (StringRef name : required)
    if (!llvm::any_of(present, [&](auto &f) { return f.first == name; }))
      return emitOpError("'")
             << stringifyKernelKind(getKind()) << "' kernel needs the tile '"
             << name << "'";
  for (auto &[name, value] : present)
    if (!llvm::is_contained(required, name))
      return emitOpError("'")
             << stringifyKernelKind(getKind())
             << "' kernel does not use the tile '" << name << "'";
  return success();
}

LogicalResult YieldOp::verify() {
  auto kernel = (*this)->getParentOfType<KernelOp>();
  for (Value v : getValues()) {
    Operation *def = v.getDefiningOp();
    if (!def || def->getParentOp() != kernel.getOperation())
      return emitOpError("yields a value not computed in its kernel");
  }
  return success();
}
