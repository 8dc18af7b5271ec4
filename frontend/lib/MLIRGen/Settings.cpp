//===- Settings.cpp - a model's settings as module attributes -------------===//
//
// moe.model, moe.training, moe.data and moe.generate: what the bundle
// carries besides the programs, for the runtime's data pipeline, tokenizer,
// decoding and reports.
//
//===----------------------------------------------------------------------===//

#include "ModuleEmitter.h"

using namespace moec::frontend;
using namespace mlir;
using namespace mlir::moe;

namespace {

const char *kindName(ModelKind kind) {
  switch (kind) {
  case ModelKind::Decoder:
    return "decoder";
  case ModelKind::Encoder:
    return "encoder";
  case ModelKind::EncoderDecoder:
    return "encoder_decoder";
  }
  return "";
}

const char *objectiveName(Objective objective) {
  switch (objective) {
  case Objective::Lm:
    return "lm";
  case Objective::Mlm:
    return "mlm";
  case Objective::Classify:
    return "classify";
  case Objective::Translate:
    return "translate";
  }
  return "";
}

} // namespace

void ModuleEmitter::setModuleAttributes(ModuleOp module) {
  const TrainSpec &t = spec.train;
  auto f = [&](double v) { return b.getF64FloatAttr(v); };
  auto i = [&](int64_t v) { return b.getI64IntegerAttr(v); };
  auto s = [&](StringRef v) { return b.getStringAttr(v); };
  auto strings = [&](const std::vector<std::string> &values) {
    SmallVector<Attribute> list;
    for (const std::string &v : values)
      list.push_back(s(v));
    return b.getArrayAttr(list);
  };
  // Every routed layer reports its expert load under its parameter path.
  SmallVector<Attribute> moeLayers;
  int64_t blocks = 0;
  for (const StackSpec &stack : model.stacks) {
    blocks += static_cast<int64_t>(stack.blocks.size());
    for (auto [index, block] : llvm::enumerate(stack.blocks))
      for (const SublayerSpec &sub : block.sublayers)
        if (sub.kind == SublayerSpec::Kind::Moe ||
            sub.kind == SublayerSpec::Kind::Moa)
          moeLayers.push_back(s(prefix(stack, index, sub)));
  }
  SmallVector<NamedAttribute> modelAttrs = {
      b.getNamedAttr("name", s(model.name)),
      b.getNamedAttr("kind", s(kindName(model.kind))),
      b.getNamedAttr("objective", s(objectiveName(model.objective))),
      b.getNamedAttr("vocab", i(model.vocab)),
      b.getNamedAttr("d_model", i(model.dModel)),
      b.getNamedAttr("max_seq", i(model.maxSeq)),
      b.getNamedAttr("blocks", i(blocks)),
      b.getNamedAttr("dtype", s(model.dtype)),
      b.getNamedAttr("segments", i(model.segments)),
      b.getNamedAttr("moe_layers", b.getArrayAttr(moeLayers)),
      b.getNamedAttr("tokenizer",
                     b.getDictionaryAttr(
                         {b.getNamedAttr("kind", s(model.tokenizer.kind)),
                          b.getNamedAttr("path", s(model.tokenizer.path)),
                          b.getNamedAttr("sha256",
                                         s(model.tokenizer.sha256))})),
  };
  if (model.objective == Objective::Classify)
    modelAttrs.push_back(b.getNamedAttr("classes", i(model.classes)));
  if (model.objective == Objective::Mlm)
    modelAttrs.push_back(b.getNamedAttr(
        "mlm", b.getDictionaryAttr(
                   {b.getNamedAttr("rate", f(model.mlm.rate)),
                    b.getNamedAttr("mask", f(model.mlm.maskRate)),
                    b.getNamedAttr("random", f(model.mlm.randomRate)),
                    b.getNamedAttr("max_predictions",
                                   i(model.mlm.maxPredictions))})));
  module->setAttr(attrs::kModel, b.getDictionaryAttr(modelAttrs));
  SmallVector<NamedAttribute> trainingAttrs = {
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
      b.getNamedAttr("cv_loss", f(t.cvLoss)),
      b.getNamedAttr("label_smoothing", f(t.labelSmoothing)),
  };
  // Only the schedule that has a power names one.
  if (t.schedule == LrSchedule::Polynomial)
    trainingAttrs.push_back(b.getNamedAttr("power", f(t.power)));
  module->setAttr(attrs::kTraining, b.getDictionaryAttr(trainingAttrs));
  const DataSourceSpec &d = spec.data;
  module->setAttr(attrs::kData,
                  b.getDictionaryAttr({
                      b.getNamedAttr("kind", s(d.kind)),
                      b.getNamedAttr("task", s(d.task)),
                      b.getNamedAttr("paths", strings(d.paths)),
                      b.getNamedAttr("labels", strings(d.labels)),
                      b.getNamedAttr("task_seed", i(d.taskSeed)),
                      b.getNamedAttr("branching", i(d.branching)),
                      b.getNamedAttr("valid_fraction", f(d.validFraction)),
                  }));
  if (model.kind == ModelKind::EncoderDecoder) {
    const GenerateSpec &g = spec.generate;
    module->setAttr(attrs::kGenerate,
                    b.getDictionaryAttr({
                        b.getNamedAttr("beam", i(g.beam)),
                        b.getNamedAttr("length_penalty", f(g.lengthPenalty)),
                        b.getNamedAttr("max_len_a", f(g.maxLenA)),
                        b.getNamedAttr("max_len_b", i(g.maxLenB)),
                    }));
  }
}
