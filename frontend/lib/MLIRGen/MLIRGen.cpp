//===- MLIRGen.cpp - ModelSpec -> moe dialect module ----------------------===//
//
// A decoder LM: token embedding (+ learned positions), blocks of residual
// sublayers (attention, dense FFN, MoE) with pre- or post-norm, a final norm
// and the output projection. Each entry function is emitted by walking the
// same spec, so training, inference and decoding cannot drift apart.
//
//===----------------------------------------------------------------------===//

#include "moec/Frontend/MLIRGen.h"
#include "moec/Frontend/ReadSpec.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include <cmath>
#include <map>

using namespace moec::frontend;
using namespace mlir;
using namespace mlir::moe;

namespace {

/// The entry functions: the training objective, the same objective without
/// dropout for evaluation, logits, and logits with a KV cache.
enum class Mode { Loss, EvalLoss, Forward, Decode };

struct ParamDecl {
  std::string name;
  RankedTensorType type;
  Init init;
  double scale;
};

class ModuleEmitter {
public:
  ModuleEmitter(const Spec &spec, MLIRContext *ctx, llvm::SourceMgr &sm)
      : spec(spec), model(spec.model), ctx(ctx), sourceMgr(sm), b(ctx) {
    // bf16 is mixed precision: activations, caches and the weights as
    // they are used are bf16; the parameters (master weights), the optimizer,
    // the router and the losses stay f32.
    floatType = model.dtype == "f64"    ? Type(b.getF64Type())
                : model.dtype == "bf16" ? Type(b.getBF16Type())
                                        : Type(b.getF32Type());
    masterType = model.dtype == "f64" ? Type(b.getF64Type()) : b.getF32Type();
  }

  OwningOpRef<ModuleOp> run() {
    Location loc = locationOf(model.range);
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    b.setInsertionPointToEnd(module->getBody());
    setModuleAttributes(*module);
    declareParameters(loc);
    for (const ParamDecl &p : params) {
      auto op = b.create<ParamOp>(loc, b.getStringAttr(p.name),
                                  TypeAttr::get(p.type),
                                  InitAttr::get(ctx, p.init),
                                  b.getF64FloatAttr(p.scale), UnitAttr());
      (void)op;
    }
    declareCaches(loc);
    emitFunction(Mode::Loss);
    if (model.dropout > 0)
      emitFunction(Mode::EvalLoss);
    emitFunction(Mode::Forward);
    emitFunction(Mode::Decode);
    return module;
  }

private:
  //===--------------------------------------------------------------------===//
  // Declarations.
  //===--------------------------------------------------------------------===//

  Location locationOf(llvm::SMRange range) {
    if (!range.Start.isValid())
      return UnknownLoc::get(ctx);
    return toLocation(sourceMgr, range.Start, ctx);
  }

  RankedTensorType tensor(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, masterType);
  }

  void addParam(std::string name, ArrayRef<int64_t> shape, Init init,
                double scale = 1.0) {
    params.push_back({std::move(name), tensor(shape), init, scale});
  }

  std::string prefix(size_t block, const SublayerSpec &sub) {
    return "layers." + std::to_string(block) + "." + sub.name;
  }

  void addNorm(const std::string &name) {
    addParam(name + ".g", {model.dModel}, Init::Ones);
    if (model.norm.kind == NormSpec::Kind::LayerNorm)
      addParam(name + ".b", {model.dModel}, Init::Zeros);
  }

  void declareParameters(Location loc) {
    int64_t d = model.dModel;
    double std = model.initStd;
    // GPT-2: residual output projections start smaller with depth.
    double residualStd =
        std / std::sqrt(2.0 * std::max<size_t>(1, model.blocks.size()));
    addParam("embed.tokens", {model.vocab, d}, Init::Normal, std);
    if (model.learnedPositions)
      addParam("embed.positions", {model.maxSeq, d}, Init::Normal, std);
    for (auto [i, block] : llvm::enumerate(model.blocks)) {
      for (const SublayerSpec &sub : block.sublayers) {
        std::string p = prefix(i, sub);
        addNorm(p + ".norm");
        switch (sub.kind) {
        case SublayerSpec::Kind::Attention: {
          const AttentionSpec &a = sub.attention;
          int64_t q = a.heads * a.headDim, kv = a.kvHeads * a.headDim;
          addParam(p + ".wq", {d, q}, Init::Normal, std);
          addParam(p + ".wk", {d, kv}, Init::Normal, std);
          addParam(p + ".wv", {d, kv}, Init::Normal, std);
          addParam(p + ".wo", {q, d}, Init::Normal, residualStd);
          if (a.bias) {
            addParam(p + ".bq", {q}, Init::Zeros);
            addParam(p + ".bk", {kv}, Init::Zeros);
            addParam(p + ".bv", {kv}, Init::Zeros);
            addParam(p + ".bo", {d}, Init::Zeros);
          }
          break;
        }
        case SublayerSpec::Kind::Ffn: {
          const FfnSpec &f = sub.ffn;
          addParam(p + ".w1", {d, f.hidden}, Init::Normal, std);
          if (f.bias)
            addParam(p + ".b1", {f.hidden}, Init::Zeros);
          if (f.glu)
            addParam(p + ".w3", {d, f.hidden}, Init::Normal, std);
          addParam(p + ".w2", {f.hidden, d}, Init::Normal, residualStd);
          if (f.bias)
            addParam(p + ".b2", {d}, Init::Zeros);
          break;
        }
        case SublayerSpec::Kind::Moe: {
          const MoeLayerSpec &e = sub.moe;
          addParam(p + ".router", {d, e.experts}, Init::Normal, std);
          if (e.routerBias)
            addParam(p + ".router_b", {e.experts}, Init::Zeros);
          addParam(p + ".w1", {e.experts, d, e.hidden}, Init::Normal, std);
          if (e.bias)
            addParam(p + ".b1", {e.experts, e.hidden}, Init::Zeros);
          if (e.glu)
            addParam(p + ".w3", {e.experts, d, e.hidden}, Init::Normal, std);
          addParam(p + ".w2", {e.experts, e.hidden, d}, Init::Normal,
                   residualStd);
          if (e.bias)
            addParam(p + ".b2", {e.experts, d}, Init::Zeros);
          break;
        }
        }
      }
    }
    if (model.preNorm)
      addNorm("final_norm");
    if (!model.tieEmbeddings)
      addParam("head", {d, model.vocab}, Init::Normal, std);
  }

  /// One K and one V cache per attention sublayer: [B, max_seq, Hkv * dh].
  void declareCaches(Location loc) {
    for (auto [i, block] : llvm::enumerate(model.blocks))
      for (const SublayerSpec &sub : block.sublayers) {
        if (sub.kind != SublayerSpec::Kind::Attention)
          continue;
        int64_t width = sub.attention.kvHeads * sub.attention.headDim;
        auto type = RankedTensorType::get(
            {ShapedType::kDynamic, model.maxSeq, width}, floatType);
        ArrayAttr dims = b.getArrayAttr({b.getStringAttr("B"),
                                         b.getI64IntegerAttr(model.maxSeq),
                                         b.getI64IntegerAttr(width)});
        for (const char *kv : {".k", ".v"}) {
          std::string name = "kv." + prefix(i, sub) + kv;
          b.create<StateOp>(loc, b.getStringAttr(name), TypeAttr::get(type),
                            dims, FlatSymbolRefAttr());
          caches.push_back({name, type});
        }
      }
  }

  void setModuleAttributes(ModuleOp module) {
    const TrainSpec &t = spec.train;
    auto f = [&](double v) { return b.getF64FloatAttr(v); };
    auto i = [&](int64_t v) { return b.getI64IntegerAttr(v); };
    auto s = [&](StringRef v) { return b.getStringAttr(v); };
    SmallVector<Attribute> moeLayers;
    for (auto [index, block] : llvm::enumerate(model.blocks))
      for (const SublayerSpec &sub : block.sublayers)
        if (sub.kind == SublayerSpec::Kind::Moe)
          moeLayers.push_back(s(prefix(index, sub)));
    module->setAttr(
        attrs::kModel,
        b.getDictionaryAttr({
            b.getNamedAttr("name", s(model.name)),
            b.getNamedAttr("kind", s("decoder")),
            b.getNamedAttr("vocab", i(model.vocab)),
            b.getNamedAttr("d_model", i(model.dModel)),
            b.getNamedAttr("max_seq", i(model.maxSeq)),
            b.getNamedAttr("blocks", i(model.blocks.size())),
            b.getNamedAttr("dtype", s(model.dtype)),
            b.getNamedAttr("moe_layers", b.getArrayAttr(moeLayers)),
        }));
    module->setAttr(
        attrs::kTraining,
        b.getDictionaryAttr({
            b.getNamedAttr("optimizer", s(t.optimizer)),
            b.getNamedAttr("lr", f(t.lr)),
            b.getNamedAttr("beta1", f(t.beta1)),
            b.getNamedAttr("beta2", f(t.beta2)),
            b.getNamedAttr("eps", f(t.eps)),
            b.getNamedAttr("weight_decay", f(t.weightDecay)),
            b.getNamedAttr("momentum", f(t.momentum)),
            b.getNamedAttr("schedule", s(stringifyLrSchedule(t.schedule))),
            b.getNamedAttr("warmup", i(t.warmup)),
            b.getNamedAttr("total_steps", i(t.steps)),
            b.getNamedAttr("final_lr", f(t.finalLr)),
            b.getNamedAttr("clip_norm", f(t.clipNorm)),
            b.getNamedAttr("batch", i(t.batch)),
            b.getNamedAttr("seq_len", i(t.seqLen)),
            b.getNamedAttr("steps", i(t.steps)),
            b.getNamedAttr("seed", i(t.seed)),
            b.getNamedAttr("log_every", i(t.logEvery)),
            b.getNamedAttr("balance_loss", f(t.balanceLoss)),
            b.getNamedAttr("z_loss", f(t.zLoss)),
            b.getNamedAttr("label_smoothing", f(t.labelSmoothing)),
        }));
    const DataSourceSpec &d = spec.data;
    module->setAttr(attrs::kData,
                    b.getDictionaryAttr({
                        b.getNamedAttr("kind", s(d.kind)),
                        b.getNamedAttr("task", s(d.task)),
                        b.getNamedAttr("path", s(d.path)),
                        b.getNamedAttr("task_seed", i(d.taskSeed)),
                        b.getNamedAttr("branching", i(d.branching)),
                        b.getNamedAttr("valid_fraction", f(d.validFraction)),
                    }));
  }

  //===--------------------------------------------------------------------===//
  // Functions.
  //===--------------------------------------------------------------------===//

  /// The state of the function being emitted.
  struct Function {
    Mode mode;
    std::map<std::string, Value> paramArgs;
    std::map<std::string, Value> cacheArgs;
    Value tokens, targets, rng, past;
    /// Parameters cast to the storage type, once per function.
    std::map<std::string, Value> storageParams;
    SmallVector<std::pair<std::string, Value>> outputs;
    SmallVector<std::pair<std::string, Value>> updates;
    SmallVector<Value> balanceLosses, zLosses;
    int64_t dropoutStream = 0;
  };

  /// Activations (the storage type).
  Type unranked() { return UnrankedTensorType::get(floatType); }
  /// Router values, attention statistics and losses (the master type).
  Type unrankedMaster() { return UnrankedTensorType::get(masterType); }
  Type unrankedIndex() { return UnrankedTensorType::get(b.getI32Type()); }
  Type scalar() { return RankedTensorType::get({}, masterType); }

  Value scalarConstant(Location loc, double v) {
    auto type = RankedTensorType::get({}, masterType);
    return b.create<arith::ConstantOp>(
        loc, DenseElementsAttr::get(type, FloatAttr::get(masterType, v)));
  }

  /// `v` with element type `element` (a moe.cast unless it has it).
  Value convert(Value v, Type element, Location loc) {
    if (cast<TensorType>(v.getType()).getElementType() == element)
      return v;
    return b.create<CastOp>(loc, UnrankedTensorType::get(element), v);
  }

  /// A parameter as the master weights (f32 under bf16).
  Value masterParam(Function &fn, const std::string &name) {
    auto it = fn.paramArgs.find(name);
    assert(it != fn.paramArgs.end() && "undeclared parameter");
    return it->second;
  }
  /// A parameter in the storage type, cast once per function.
  Value param(Function &fn, const std::string &name) {
    Value master = masterParam(fn, name);
    if (floatType == masterType)
      return master;
    Value &cached = fn.storageParams[name];
    if (!cached) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfterValue(master);
      cached = convert(master, floatType, master.getLoc());
    }
    return cached;
  }
  Value optionalParam(Function &fn, const std::string &name) {
    return fn.paramArgs.count(name) ? param(fn, name) : Value();
  }
  Value optionalMasterParam(Function &fn, const std::string &name) {
    return fn.paramArgs.count(name) ? masterParam(fn, name) : Value();
  }

  void emitFunction(Mode mode) {
    Function fn;
    fn.mode = mode;
    bool dropout = mode == Mode::Loss && model.dropout > 0;
    SmallVector<Type> argTypes;
    SmallVector<DictionaryAttr> argAttrs;
    for (const ParamDecl &p : params) {
      argTypes.push_back(p.type);
      argAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
          attrs::kParam, FlatSymbolRefAttr::get(ctx, p.name))));
    }
    auto tokensType = RankedTensorType::get(
        {ShapedType::kDynamic, ShapedType::kDynamic}, b.getI32Type());
    auto tokenDims =
        b.getArrayAttr({b.getStringAttr("B"), b.getStringAttr("S")});
    auto input = [&](StringRef name, Type type, ArrayAttr dims) {
      argTypes.push_back(type);
      SmallVector<NamedAttribute> a{
          b.getNamedAttr(attrs::kInput, b.getStringAttr(name))};
      if (dims)
        a.push_back(b.getNamedAttr(attrs::kDims, dims));
      argAttrs.push_back(b.getDictionaryAttr(a));
    };
    auto i64Scalar = RankedTensorType::get({}, b.getI64Type());
    bool objective = mode == Mode::Loss || mode == Mode::EvalLoss;
    input("tokens", tokensType, tokenDims);
    if (objective)
      input("targets", tokensType, tokenDims);
    if (dropout)
      input("rng", i64Scalar, ArrayAttr());
    if (mode == Mode::Decode) {
      input("past", i64Scalar, ArrayAttr());
      for (auto &[name, type] : caches) {
        argTypes.push_back(type);
        argAttrs.push_back(b.getDictionaryAttr(
            {b.getNamedAttr(attrs::kState, FlatSymbolRefAttr::get(ctx, name)),
             b.getNamedAttr(attrs::kDims,
                            b.getArrayAttr({b.getStringAttr("B"),
                                            b.getI64IntegerAttr(type.getDimSize(1)),
                                            b.getI64IntegerAttr(type.getDimSize(2))}))}));
      }
    }

    StringRef name = mode == Mode::Loss       ? "loss"
                     : mode == Mode::EvalLoss ? "eval_loss"
                     : mode == Mode::Forward  ? "forward"
                                              : "decode";
    Location loc = locationOf(model.range);
    auto func = b.create<func::FuncOp>(loc, name,
                                       b.getFunctionType(argTypes, {}));
    func->setAttr(attrs::kEntry, b.getStringAttr(name));
    func.setAllArgAttrs(argAttrs);
    OpBuilder::InsertionGuard guard(b);
    Block *entry = func.addEntryBlock();
    b.setInsertionPointToStart(entry);

    unsigned arg = 0;
    for (const ParamDecl &p : params)
      fn.paramArgs[p.name] = entry->getArgument(arg++);
    fn.tokens = entry->getArgument(arg++);
    if (objective)
      fn.targets = entry->getArgument(arg++);
    if (dropout)
      fn.rng = entry->getArgument(arg++);
    if (mode == Mode::Decode) {
      fn.past = entry->getArgument(arg++);
      for (auto &[cacheName, type] : caches)
        fn.cacheArgs[cacheName] = entry->getArgument(arg++);
    }

    Value logits = emitBody(fn, loc);
    if (objective)
      emitObjective(fn, logits, loc);
    else
      fn.outputs.insert(fn.outputs.begin(),
                        {"logits", convert(logits, masterType, loc)});

    SmallVector<Value> results;
    SmallVector<DictionaryAttr> resultAttrs;
    for (auto &[outName, value] : fn.outputs) {
      results.push_back(value);
      resultAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(attrs::kOutput, b.getStringAttr(outName))));
    }
    for (auto &[target, value] : fn.updates) {
      results.push_back(value);
      resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
          attrs::kUpdate, FlatSymbolRefAttr::get(ctx, target))));
    }
    b.create<func::ReturnOp>(loc, results);
    func.setFunctionType(
        b.getFunctionType(argTypes, ValueRange(results).getTypes()));
    func.setAllResultAttrs(resultAttrs);
  }

  Value emitBody(Function &fn, Location loc) {
    Value x = b.create<EmbeddingOp>(loc, unranked(), fn.tokens,
                                    param(fn, "embed.tokens"));
    if (model.learnedPositions) {
      Value start = fn.past;
      if (!start) {
        auto type = RankedTensorType::get({}, b.getI64Type());
        start = b.create<arith::ConstantOp>(
            loc, DenseElementsAttr::get(type, b.getI64IntegerAttr(0)));
      }
      x = b.create<AddPositionsOp>(loc, unranked(), x,
                                   param(fn, "embed.positions"), start);
    }
    x = dropout(fn, x, loc);
    for (auto [i, block] : llvm::enumerate(model.blocks))
      for (const SublayerSpec &sub : block.sublayers) {
        Location subLoc = locationOf(sub.range);
        std::string p = prefix(i, sub);
        if (model.preNorm) {
          Value h = norm(fn, x, p + ".norm", subLoc);
          Value y = dropout(fn, sublayer(fn, sub, p, h, subLoc), subLoc);
          x = b.create<arith::AddFOp>(subLoc, x, y);
        } else {
          Value y = dropout(fn, sublayer(fn, sub, p, x, subLoc), subLoc);
          Value sum = b.create<arith::AddFOp>(subLoc, x, y);
          x = norm(fn, sum, p + ".norm", subLoc);
        }
      }
    if (model.preNorm)
      x = norm(fn, x, "final_norm", loc);
    if (model.tieEmbeddings)
      return b.create<LinearOp>(loc, unranked(), x, param(fn, "embed.tokens"),
                                Value(), b.getUnitAttr());
    return b.create<LinearOp>(loc, unranked(), x, param(fn, "head"), Value(),
                              UnitAttr());
  }

  Value dropout(Function &fn, Value x, Location loc) {
    if (!fn.rng)
      return x;
    return b.create<DropoutOp>(loc, unranked(), x, fn.rng,
                               b.getF64FloatAttr(model.dropout),
                               b.getI64IntegerAttr(fn.dropoutStream++));
  }

  Value norm(Function &fn, Value x, const std::string &name, Location loc) {
    if (model.norm.kind == NormSpec::Kind::RmsNorm)
      return b.create<RmsNormOp>(loc, unranked(), x, param(fn, name + ".g"),
                                 b.getF64FloatAttr(model.norm.eps));
    return b.create<LayerNormOp>(loc, unranked(), x, param(fn, name + ".g"),
                                 param(fn, name + ".b"),
                                 b.getF64FloatAttr(model.norm.eps));
  }

  Value linear(Function &fn, Value x, const std::string &w,
               const std::string &bias, Location loc) {
    return b.create<LinearOp>(loc, unranked(), x, param(fn, w),
                              bias.empty() ? Value() : optionalParam(fn, bias),
                              UnitAttr());
  }

  Value sublayer(Function &fn, const SublayerSpec &sub, const std::string &p,
                 Value h, Location loc) {
    switch (sub.kind) {
    case SublayerSpec::Kind::Attention:
      return attention(fn, sub.attention, p, h, loc);
    case SublayerSpec::Kind::Ffn:
      return ffn(fn, sub.ffn, p, h, loc);
    case SublayerSpec::Kind::Moe:
      return moeLayer(fn, sub.moe, p, h, loc);
    }
    llvm_unreachable("unknown sublayer kind");
  }

  Value attention(Function &fn, const AttentionSpec &a, const std::string &p,
                  Value h, Location loc) {
    Value q = linear(fn, h, p + ".wq", p + ".bq", loc);
    Value k = linear(fn, h, p + ".wk", p + ".bk", loc);
    Value v = linear(fn, h, p + ".wv", p + ".bv", loc);
    Value past;
    if (fn.mode == Mode::Decode) {
      std::string cache = "kv." + p;
      k = b.create<KvCacheWriteOp>(loc, unranked(), fn.cacheArgs[cache + ".k"],
                                   k, fn.past);
      v = b.create<KvCacheWriteOp>(loc, unranked(), fn.cacheArgs[cache + ".v"],
                                   v, fn.past);
      fn.updates.push_back({cache + ".k", k});
      fn.updates.push_back({cache + ".v", v});
      past = fn.past;
    }
    auto op = b.create<AttentionOp>(
        loc, TypeRange{unranked(), unrankedMaster()}, q, k, v, past, Value(),
        b.getI64IntegerAttr(a.heads), b.getI64IntegerAttr(a.kvHeads),
        b.getF64FloatAttr(a.scale), a.causal ? b.getUnitAttr() : UnitAttr());
    return linear(fn, op.getResult(), p + ".wo", p + ".bo", loc);
  }

  Value activation(Value x, Activation kind, Location loc) {
    return b.create<ActivationOp>(loc, unranked(), x,
                                  ActivationAttr::get(ctx, kind));
  }

  Value ffn(Function &fn, const FfnSpec &f, const std::string &p, Value h,
            Location loc) {
    Value a = activation(linear(fn, h, p + ".w1", p + ".b1", loc),
                         f.activation, loc);
    if (f.glu)
      a = b.create<arith::MulFOp>(loc, a, linear(fn, h, p + ".w3", "", loc));
    return linear(fn, a, p + ".w2", p + ".b2", loc);
  }

  Value moeLayer(Function &fn, const MoeLayerSpec &e, const std::string &p,
                 Value h, Location loc) {
    // The router runs in the master type (Switch Transformer's selective
    // precision): its softmax and top-k decide where every token goes.
    Value logits = b.create<LinearOp>(
        loc, unrankedMaster(), convert(h, masterType, loc),
        masterParam(fn, p + ".router"),
        optionalMasterParam(fn, p + ".router_b"), UnitAttr());
    auto router = b.create<TopKRouterOp>(
        loc,
        TypeRange{unrankedMaster(), unrankedIndex(), unrankedMaster(),
                  unrankedIndex()},
        logits, Value(), Value(), b.getI64IntegerAttr(e.k),
        GateWeightingAttr::get(ctx, e.gate), CapacityAttr::get(ctx, e.capacity),
        b.getF64FloatAttr(e.capacityFactor), b.getI64IntegerAttr(e.minCapacity),
        PriorityAttr::get(ctx, e.priority), b.getI64IntegerAttr(0),
        b.getI64IntegerAttr(0));
    Value y = b.create<ExpertFfnOp>(
        loc, unranked(), h, router.getExpert(), router.getGates(),
        router.getSlot(), param(fn, p + ".w1"), optionalParam(fn, p + ".b1"),
        param(fn, p + ".w2"), optionalParam(fn, p + ".b2"),
        optionalParam(fn, p + ".w3"), ActivationAttr::get(ctx, e.activation));
    Value load = b.create<ExpertLoadOp>(
        loc, RankedTensorType::get({e.experts}, b.getF32Type()),
        router.getExpert(), router.getSlot(),
        b.getI64IntegerAttr(e.experts));
    fn.outputs.push_back({"load:" + p, load});
    if (fn.mode == Mode::Loss || fn.mode == Mode::EvalLoss) {
      fn.balanceLosses.push_back(b.create<SwitchLossOp>(
          loc, scalar(), router.getProbs(), router.getExpert(),
          BalanceLossAttr::get(ctx, e.balance)));
      fn.zLosses.push_back(b.create<ZLossOp>(loc, scalar(), logits));
    }
    return y;
  }

  Value sum(ArrayRef<Value> values, Location loc) {
    Value total = values.front();
    for (Value v : values.drop_front())
      total = b.create<arith::AddFOp>(loc, total, v);
    return total;
  }

  void emitObjective(Function &fn, Value logits, Location loc) {
    const TrainSpec &t = spec.train;
    logits = convert(logits, masterType, loc);
    auto crossEntropy = b.create<CrossEntropyOp>(
        loc, TypeRange{scalar(), scalar()}, logits, fn.targets,
        b.getF64FloatAttr(t.labelSmoothing));
    Value ce = crossEntropy.getLoss();
    Value total = ce;
    SmallVector<std::pair<std::string, Value>> stats;
    stats.push_back({"ce", ce});
    if (!fn.balanceLosses.empty()) {
      Value balance = sum(fn.balanceLosses, loc);
      Value z = sum(fn.zLosses, loc);
      stats.push_back({"balance_loss", balance});
      stats.push_back({"z_loss", z});
      if (t.balanceLoss > 0)
        total = b.create<arith::AddFOp>(
            loc, total,
            b.create<arith::MulFOp>(loc, balance,
                                    scalarConstant(loc, t.balanceLoss)));
      if (t.zLoss > 0)
        total = b.create<arith::AddFOp>(
            loc, total,
            b.create<arith::MulFOp>(loc, z, scalarConstant(loc, t.zLoss)));
    }
    // The objective first, then the statistics, then the expert loads.
    auto loads = fn.outputs;
    fn.outputs.clear();
    fn.outputs.push_back({"loss", total});
    fn.outputs.append(stats.begin(), stats.end());
    fn.outputs.append(loads.begin(), loads.end());
  }

  const Spec &spec;
  const ModelSpec &model;
  MLIRContext *ctx;
  llvm::SourceMgr &sourceMgr;
  OpBuilder b;
  Type floatType, masterType;
  std::vector<ParamDecl> params;
  std::vector<std::pair<std::string, RankedTensorType>> caches;
};

} // namespace

OwningOpRef<ModuleOp> moec::frontend::generateModule(const Spec &spec,
                                                     MLIRContext *context,
                                                     llvm::SourceMgr &sourceMgr) {
  context->loadDialect<MoeDialect, func::FuncDialect, arith::ArithDialect>();
  return ModuleEmitter(spec, context, sourceMgr).run();
}
