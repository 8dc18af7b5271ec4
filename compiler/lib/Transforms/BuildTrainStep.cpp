//===- BuildTrainStep.cpp - moe-build-train-step --------------------------===//
//
// train_step = backward + learning-rate schedule + gradient clipping + one
// optimizer update per trainable parameter. Optimizer moments become
// `moe.state` declarations that shadow their parameter. A parameter with a
// `row_norm` is rescaled first (moe.rescale_rows), and the step reads and
// updates the rescaled value.
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

/// Typed access to the module's `moe.training` dictionary with located
/// errors for missing or mistyped entries.
class TrainingSettings {
public:
  TrainingSettings(ModuleOp module, DictionaryAttr dict)
      : module(module), dict(dict) {}

  FailureOr<double> number(StringRef key, std::optional<double> fallback = {}) {
    Attribute a = dict.get(key);
    if (!a && fallback)
      return *fallback;
    if (auto f = dyn_cast_or_null<FloatAttr>(a))
      return f.getValueAsDouble();
    if (auto i = dyn_cast_or_null<IntegerAttr>(a))
      return static_cast<double>(i.getInt());
    return module.emitError("moe.training needs a number '") << key << "'";
  }
  FailureOr<StringRef> string(StringRef key) {
    if (auto s = dyn_cast_or_null<StringAttr>(dict.get(key)))
      return s.getValue();
    return module.emitError("moe.training needs a string '") << key << "'";
  }

private:
  ModuleOp module;
  DictionaryAttr dict;
};

struct Optimizer {
  std::string kind; // adam, adamw, sgd
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0,
         momentum = 0, clipNorm = 0;
  LrSchedule schedule = LrSchedule::Constant;
  double lr = 0, finalLr = 0, power = 1;
  int64_t warmup = 0, totalSteps = 0;

  unsigned numMoments() const { return kind == "sgd" ? 1 : 2; }
};

FailureOr<Optimizer> readOptimizer(ModuleOp module) {
  auto dict = module->getAttrOfType<DictionaryAttr>(attrs::kTraining);
  if (!dict)
    return module.emitError("no training settings: expected a moe.training "
                            "module attribute");
  TrainingSettings s(module, dict);
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

LogicalResult buildTrainStep(ModuleOp module, func::FuncOp backward) {
  FailureOr<Optimizer> opt = readOptimizer(module);
  if (failed(opt))
    return failure();
  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  ParamTable params(module);

  // Trainable parameters, in argument order; their gradients are the last
  // results of backward, in the same order.
  SmallVector<unsigned> paramArgs;
  for (unsigned i = 0, e = backward.getNumArguments(); i < e; ++i)
    if (params.isTrainableParam(backward, i))
      paramArgs.push_back(i);
  unsigned numOutputs = backward.getNumResults() - paramArgs.size();

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
  const char *momentNames[] = {"opt.m.", "opt.v."};
  for (unsigned arg : paramArgs) {
    ParamOp param = params.boundParam(backward, arg);
    b.setInsertionPointAfter(param);
    auto &list = moments.emplace_back();
    auto type = cast<RankedTensorType>(param.getType());
    for (unsigned m = 0; m < opt->numMoments(); ++m)
      list.push_back(b.create<StateOp>(
          param.getLoc(),
          b.getStringAttr((momentNames[m] + param.getSymName()).str()),
          TypeAttr::get(type), toDimsAttr(ctx, symShapeOf(type)),
          FlatSymbolRefAttr::get(param.getSymNameAttr())));
  }

  // The signature: backward's arguments, the moments, the step.
  func::FuncOp step = cloneEntry(backward, "train_step", "train_step");
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
  types.push_back(RankedTensorType::get({}, b.getI64Type()));
  argAttrs.push_back(DictionaryAttr::get(
      ctx, {NamedAttribute(StringAttr::get(ctx, attrs::kInput),
                           StringAttr::get(ctx, "step"))}));
  locs.push_back(step.getLoc());
  indices.assign(types.size(), step.getNumArguments());
  step.insertArguments(indices, types, argAttrs, locs);
  Value stepValue = step.getArguments().back();
  rescaleRowNormParams(step, params);

  Operation *terminator = body.getTerminator();
  b.setInsertionPoint(terminator);
  Location loc = step.getLoc();
  SmallVector<Value> grads(terminator->getOperands().drop_front(numOutputs));

  Value lr = b.create<LrScheduleOp>(
      loc, RankedTensorType::get({}, b.getF32Type()), stepValue,
      LrScheduleAttr::get(ctx, opt->schedule), b.getF64FloatAttr(opt->lr),
      b.getI64IntegerAttr(opt->warmup), b.getI64IntegerAttr(opt->totalSteps),
      b.getF64FloatAttr(opt->finalLr),
      // The default stays implicit, so plans of other schedules read as
      // before.
      opt->power == 1.0 ? FloatAttr() : b.getF64FloatAttr(opt->power));
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
  results.push_back(lr);
  resultAttrs.push_back(named(attrs::kOutput, StringAttr::get(ctx, "lr")));
  results.push_back(norm);
  resultAttrs.push_back(named(attrs::kOutput, StringAttr::get(ctx, "grad_norm")));

  unsigned momentArg = backward.getNumArguments();
  for (auto [i, arg] : llvm::enumerate(paramArgs)) {
    Value p = readValue(step.getArgument(arg)), g = grads[i];
    ParamOp param = params.boundParam(step, arg);
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
    if (findEntry(module, "train_step"))
      return; // Already built.
    func::FuncOp backward = findEntry(module, "backward");
    if (!backward) {
      module.emitError("no gradient program: run moe-build-backward first");
      return signalPassFailure();
    }
    if (failed(buildTrainStep(module, backward)))
      signalPassFailure();
  }
};

} // namespace
