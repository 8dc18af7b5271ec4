//===- BuildTrainStep.cpp - moe-build-train-step --------------------------===//
//
// train_step = backward + learning-rate schedule + gradient clipping + one
// optimizer update per trainable parameter. Optimizer moments become
// `moe.state` declarations that shadow their parameter. A parameter with a
// `row_norm` is rescaled first (moe.rescale_rows), and the step reads and
// updates the rescaled value.
//
// A parameter of a group (moe.param's `group`) trains with the group's
// optimizer and schedule, counted by the group's own update counter: the
// input "step:<group>" (the main optimizer's is "step"), whose learning rate
// the step outputs as "lr:<group>". Under block coordinate descent each
// phase's gradient program (backward, backward_g) becomes its train step
// (train_step, train_step_g); a parameter is trained by one of them, so it
// has one set of moments.
//
//===----------------------------------------------------------------------===//

#include "moec/Transforms/EntryPoints.h"
#include "moec/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEBUILDTRAINSTEP
#include "moec/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

/// Typed access to the module's `moe.training` dictionary (or one of its
/// groups) with located errors for missing or mistyped entries.
class TrainingSettings {
public:
  TrainingSettings(ModuleOp module, DictionaryAttr dict,
                   StringRef what = "moe.training")
      : module(module), dict(dict), what(what.str()) {}

  FailureOr<double> number(StringRef key, std::optional<double> fallback = {}) {
    Attribute a = dict.get(key);
    if (!a && fallback)
      return *fallback;
    if (auto f = dyn_cast_or_null<FloatAttr>(a))
      return f.getValueAsDouble();
    if (auto i = dyn_cast_or_null<IntegerAttr>(a))
      return static_cast<double>(i.getInt());
    return module.emitError(what) << " needs a number '" << key << "'";
  }
  FailureOr<StringRef> string(StringRef key) {
    if (auto s = dyn_cast_or_null<StringAttr>(dict.get(key)))
      return s.getValue();
    return module.emitError(what) << " needs a string '" << key << "'";
  }

private:
  ModuleOp module;
  DictionaryAttr dict;
  std::string what;
};

struct Optimizer {
  std::string kind; // adam, adamw, sgd
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0,
         momentum = 0, clipNorm = 0;
  LrSchedule schedule = LrSchedule::Constant;
  double lr = 0, finalLr = 0, power = 1;
  int64_t warmup = 0, totalSteps = 0;
  /// The input that counts this optimizer's updates, and the output of its
  /// learning rate: "step" and "lr" for the main optimizer, "step:<group>"
  /// and "lr:<group>" for a group's.
  std::string stepInput = "step", lrOutput = "lr";

  unsigned numMoments() const { return kind == "sgd" ? 1 : 2; }
};

FailureOr<Optimizer> readOptimizer(ModuleOp module, DictionaryAttr dict,
                                   StringRef what) {
  TrainingSettings s(module, dict, what);
  Optimizer o;
  FailureOr<StringRef> kind = s.string("optimizer");
  FailureOr<StringRef> schedule = s.string("schedule");
  if (failed(kind) || failed(schedule))
    return failure();
  o.kind = kind->str();
  if (o.kind != "adam" && o.kind != "adamw" && o.kind != "sgd")
    return module.emitError("unknown optimizer '") << o.kind
                                                   << "' (adam, adamw, sgd)";
  std::optional<LrSchedule> sched = symbolizeLrSchedule(*schedule);
  if (!sched)
    return module.emitError("unknown learning-rate schedule '")
           << *schedule << "'";
  o.schedule = *sched;
  auto get = [&](StringRef key, double &out, std::optional<double> fallback) {
    FailureOr<double> v = s.number(key, fallback);
    if (succeeded(v))
      out = *v;
    return succeeded(v);
  };
  double warmup = 0, total = 0;
  if (!get("lr", o.lr, {}) || !get("beta1", o.beta1, o.beta1) ||
      !get("beta2", o.beta2, o.beta2) || !get("eps", o.eps, o.eps) ||
      !get("weight_decay", o.weightDecay, 0.0) ||
      !get("momentum", o.momentum, 0.0) || !get("clip_norm", o.clipNorm, 0.0) ||
      !get("warmup", warmup, 0.0) || !get("total_steps", total, 0.0) ||
      !get("final_lr", o.finalLr, 0.0) || !get("power", o.power, 1.0))
    return failure();
  o.warmup = static_cast<int64_t>(warmup);
  o.totalSteps = static_cast<int64_t>(total);
  return o;
}

Value scalarConstant(OpBuilder &b, Location loc, Type elementType, double v) {
  auto type = RankedTensorType::get({}, elementType);
  return b.create<arith::ConstantOp>(
      loc, DenseElementsAttr::get(type, FloatAttr::get(elementType, v)));
}

/// Rescales every `row_norm` parameter of `step` at its entry and makes
/// every op of the step read the rescaled value instead, as the X-MoE gate
/// rescales its embeddings in place under no_grad before each forward.
void rescaleRowNormParams(func::FuncOp step, const ParamTable &params) {
  OpBuilder b(step.getContext());
  b.setInsertionPointToStart(&step.getBody().front());
  for (BlockArgument arg : step.getArguments()) {
    ParamOp param = params.boundParam(step, arg.getArgNumber());
    if (!param || !param.getRowNorm())
      continue;
    auto rescale = b.create<RescaleRowsOp>(
        param.getLoc(), arg.getType(), arg,
        b.getF64FloatAttr(param.getRowNorm()->convertToDouble()));
    arg.replaceAllUsesExcept(rescale.getResult(), rescale);
  }
}

/// What the step reads for a parameter argument: its rescaled value when it
/// has a row_norm (then its only reader), else the argument.
Value readValue(BlockArgument arg) {
  if (arg.hasOneUse())
    if (auto rescale = dyn_cast<RescaleRowsOp>(*arg.getUsers().begin()))
      return rescale.getResult();
  return arg;
}

/// The main optimizer (first) and each group's, in moe.training's order.
FailureOr<SmallVector<Optimizer>> readOptimizers(ModuleOp module) {
  auto dict = module->getAttrOfType<DictionaryAttr>(attrs::kTraining);
  if (!dict)
    return module.emitError("no training settings: expected a moe.training "
                            "module attribute");
  FailureOr<Optimizer> main = readOptimizer(module, dict, "moe.training");
  if (failed(main))
    return failure();
  SmallVector<Optimizer> optimizers{*main};
  auto groups = dict.getAs<ArrayAttr>("groups");
  for (Attribute a : groups ? groups.getValue() : ArrayRef<Attribute>()) {
    auto group = dyn_cast<DictionaryAttr>(a);
    auto name = group ? group.getAs<StringAttr>("name") : StringAttr();
    if (!name)
      return module.emitError("every group of moe.training needs a string "
                              "'name'");
    FailureOr<Optimizer> o = readOptimizer(
        module, group, ("moe.training group '" + name.getValue() + "'").str());
    if (failed(o))
      return failure();
    o->clipNorm = main->clipNorm;
    o->stepInput = ("step:" + name.getValue()).str();
    o->lrOutput = ("lr:" + name.getValue()).str();
    optimizers.push_back(*o);
  }
  return optimizers;
}

/// The index in `optimizers` of the one that trains `param`.
FailureOr<unsigned> optimizerOf(ParamOp param, ArrayRef<Optimizer> optimizers) {
  std::optional<StringRef> group = param.getGroup();
  if (!group)
    return 0u;
  for (unsigned i = 1; i < optimizers.size(); ++i)
    if (optimizers[i].stepInput == ("step:" + *group).str())
      return i;
  return param.emitOpError("names group \"")
         << *group << "\", which moe.training does not declare";
}

/// The moments of `param` (declared next to it once, whichever step
/// declares them first). `symbols` is the module's table, kept up to date:
/// a lookup in the module itself scans every op, quadratic in deep models.
SmallVector<StateOp, 2> declareMoments(OpBuilder &b, SymbolTable &symbols,
                                       ParamOp param, unsigned count) {
  const char *momentNames[] = {"opt.m.", "opt.v."};
  MLIRContext *ctx = param.getContext();
  SmallVector<StateOp, 2> list;
  b.setInsertionPointAfter(param);
  auto type = cast<RankedTensorType>(param.getType());
  for (unsigned m = 0; m < count; ++m) {
    std::string name = (momentNames[m] + param.getSymName()).str();
    if (auto existing = symbols.lookup<StateOp>(name)) {
      list.push_back(existing);
      continue;
    }
    list.push_back(b.create<StateOp>(
        param.getLoc(), b.getStringAttr(name), TypeAttr::get(type),
        toDimsAttr(ctx, symShapeOf(type)),
        FlatSymbolRefAttr::get(param.getSymNameAttr())));
    symbols.insert(list.back());
    b.setInsertionPointAfter(list.back());
  }
  return list;
}

LogicalResult buildTrainStep(ModuleOp module, func::FuncOp backward,
                             const TrainingProgram &program,
                             ArrayRef<Optimizer> optimizers) {
  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  ParamTable params(module);

  // Trained parameters, in argument order; their gradients are the last
  // results of backward, in the same order.
  SmallVector<unsigned> paramArgs, optimizerIndex;
  for (unsigned i = 0, e = backward.getNumArguments(); i < e; ++i)
    if (params.isTrainableParam(backward, i, program.trains)) {
      FailureOr<unsigned> index =
          optimizerOf(params.boundParam(backward, i), optimizers);
      if (failed(index))
        return failure();
      paramArgs.push_back(i);
      optimizerIndex.push_back(*index);
    }
  unsigned numOutputs = backward.getNumResults() - paramArgs.size();
  // The optimizers this step uses, in moe.training's order (the main one
  // when it trains nothing at all).
  SmallVector<unsigned> used;
  for (unsigned i = 0; i < optimizers.size(); ++i)
    if (llvm::is_contained(optimizerIndex, i))
      used.push_back(i);
  if (used.empty())
    used.push_back(0);

  // The objective's own updates (batch norm's running statistics, frozen
  // parameters) are kept; one of a trainable parameter would be a second
  // update of what the optimizer writes.
  for (unsigned i = 0; i < numOutputs; ++i) {
    auto target = backward.getResultAttrOfType<FlatSymbolRefAttr>(
        i, attrs::kUpdate);
    if (!target)
      continue;
    ParamOp param = params.lookup(target.getAttr());
    if (param && !param.getFrozen())
      return backward.emitOpError("result #")
             << i << " updates the trainable parameter " << target
             << ", which the optimizer updates too; only frozen parameters "
                "and state may be updated by the objective";
  }

  // Declare the optimizer moments next to their parameters.
  SmallVector<SmallVector<StateOp, 2>> moments;
  SymbolTable symbols(module);
  for (auto [arg, index] : llvm::zip(paramArgs, optimizerIndex))
    moments.push_back(declareMoments(b, symbols,
                                     params.boundParam(backward, arg),
                                     optimizers[index].numMoments()));

  // The signature: backward's arguments, the moments, the update counters.
  func::FuncOp step =
      cloneEntry(backward, program.trainStep, program.trainStep);
  Block &body = step.getBody().front();
  // Appended in one call: one at a time would build a new function type
  // per argument, N^2 work and memory for N parameters.
  SmallVector<unsigned> indices;
  SmallVector<Type> types;
  SmallVector<DictionaryAttr> argAttrs;
  SmallVector<Location> locs;
  for (auto &list : moments)
    for (StateOp state : list) {
      types.push_back(state.getType());
      argAttrs.push_back(DictionaryAttr::get(
          ctx, {NamedAttribute(StringAttr::get(ctx, attrs::kState),
                               FlatSymbolRefAttr::get(state.getSymNameAttr()))}));
      locs.push_back(state.getLoc());
    }
  for (unsigned index : used) {
    types.push_back(RankedTensorType::get({}, b.getI64Type()));
    argAttrs.push_back(DictionaryAttr::get(
        ctx,
        {NamedAttribute(StringAttr::get(ctx, attrs::kInput),
                        StringAttr::get(ctx, optimizers[index].stepInput))}));
    locs.push_back(step.getLoc());
  }
  unsigned firstCounter = step.getNumArguments() + types.size() - used.size();
  indices.assign(types.size(), step.getNumArguments());
  step.insertArguments(indices, types, argAttrs, locs);
  rescaleRowNormParams(step, params);

  Operation *terminator = body.getTerminator();
  b.setInsertionPoint(terminator);
  Location loc = step.getLoc();
  SmallVector<Value> grads(terminator->getOperands().drop_front(numOutputs));

  // Each optimizer's update counter and learning rate, by its index.
  llvm::DenseMap<unsigned, Value> stepValues, lrs;
  for (auto [k, index] : llvm::enumerate(used)) {
    const Optimizer &o = optimizers[index];
    Value counter = step.getArgument(firstCounter + k);
    stepValues[index] = counter;
    lrs[index] = b.create<LrScheduleOp>(
        loc, RankedTensorType::get({}, b.getF32Type()), counter,
        LrScheduleAttr::get(ctx, o.schedule), b.getF64FloatAttr(o.lr),
        b.getI64IntegerAttr(o.warmup), b.getI64IntegerAttr(o.totalSteps),
        b.getF64FloatAttr(o.finalLr),
        // The default stays implicit, so plans of other schedules read as
        // before.
        o.power == 1.0 ? FloatAttr() : b.getF64FloatAttr(o.power));
  }
  const Optimizer *opt = &optimizers.front();
  Type floatType = b.getF32Type();
  if (!grads.empty())
    floatType = cast<TensorType>(grads.front().getType()).getElementType();
  auto normType = RankedTensorType::get({}, floatType);
  Value norm = grads.empty() ? scalarConstant(b, loc, floatType, 0.0)
                             : b.create<GlobalNormOp>(loc, normType, grads)
                                   .getResult();
  Value scale = scalarConstant(b, loc, floatType, 1.0);
  if (opt->clipNorm > 0) {
    // scale = min(1, clip / (norm + 1e-6))
    Value denom = b.create<arith::AddFOp>(
        loc, norm, scalarConstant(b, loc, floatType, 1e-6));
    Value ratio = b.create<arith::DivFOp>(
        loc, scalarConstant(b, loc, floatType, opt->clipNorm), denom);
    scale = b.create<arith::MinimumFOp>(loc, ratio, scale);
  }

  SmallVector<Value> results(terminator->getOperands().take_front(numOutputs));
  SmallVector<Attribute> resultAttrs;
  for (unsigned i = 0; i < numOutputs; ++i)
    resultAttrs.push_back(step.getResultAttrDict(i));
  auto named = [&](StringRef key, Attribute value) {
    return DictionaryAttr::get(
        ctx, {NamedAttribute(StringAttr::get(ctx, key), value)});
  };
  for (unsigned index : used) {
    results.push_back(lrs[index]);
    resultAttrs.push_back(named(
        attrs::kOutput, StringAttr::get(ctx, optimizers[index].lrOutput)));
  }
  results.push_back(norm);
  resultAttrs.push_back(named(attrs::kOutput, StringAttr::get(ctx, "grad_norm")));

  unsigned momentArg = backward.getNumArguments();
  for (auto [i, arg] : llvm::enumerate(paramArgs)) {
    Value p = readValue(step.getArgument(arg)), g = grads[i];
    ParamOp param = params.boundParam(step, arg);
    opt = &optimizers[optimizerIndex[i]];
    Value lr = lrs[optimizerIndex[i]];
    Value stepValue = stepValues[optimizerIndex[i]];
    SmallVector<Value> updated;
    if (opt->kind == "sgd") {
      Value m = step.getArgument(momentArg++);
      auto op = b.create<SgdUpdateOp>(
          loc, p.getType(), m.getType(), p, g, m, lr, scale,
          b.getF64FloatAttr(opt->momentum),
          b.getF64FloatAttr(opt->weightDecay));
      updated = {op.getNewParam(), op.getNewM()};
    } else {
      Value m = step.getArgument(momentArg++);
      Value v = step.getArgument(momentArg++);
      auto op = b.create<AdamUpdateOp>(
          loc, p.getType(), m.getType(), v.getType(), p, g, m, v, stepValue,
          lr, scale, b.getF64FloatAttr(opt->beta1),
          b.getF64FloatAttr(opt->beta2), b.getF64FloatAttr(opt->eps),
          b.getF64FloatAttr(opt->weightDecay),
          opt->kind == "adamw" ? b.getUnitAttr() : UnitAttr());
      updated = {op.getNewParam(), op.getNewM(), op.getNewV()};
    }
    results.push_back(updated[0]);
    resultAttrs.push_back(named(
        attrs::kUpdate, FlatSymbolRefAttr::get(param.getSymNameAttr())));
    for (auto [k, state] : llvm::enumerate(moments[i])) {
      results.push_back(updated[k + 1]);
      resultAttrs.push_back(named(
          attrs::kUpdate, FlatSymbolRefAttr::get(state.getSymNameAttr())));
    }
  }
  b.create<func::ReturnOp>(terminator->getLoc(), results);
  terminator->erase();
  step.setFunctionType(FunctionType::get(ctx, step.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
  step.setAllResultAttrs(resultAttrs);
  return success();
}

struct MoeBuildTrainStepPass
    : public mlir::moe::impl::MoeBuildTrainStepBase<MoeBuildTrainStepPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<SmallVector<Optimizer>> optimizers;
    for (const TrainingProgram &program : trainingPrograms(module)) {
      if (findEntry(module, program.trainStep))
        continue; // Already built.
      func::FuncOp backward = findEntry(module, program.backward);
      if (!backward) {
        module.emitError("no gradient program '")
            << program.backward << "': run moe-build-backward first";
        return signalPassFailure();
      }
      if (!optimizers) {
        FailureOr<SmallVector<Optimizer>> read = readOptimizers(module);
        if (failed(read))
          return signalPassFailure();
        optimizers = std::move(*read);
      }
      if (failed(buildTrainStep(module, backward, program, *optimizers)))
        return signalPassFailure();
    }
  }
};

} // namespace
