//===- Functions.cpp - the entry functions of a model ---------------------===//
//
// Inputs (i32 unless noted; B, S and T are run-time sizes):
//   decoder          tokens [B, S], targets [B, S]
//   encoder          tokens, mask, segments (with segment embeddings) and
//                    targets, all [B, S]
//   encoder_decoder  source, source_mask [B, T]; tokens, mask, targets
//                    [B, S]
// plus rng (i64, training with dropout or sampled heads) and past (i64,
// decode). Masks are 1 at real tokens and 0 at padding; targets < 0 are not
// predicted.
//
//===----------------------------------------------------------------------===//

#include "ModuleEmitter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace moec::frontend;
using namespace mlir;
using namespace mlir::moe;

namespace {

const char *modeName(Mode mode) {
  switch (mode) {
  case Mode::Loss:
    return "loss";
  case Mode::EvalLoss:
    return "eval_loss";
  case Mode::Forward:
    return "forward";
  case Mode::Decode:
    return "decode";
  case Mode::Encode:
    return "encode";
  case Mode::GateLoss:
    return "loss_g";
  }
  return "";
}

/// The arguments of an entry function being declared, and their attributes.
struct Signature {
  SmallVector<Type> types;
  SmallVector<DictionaryAttr> attrs;
  /// The input names in argument order (after the parameters).
  SmallVector<std::string> inputs;
};

} // namespace

void ModuleEmitter::emitFunction(Mode mode) {
  Function fn;
  fn.mode = mode;
  // A G update and the F update after it (then_f) share the step's rng:
  // disjoint streams keep their draws independent.
  if (mode == Mode::GateLoss)
    fn.dropoutStream = int64_t(1) << 20;
  bool encDec = model.kind == ModelKind::EncoderDecoder;
  Signature sig;
  for (const ParamDecl &p : params) {
    sig.types.push_back(p.type);
    sig.attrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
        attrs::kParam, FlatSymbolRefAttr::get(ctx, p.name))));
  }
  auto dims = [&](ArrayRef<StringRef> names) {
    SmallVector<Attribute> list;
    for (StringRef n : names)
      list.push_back(b.getStringAttr(n));
    return b.getArrayAttr(list);
  };
  auto tokensType = RankedTensorType::get(
      {ShapedType::kDynamic, ShapedType::kDynamic}, b.getI32Type());
  auto i64Scalar = RankedTensorType::get({}, b.getI64Type());
  auto input = [&](StringRef name, Type type, ArrayAttr inputDims) {
    sig.types.push_back(type);
    SmallVector<NamedAttribute> a{
        b.getNamedAttr(attrs::kInput, b.getStringAttr(name))};
    if (inputDims)
      a.push_back(b.getNamedAttr(attrs::kDims, inputDims));
    sig.attrs.push_back(b.getDictionaryAttr(a));
    sig.inputs.push_back(name.str());
  };
  auto sequence = [&](StringRef name) {
    input(name, tokensType, dims({"B", "S"}));
  };
  auto source = [&](StringRef name) {
    input(name, tokensType, dims({"B", "T"}));
  };

  bool random = fn.training() && randomInTraining();
  if (encDec && mode != Mode::Decode) {
    source("source");
    source("source_mask");
  }
  if (mode != Mode::Encode) {
    sequence("tokens");
    if (model.kind != ModelKind::Decoder && mode != Mode::Decode)
      sequence("mask");
    if (model.segments > 0)
      sequence("segments");
    if (fn.objective())
      sequence("targets");
  }
  if (random)
    input("rng", i64Scalar, ArrayAttr());
  if (mode == Mode::Decode) {
    input("past", i64Scalar, ArrayAttr());
    if (encDec)
      source("source_mask");
  }
  size_t firstCache = sig.types.size();
  if (mode == Mode::Decode)
    for (const CacheDecl &c : caches) {
      sig.types.push_back(c.type);
      Attribute length = c.cross ? Attribute(b.getStringAttr("T"))
                                 : Attribute(b.getI64IntegerAttr(
                                       c.type.getDimSize(1)));
      sig.attrs.push_back(b.getDictionaryAttr(
          {b.getNamedAttr(attrs::kState,
                          FlatSymbolRefAttr::get(ctx, c.name)),
           b.getNamedAttr(attrs::kDims,
                          b.getArrayAttr({b.getStringAttr("B"), length,
                                          b.getI64IntegerAttr(
                                              c.type.getDimSize(2))}))}));
    }

  Location loc = locationOf(model.range);
  StringRef name = modeName(mode);
  auto func =
      b.create<func::FuncOp>(loc, name, b.getFunctionType(sig.types, {}));
  func->setAttr(attrs::kEntry, b.getStringAttr(name));
  func.setAllArgAttrs(sig.attrs);
  OpBuilder::InsertionGuard guard(b);
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);

  unsigned arg = 0;
  for (const ParamDecl &p : params)
    fn.paramArgs[p.name] = entry->getArgument(arg++);
  for (const std::string &inputName : sig.inputs)
    fn.inputs[inputName] = entry->getArgument(arg++);
  fn.rng = fn.input("rng");
  fn.past = fn.input("past");
  if (mode == Mode::Decode)
    for (auto [i, c] : llvm::enumerate(caches))
      fn.cacheArgs[c.name] = entry->getArgument(firstCache + i);

  Value logits;
  const StackSpec *encoder = model.encoder();
  const StackSpec *decoder = model.decoder();
  if (!encDec) {
    const StackSpec &stack = model.stacks.front();
    Value x = embed(fn, stack, fn.input("tokens"), fn.input("segments"), loc);
    x = runStack(fn, {&stack, fn.input("mask"), Value(), Value()}, x);
    logits = head(fn, x, loc);
  } else {
    Value memory;
    if (mode != Mode::Decode) {
      Value src = embed(fn, *encoder, fn.input("source"), Value(), loc);
      memory = runStack(
          fn, {encoder, fn.input("source_mask"), Value(), Value()}, src);
    }
    if (mode == Mode::Encode) {
      // The decoder's cross-attention keys and values of this source, for
      // every later decode call.
      StackContext sc{decoder, Value(), memory, fn.input("source_mask")};
      for (auto [i, block] : llvm::enumerate(decoder->blocks))
        for (const SublayerSpec &sub : block.sublayers) {
          bool cross =
              (sub.kind == SublayerSpec::Kind::Attention &&
               sub.attention.cross) ||
              (sub.kind == SublayerSpec::Kind::Moa && sub.moa.cross);
          if (!cross)
            continue;
          std::string p = prefix(*decoder, i, sub);
          auto [k, v] = keysAndValues(fn, sc, true, p, Value(),
                                      locationOf(sub.range));
          fn.updates.push_back({"xkv." + p + ".k", k});
          fn.updates.push_back({"xkv." + p + ".v", v});
        }
    } else {
      Value y = embed(fn, *decoder, fn.input("tokens"), Value(), loc);
      y = runStack(fn,
                   {decoder, fn.input("mask"), memory,
                    fn.input("source_mask")},
                   y);
      logits = head(fn, y, loc);
    }
  }

  if (fn.objective())
    emitObjective(fn, logits, loc);
  else if (logits)
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
      b.getFunctionType(sig.types, ValueRange(results).getTypes()));
  func.setAllResultAttrs(resultAttrs);
}

void ModuleEmitter::emitObjective(Function &fn, Value logits, Location loc) {
  const TrainSpec &t = spec.train;
  logits = convert(logits, masterType, loc);
  auto crossEntropy = b.create<CrossEntropyOp>(
      loc, TypeRange{scalar(), scalar(), scalar()}, logits, fn.input("targets"),
      b.getF64FloatAttr(t.labelSmoothing));
  Value ce = crossEntropy.getLoss();
  Value total = ce;
  SmallVector<std::pair<std::string, Value>> stats;
  stats.push_back({"ce", ce});
  // Accuracy from the same pass over the logits: evaluation sums both
  // counts over its batches.
  stats.push_back({"correct", crossEntropy.getCorrect()});
  stats.push_back({"predicted", crossEntropy.getCount()});
  if (!fn.balanceLosses.empty())
    stats.push_back({"balance_loss", sum(fn.balanceLosses, loc)});
  // MH-MoE layers have no z-loss.
  if (!fn.zLosses.empty())
    stats.push_back({"z_loss", sum(fn.zLosses, loc)});
  if (!fn.cvLosses.empty())
    stats.push_back({"cv_loss", sum(fn.cvLosses, loc)});
  auto weighted = [&](ArrayRef<Function::AuxTerm> terms) {
    SmallVector<Value> values;
    for (const Function::AuxTerm &a : terms)
      if (a.weight > 0)
        values.push_back(b.create<arith::MulFOp>(
            loc, a.term, scalarConstant(loc, a.weight)));
    return values;
  };
  SmallVector<Value> auxMean = weighted(fn.auxMean);
  SmallVector<Value> auxPerToken = weighted(fn.auxPerToken);
  if (!auxMean.empty())
    total = b.create<arith::AddFOp>(loc, total, sum(auxMean, loc));
  if (!auxPerToken.empty()) {
    // As if added to the cross-entropy summed over the target tokens: the
    // objective is divided by their count, the mean cross-entropy stays.
    Value count = b.create<arith::MaximumFOp>(loc, crossEntropy.getCount(),
                                              scalarConstant(loc, 1.0));
    total = b.create<arith::AddFOp>(
        loc, total,
        b.create<arith::DivFOp>(loc, sum(auxPerToken, loc), count));
  }
  // The objective first, then the statistics, then the expert loads.
  auto loads = fn.outputs;
  fn.outputs.clear();
  fn.outputs.push_back({"loss", total});
  fn.outputs.append(stats.begin(), stats.end());
  fn.outputs.append(loads.begin(), loads.end());
}

bool ModuleEmitter::coordinateDescent() const {
  return spec.train.phases.has_value();
}

bool ModuleEmitter::randomInTraining() const {
  bool random = model.dropout > 0;
  for (const StackSpec &stack : model.stacks)
    for (const BlockSpec &block : stack.blocks)
      for (const SublayerSpec &sub : block.sublayers) {
        random |= sub.kind == SublayerSpec::Kind::Moa && sub.moa.sample > 0;
        // MAE: gate dropout, and the expert drawn per sequence by the
        // uniform baseline and by F steps of coordinate descent.
        if (sub.kind == SublayerSpec::Kind::Attention && sub.attention.mae) {
          const MaeSpec &mae = *sub.attention.mae;
          random |= mae.uniform || mae.gateDropout > 0 || coordinateDescent();
        }
      }
  return random;
}

bool ModuleEmitter::routesDifferentlyInEval() const {
  for (const StackSpec &stack : model.stacks)
    for (const BlockSpec &block : stack.blocks)
      for (const SublayerSpec &sub : block.sublayers) {
        const MoeLayerSpec &e = sub.moe;
        if (sub.kind == SublayerSpec::Kind::Moe &&
            (e.capacity != e.evalCapacity ||
             e.capacityFactor != e.evalCapacityFactor ||
             e.minCapacity != e.evalMinCapacity))
          return true;
      }
  return false;
}

OwningOpRef<ModuleOp> ModuleEmitter::run() {
  Location loc = locationOf(model.range);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  setModuleAttributes(*module);
  paramSource = model.range;
  declareParameters();
  if (oversizedParam) {
    emitError(locationOf(oversizedParam->second))
        << "parameter '" << oversizedParam->first
        << "' would hold more than 2^40 elements, the most a tensor may "
           "have; make the layer smaller";
    return nullptr;
  }
  if (!assignGroups())
    return nullptr;
  for (const ParamDecl &p : params)
    b.create<ParamOp>(
        loc, b.getStringAttr(p.name), TypeAttr::get(p.type),
        InitAttr::get(ctx, p.init), b.getF64FloatAttr(p.scale),
        p.frozen ? b.getUnitAttr() : UnitAttr(),
        p.rowNorm > 0 ? b.getF64FloatAttr(p.rowNorm) : FloatAttr(),
        p.group.empty() ? StringAttr() : b.getStringAttr(p.group));
  declareCaches(loc);
  emitFunction(Mode::Loss);
  if (spec.train.phases)
    emitFunction(Mode::GateLoss);
  if (randomInTraining() || routesDifferentlyInEval())
    emitFunction(Mode::EvalLoss);
  emitFunction(Mode::Forward);
  if (model.kind == ModelKind::EncoderDecoder)
    emitFunction(Mode::Encode);
  if (model.kind != ModelKind::Encoder)
    emitFunction(Mode::Decode);
  return module;
}
