//===- Layers.cpp - embeddings, stacks, sublayers and heads ---------------===//
//
// Each sublayer is a residual branch: pre-norm x + f(norm(x)), post-norm
// norm(x + f(x)). Padding: encoder self-attention masks padding keys, cross-
// attention masks padding source positions, MoA routers do not route
// padding queries; decoders are causal and right-padded, so their padding
// never reaches a real position.
//
//===----------------------------------------------------------------------===//

#include "ModuleEmitter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include <cmath>
#include <tuple>

using namespace moec::frontend;
using namespace mlir;
using namespace mlir::moe;

Value ModuleEmitter::embed(Function &fn, const StackSpec &stack, Value ids,
                           Value segments, Location loc) {
  double scale = model.embedScale ? std::sqrt(double(model.dModel)) : 1.0;
  Value x = b.create<EmbeddingOp>(loc, unranked(), ids,
                                  param(fn, tokenTable(stack)),
                                  b.getF64FloatAttr(scale));
  if (model.positions == Positions::Learned ||
      model.positions == Positions::Sinusoidal)
    x = b.create<AddPositionsOp>(loc, unranked(), x,
                                 param(fn, positionTable(stack)),
                                 firstPosition(fn, loc));
  if (segments)
    x = b.create<arith::AddFOp>(
        loc, x,
        b.create<EmbeddingOp>(loc, unranked(), segments,
                              param(fn, "embed.segments"),
                              b.getF64FloatAttr(1.0)));
  if (model.embedNorm)
    x = norm(fn, x, stackName(stack) + "embed.norm", loc);
  return dropout(fn, x, loc);
}

Value ModuleEmitter::runStack(Function &fn, const StackContext &sc, Value x) {
  const StackSpec &stack = *sc.stack;
  for (auto [i, block] : llvm::enumerate(stack.blocks))
    for (const SublayerSpec &sub : block.sublayers) {
      Location subLoc = locationOf(sub.range);
      std::string p = prefix(stack, i, sub);
      if (model.preNorm) {
        Value h = norm(fn, x, p + ".norm", subLoc);
        Value y = dropout(fn, sublayer(fn, sc, sub, p, h, subLoc), subLoc);
        x = b.create<arith::AddFOp>(subLoc, x, y);
      } else {
        Value y = dropout(fn, sublayer(fn, sc, sub, p, x, subLoc), subLoc);
        Value sum = b.create<arith::AddFOp>(subLoc, x, y);
        x = norm(fn, sum, p + ".norm", subLoc);
      }
    }
  if (model.preNorm)
    x = norm(fn, x, stackName(stack) + "final_norm", locationOf(model.range));
  return x;
}

Value ModuleEmitter::sublayer(Function &fn, const StackContext &sc,
                              const SublayerSpec &sub, const std::string &p,
                              Value h, Location loc) {
  switch (sub.kind) {
  case SublayerSpec::Kind::Attention:
    return attention(fn, sc, sub.attention, p, h, loc);
  case SublayerSpec::Kind::Moa:
    return moa(fn, sc, sub.moa, p, h, loc);
  case SublayerSpec::Kind::Ffn:
    return ffn(fn, sub.ffn, p, h, loc);
  case SublayerSpec::Kind::Moe:
    return moeLayer(fn, sub.moe, p, h, loc);
  }
  llvm_unreachable("unknown sublayer kind");
}

Value ModuleEmitter::firstPosition(Function &fn, Location loc) {
  if (fn.past)
    return fn.past;
  auto type = RankedTensorType::get({}, b.getI64Type());
  return b.create<arith::ConstantOp>(
      loc, DenseElementsAttr::get(type, b.getI64IntegerAttr(0)));
}

std::pair<Value, Value>
ModuleEmitter::projectKeysAndValues(Function &fn, const StackContext &sc,
                                    bool cross, const std::string &p, Value h,
                                    Location loc) {
  if (cross && fn.mode == Mode::Decode)
    return {fn.cacheArgs.at("xkv." + p + ".k"),
            fn.cacheArgs.at("xkv." + p + ".v")};
  Value source = cross ? sc.memory : h;
  return {linear(fn, source, p + ".wk", p + ".bk", loc),
          linear(fn, source, p + ".wv", p + ".bv", loc)};
}

std::pair<Value, Value> ModuleEmitter::cacheKeysAndValues(Function &fn,
                                                          bool cross,
                                                          const std::string &p,
                                                          Value k, Value v,
                                                          Location loc) {
  if (cross || fn.mode != Mode::Decode)
    return {k, v};
  std::string cache = "kv." + p;
  k = b.create<KvCacheWriteOp>(loc, unranked(), fn.cacheArgs.at(cache + ".k"),
                               k, fn.past);
  v = b.create<KvCacheWriteOp>(loc, unranked(), fn.cacheArgs.at(cache + ".v"),
                               v, fn.past);
  fn.updates.push_back({cache + ".k", k});
  fn.updates.push_back({cache + ".v", v});
  return {k, v};
}

std::pair<Value, Value>
ModuleEmitter::keysAndValues(Function &fn, const StackContext &sc, bool cross,
                             const std::string &p, Value h, Location loc) {
  auto [k, v] = projectKeysAndValues(fn, sc, cross, p, h, loc);
  return cacheKeysAndValues(fn, cross, p, k, v, loc);
}

namespace {

/// The keys a query may see beyond causality: the source's real positions
/// for cross-attention, the stack's real tokens in an encoder. Decoders are
/// causal over right-padded sequences and need no key mask.
Value keyMaskOf(const StackContext &sc, bool cross) {
  if (cross)
    return sc.memoryMask;
  return sc.stack->role == StackSpec::Role::Encoder ? sc.mask : Value();
}

} // namespace

Value ModuleEmitter::attention(Function &fn, const StackContext &sc,
                               const AttentionSpec &a, const std::string &p,
                               Value h, Location loc) {
  Value q = linear(fn, h, p + ".wq", p + ".bq", loc);
  auto [k, v] = projectKeysAndValues(fn, sc, a.cross, p, h, loc);
  if (!a.cross && a.rotaryDim > 0) {
    // Side by side, so that one kernel rotates both (when their widths
    // agree); the cache then holds rotated keys, as a full pass computes.
    Value start = firstPosition(fn, loc);
    q = rope(q, start, a.heads, a, loc);
    k = rope(k, start, a.kvHeads, a, loc);
  }
  std::tie(k, v) = cacheKeysAndValues(fn, a.cross, p, k, v, loc);
  Value past = !a.cross && fn.mode == Mode::Decode ? fn.past : Value();
  auto op = b.create<AttentionOp>(
      loc, TypeRange{unranked(), unrankedMaster()}, q, k, v, past,
      keyMaskOf(sc, a.cross), b.getI64IntegerAttr(a.heads),
      b.getI64IntegerAttr(a.kvHeads), b.getF64FloatAttr(a.scale),
      a.causal ? b.getUnitAttr() : UnitAttr());
  Value context = op.getResult();
  if (a.mae)
    context = maeMixture(fn, sc, *a.mae, a.heads, p, h, context, loc);
  return linear(fn, context, p + ".wo", p + ".bo", loc);
}

bool ModuleEmitter::trainsGates(const Function &fn) const {
  // F steps of coordinate descent freeze the gates, BatchNorm included.
  return fn.training() && !(fn.mode == Mode::Loss && coordinateDescent());
}

Value ModuleEmitter::maeMixture(Function &fn, const StackContext &sc,
                                const MaeSpec &mae, int64_t heads,
                                const std::string &p, Value h, Value context,
                                Location loc) {
  auto mixture = [&](Value g) {
    return b.create<HeadMixtureOp>(loc, unranked(), context, g,
                                   b.getI64IntegerAttr(heads))
        .getResult();
  };
  // One expert per sequence: the shared uniform of each sequence picks it
  // from every position's g (or uniformly).
  auto sampled = [&](Value probs, bool uniform) {
    return b.create<SampleExpertOp>(
               loc, UnrankedTensorType::get(b.getF32Type()), probs, fn.rng,
               b.getI64IntegerAttr(heads),
               b.getI64IntegerAttr(fn.dropoutStream++),
               uniform ? b.getUnitAttr() : UnitAttr())
        .getResult();
  };
  if (mae.uniform)
    return fn.training() ? mixture(sampled(h, /*uniform=*/true)) : context;
  Value g = maeGate(fn, sc, mae, heads, p, h, loc);
  if (fn.objective())
    fn.outputs.push_back(
        {"gate:" + p,
         b.create<GateStatsOp>(
              loc, RankedTensorType::get({heads + 1}, b.getF32Type()), g)
             .getResult()});
  if (fn.training() && !trainsGates(fn))
    g = sampled(g, /*uniform=*/false);
  return mixture(g);
}

Value ModuleEmitter::maeGate(Function &fn, const StackContext &sc,
                             const MaeSpec &mae, int64_t heads,
                             const std::string &p, Value h, Location loc) {
  // The summary: a mean over the window, over the layer's earlier inputs
  // (kept in the "pool." cache) when decoding.
  Value history, past;
  if (fn.mode == Mode::Decode && maePoolsHistory(mae)) {
    std::string cache = "pool." + p;
    history = b.create<KvCacheWriteOp>(loc, unranked(),
                                       fn.cacheArgs.at(cache), h, fn.past);
    fn.updates.push_back({cache, history});
    past = fn.past;
  }
  bool wholeSequence = mae.pool == MaeSpec::Pool::Sequence;
  PoolWindow window = wholeSequence ? PoolWindow::Sequence
                      : mae.pool == MaeSpec::Pool::Prefix
                          ? PoolWindow::Prefix
                          : PoolWindow::Last;
  Value pooled = b.create<WindowMeanOp>(
      loc, unranked(), h, history, past, wholeSequence ? sc.mask : Value(),
      PoolWindowAttr::get(ctx, window),
      b.getI64IntegerAttr(mae.windowSize));
  pooled = convert(pooled, masterType, loc);

  // BatchNorm over the pooled rows (padding positions of a decoder's
  // per-position summaries left out of the statistics).
  bool train = trainsGates(fn);
  auto statType = RankedTensorType::get({model.dModel}, masterType);
  auto bn = b.create<BatchNormOp>(
      loc, TypeRange{unrankedMaster(), statType, statType}, pooled,
      masterParam(fn, p + ".gate.bn.g"), masterParam(fn, p + ".gate.bn.b"),
      masterParam(fn, p + ".gate.bn.mean"),
      masterParam(fn, p + ".gate.bn.var"), wholeSequence ? Value() : sc.mask,
      b.getF64FloatAttr(mae.bnEps), b.getF64FloatAttr(mae.bnMomentum),
      train ? b.getUnitAttr() : UnitAttr());
  if (train) {
    fn.updates.push_back({p + ".gate.bn.mean", bn.getNewMean()});
    fn.updates.push_back({p + ".gate.bn.var", bn.getNewVar()});
  }
  Value z = b.create<LinearOp>(loc, unrankedMaster(), bn.getResult(),
                               masterParam(fn, p + ".gate.w1"),
                               masterParam(fn, p + ".gate.b1"), UnitAttr());
  z = b.create<ActivationOp>(loc, unrankedMaster(), z,
                             ActivationAttr::get(ctx, Activation::Tanh));
  if (train && fn.rng && mae.gateDropout > 0)
    z = b.create<DropoutOp>(loc, unrankedMaster(), z, fn.rng,
                            b.getF64FloatAttr(mae.gateDropout),
                            b.getI64IntegerAttr(fn.dropoutStream++));
  Value logits = b.create<LinearOp>(loc, unrankedMaster(), z,
                                    masterParam(fn, p + ".gate.w2"),
                                    masterParam(fn, p + ".gate.b2"),
                                    UnitAttr());
  // The softmax over the h experts: the probabilities of a top-1 router,
  // whose selection nothing reads.
  auto router = b.create<TopKRouterOp>(
      loc,
      TypeRange{unrankedMaster(), unrankedIndex(), unrankedMaster(),
                unrankedIndex()},
      logits, Value(), Value(), b.getI64IntegerAttr(1),
      GateWeightingAttr::get(ctx, GateWeighting::Raw),
      CapacityAttr::get(ctx, Capacity::None), b.getF64FloatAttr(1.0),
      b.getI64IntegerAttr(0), PriorityAttr::get(ctx, Priority::TokenOrder),
      b.getI64IntegerAttr(0), b.getI64IntegerAttr(0));
  return router.getProbs();
}

Value ModuleEmitter::rope(Value x, Value start, int64_t heads,
                          const AttentionSpec &a, Location loc) {
  return b.create<RopeOp>(loc, unranked(), x, start, b.getI64IntegerAttr(heads),
                          b.getI64IntegerAttr(a.headDim),
                          b.getI64IntegerAttr(a.rotaryDim),
                          b.getF64FloatAttr(model.rope.base), UnitAttr());
}

Value ModuleEmitter::moa(Function &fn, const StackContext &sc,
                         const MoaSpec &a, const std::string &p, Value h,
                         Location loc) {
  // The router in the master type over the query tokens; padding queries
  // (mask 0) are not routed. Sampled heads only in training.
  Value logits = b.create<LinearOp>(loc, unrankedMaster(),
                                    convert(h, masterType, loc),
                                    masterParam(fn, p + ".router"), Value(),
                                    UnitAttr());
  bool sample = fn.training() && a.sample > 0;
  auto router = b.create<TopKRouterOp>(
      loc,
      TypeRange{unrankedMaster(), unrankedIndex(), unrankedMaster(),
                unrankedIndex()},
      logits, sc.mask, sample ? fn.rng : Value(), b.getI64IntegerAttr(a.k),
      GateWeightingAttr::get(ctx, a.gate),
      CapacityAttr::get(ctx, Capacity::None), b.getF64FloatAttr(1.0),
      b.getI64IntegerAttr(0), PriorityAttr::get(ctx, Priority::TokenOrder),
      b.getI64IntegerAttr(sample ? a.sample : 0),
      b.getI64IntegerAttr(sample ? fn.dropoutStream++ : 0));
  // Every (token, head) query against the one shared K/V head.
  Value q = b.create<ExpertMapOp>(loc, unranked(), h, router.getExpert(),
                                  router.getSlot(), param(fn, p + ".wq"));
  auto [k, v] = keysAndValues(fn, sc, a.cross, p, h, loc);
  Value past = !a.cross && fn.mode == Mode::Decode ? fn.past : Value();
  auto context = b.create<AttentionOp>(
      loc, TypeRange{unranked(), unrankedMaster()}, q, k, v, past,
      keyMaskOf(sc, a.cross), b.getI64IntegerAttr(a.k),
      b.getI64IntegerAttr(1), b.getF64FloatAttr(a.scale),
      a.causal ? b.getUnitAttr() : UnitAttr());
  Value y = b.create<ExpertReduceOp>(loc, unranked(), context.getResult(),
                                     router.getExpert(), router.getGates(),
                                     router.getSlot(), param(fn, p + ".wo"));
  Value load = b.create<ExpertLoadOp>(
      loc, RankedTensorType::get({a.experts}, b.getF32Type()),
      router.getExpert(), router.getSlot(), b.getI64IntegerAttr(a.experts));
  fn.outputs.push_back({"load:" + p, load});
  if (!fn.objective())
    return y;
  const TrainSpec &t = spec.train;
  Value balance = b.create<SwitchLossOp>(loc, scalar(), router.getProbs(),
                                         router.getExpert(),
                                         BalanceLossAttr::get(
                                             ctx, BalanceLoss::AllSlots));
  Value z = b.create<ZLossOp>(loc, scalar(), logits);
  fn.balanceLosses.push_back(balance);
  fn.zLosses.push_back(z);
  auto &aux = a.auxPerToken ? fn.auxPerToken : fn.auxMean;
  aux.push_back({balance, t.balanceLoss});
  aux.push_back({z, t.zLoss});
  if (t.cvLoss > 0) {
    Value cv = b.create<CvLossOp>(loc, scalar(), router.getGates(),
                                  router.getExpert(),
                                  b.getI64IntegerAttr(a.experts));
    fn.cvLosses.push_back(cv);
    aux.push_back({cv, t.cvLoss});
  }
  return y;
}

Value ModuleEmitter::ffn(Function &fn, const FfnSpec &f, const std::string &p,
                         Value h, Location loc) {
  Value a =
      activation(linear(fn, h, p + ".w1", p + ".b1", loc), f.activation, loc);
  if (f.glu)
    a = b.create<arith::MulFOp>(loc, a, linear(fn, h, p + ".w3", "", loc));
  return linear(fn, a, p + ".w2", p + ".b2", loc);
}

/// The X-MoE gate: the sub-token projected to the embedding width, scored
/// against L2-normalised expert embeddings (their rows rescaled to norm 1.5
/// before each training step: `row_norm`), non-finite scores replaced by
/// the smallest finite one.
Value ModuleEmitter::xmoeLogits(Function &fn, const std::string &p, Value x,
                                Location loc) {
  Value reduced = b.create<LinearOp>(loc, unrankedMaster(), x,
                                     masterParam(fn, p + ".router_reduce"),
                                     Value(), UnitAttr());
  Value embed = masterParam(fn, p + ".router_embed");
  Value unit = b.create<NormalizeRowsOp>(loc, embed.getType(), embed,
                                         b.getF64FloatAttr(1e-4));
  Value scores = b.create<LinearOp>(loc, unrankedMaster(), reduced, unit,
                                    Value(), b.getUnitAttr());
  return b.create<FiniteOrMinOp>(loc, unrankedMaster(), scores);
}

Value ModuleEmitter::moeLayer(Function &fn, const MoeLayerSpec &e,
                              const std::string &p, Value h, Location loc) {
  // MH-MoE: the multi-head layer, then each token viewed as `heads`
  // sub-tokens (rows), which route like tokens.
  if (e.headProj)
    h = linear(fn, h, p + ".head_proj.w", p + ".head_proj.b", loc);
  if (e.heads > 1)
    h = b.create<SplitTokensOp>(loc, unranked(), h,
                                b.getI64IntegerAttr(e.heads));
  // The router runs in the master type (Switch Transformer's selective
  // precision): its softmax and top-k decide where every token goes.
  Value logits = e.xmoeDim > 0
                     ? xmoeLogits(fn, p, convert(h, masterType, loc), loc)
                     : b.create<LinearOp>(
                           loc, unrankedMaster(), convert(h, masterType, loc),
                           masterParam(fn, p + ".router"),
                           optionalMasterParam(fn, p + ".router_b"),
                           UnitAttr());
  bool training = fn.training();
  auto router = b.create<TopKRouterOp>(
      loc,
      TypeRange{unrankedMaster(), unrankedIndex(), unrankedMaster(),
                unrankedIndex()},
      logits, Value(), Value(), b.getI64IntegerAttr(e.k),
      GateWeightingAttr::get(ctx, e.gate),
      CapacityAttr::get(ctx, training ? e.capacity : e.evalCapacity),
      b.getF64FloatAttr(training ? e.capacityFactor : e.evalCapacityFactor),
      b.getI64IntegerAttr(training ? e.minCapacity : e.evalMinCapacity),
      PriorityAttr::get(ctx, e.priority), b.getI64IntegerAttr(0),
      b.getI64IntegerAttr(0));
  // What capacity dropped, and (MH-MoE) how many sub-tokens and experts
  // each token reached; emitted before the experts so that their residual
  // add can still join their kernel.
  Value stats = b.create<RoutingStatsOp>(
      loc, RankedTensorType::get({6}, b.getF32Type()), router.getExpert(),
      router.getSlot(), b.getI64IntegerAttr(e.heads),
      b.getI64IntegerAttr(e.experts));
  fn.outputs.push_back({"routing:" + p, stats});
  Value y = b.create<ExpertFfnOp>(
      loc, unranked(), h, router.getExpert(), router.getGates(),
      router.getSlot(), param(fn, p + ".w1"), optionalParam(fn, p + ".b1"),
      param(fn, p + ".w2"), optionalParam(fn, p + ".b2"),
      optionalParam(fn, p + ".w3"), ActivationAttr::get(ctx, e.activation));
  Value load = b.create<ExpertLoadOp>(
      loc, RankedTensorType::get({e.experts}, b.getF32Type()),
      router.getExpert(), router.getSlot(), b.getI64IntegerAttr(e.experts));
  fn.outputs.push_back({"load:" + p, load});
  if (fn.objective()) {
    const TrainSpec &t = spec.train;
    Value balance = b.create<SwitchLossOp>(
        loc, scalar(), router.getProbs(), router.getExpert(),
        BalanceLossAttr::get(ctx, e.balance));
    fn.balanceLosses.push_back(balance);
    fn.auxMean.push_back({balance, t.balanceLoss});
    if (e.zLoss) {
      Value z = b.create<ZLossOp>(loc, scalar(), logits);
      fn.zLosses.push_back(z);
      fn.auxMean.push_back({z, t.zLoss});
    }
  }
  if (e.heads > 1)
    y = b.create<MergeTokensOp>(loc, unranked(), y,
                                b.getI64IntegerAttr(e.heads));
  if (e.mergeProj)
    y = linear(fn, y, p + ".merge_proj.w", p + ".merge_proj.b", loc);
  return y;
}

Value ModuleEmitter::head(Function &fn, Value x, Location loc) {
  if (model.objective == Objective::Classify) {
    // BERT's pooler on every position (tanh(Dense)); the objective and the
    // runtime read position 0.
    Value pooled = activation(linear(fn, x, "pooler.w", "pooler.b", loc),
                              Activation::Tanh, loc);
    return linear(fn, dropout(fn, pooled, loc), "classifier.w",
                  "classifier.b", loc);
  }
  if (model.tieEmbeddings)
    return b.create<LinearOp>(loc, unranked(), x,
                              param(fn, tokenTable(model.stacks.back())),
                              Value(), b.getUnitAttr());
  return b.create<LinearOp>(loc, unranked(), x, param(fn, "head"), Value(),
                            UnitAttr());
}

Value ModuleEmitter::dropout(Function &fn, Value x, Location loc) {
  if (!fn.rng || model.dropout <= 0)
    return x;
  return b.create<DropoutOp>(loc, unranked(), x, fn.rng,
                             b.getF64FloatAttr(model.dropout),
                             b.getI64IntegerAttr(fn.dropoutStream++));
}

Value ModuleEmitter::norm(Function &fn, Value x, const std::string &name,
                          Location loc) {
  if (model.norm.kind == NormSpec::Kind::RmsNorm)
    return b.create<RmsNormOp>(loc, unranked(), x, param(fn, name + ".g"),
                               b.getF64FloatAttr(model.norm.eps));
  return b.create<LayerNormOp>(loc, unranked(), x, param(fn, name + ".g"),
                               param(fn, name + ".b"),
                               b.getF64FloatAttr(model.norm.eps));
}

Value ModuleEmitter::linear(Function &fn, Value x, const std::string &w,
                            const std::string &bias, Location loc) {
  return b.create<LinearOp>(loc, unranked(), x, param(fn, w),
                            bias.empty() ? Value() : optionalParam(fn, bias),
                            UnitAttr());
}

Value ModuleEmitter::activation(Value x, Activation kind, Location loc) {
  return b.create<ActivationOp>(loc, unranked(), x,
                                ActivationAttr::get(ctx, kind));
}
