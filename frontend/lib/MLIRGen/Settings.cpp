//===- Settings.cpp - a model's settings as module attributes -------------===//
//
// moe.model, moe.training, moe.data and moe.generate: what the bundle
// carries besides the programs, for the runtime's data pipeline, tokenizer,
// decoding and reports.
//
//===----------------------------------------------------------------------===//

#include "ModuleEmitter.h"
#include "moec/Frontend/ReadSpec.h"

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

/// Whether `name` matches `pattern`, in which `*` stands for any run of
/// characters (dots included) and every other character for itself.
bool globMatches(StringRef pattern, StringRef name) {
  // Greedy with backtracking to the last star: linear in practice.
  size_t p = 0, n = 0, star = StringRef::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (p < pattern.size() && pattern[p] == name[n]) {
      ++p;
      ++n;
    } else if (star != StringRef::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*')
    ++p;
  return p == pattern.size();
}

/// An optimizer and its schedule as moe.training spells them (the main
/// optimizer's keys, which moe-build-train-step reads).
SmallVector<NamedAttribute> optimizerAttrs(OpBuilder &b, const OptimizerSpec &o,
                                           int64_t totalSteps) {
  auto f = [&](double v) { return b.getF64FloatAttr(v); };
  SmallVector<NamedAttribute> attrs = {
      b.getNamedAttr("optimizer", b.getStringAttr(o.optimizer)),
      b.getNamedAttr("lr", f(o.lr)),
      b.getNamedAttr("beta1", f(o.beta1)),
      b.getNamedAttr("beta2", f(o.beta2)),
      b.getNamedAttr("eps", f(o.eps)),
      b.getNamedAttr("weight_decay", f(o.weightDecay)),
      b.getNamedAttr("momentum", f(o.momentum)),
      b.getNamedAttr("schedule",
                     b.getStringAttr(stringifyLrSchedule(o.schedule))),
      b.getNamedAttr("warmup", b.getI64IntegerAttr(o.warmup)),
      b.getNamedAttr("total_steps", b.getI64IntegerAttr(totalSteps)),
      b.getNamedAttr("final_lr", f(o.finalLr)),
  };
  // Only the schedule that has a power names one.
  if (o.schedule == LrSchedule::Polynomial)
    attrs.push_back(b.getNamedAttr("power", f(o.power)));
  return attrs;
}

} // namespace

bool ModuleEmitter::assignGroups() {
  bool ok = true;
  std::vector<std::string> names;
  for (const ParamDecl &p : params)
    names.push_back(p.name);
  for (const ParamGroupSpec &g : spec.train.groups)
    for (const ParamGroupSpec::Pattern &pattern : g.patterns) {
      size_t matched = 0, frozen = 0;
      std::vector<std::pair<std::string, std::string>> taken;
      for (ParamDecl &p : params) {
        if (!globMatches(pattern.glob, p.name))
          continue;
        if (p.frozen) {
          ++frozen;
          continue;
        }
        ++matched;
        if (!p.group.empty() && p.group != g.name)
          taken.push_back({p.name, p.group});
        else
          p.group = g.name;
      }
      if (!taken.empty()) {
        auto diag = emitError(locationOf(pattern.range))
                    << "pattern \"" << pattern.glob << "\" of group '" << g.name
                    << "' matches parameter '" << taken[0].first << "'";
        if (taken.size() > 1)
          diag << " (and " << taken.size() - 1 << " more)";
        diag << ", which group '" << taken[0].second
             << "' holds already; a parameter belongs to one group";
        ok = false;
      }
      if (matched == 0) {
        auto diag = emitError(locationOf(pattern.range))
                    << "pattern \"" << pattern.glob << "\" of group '" << g.name
                    << "' matches no trainable parameter";
        std::string near = pattern.glob.find('*') == std::string::npos
                               ? nearestName(pattern.glob, names)
                               : std::string();
        if (frozen > 0)
          diag << ", only frozen ones, which no group trains";
        else if (!near.empty())
          diag << "; did you mean \"" << near << "\"?";
        else if (!names.empty())
          diag << " (`*` stands for any run of characters; parameter paths "
                  "read like '"
               << names.back() << "')";
        ok = false;
      }
    }
  return ok;
}

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
  // Only when set, so that fp32 bundles read as before.
  if (model.f32Matmul != "fp32")
    modelAttrs.push_back(b.getNamedAttr("f32_matmul", s(model.f32Matmul)));
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
  // Each optimizer's schedule runs over its own updates: under coordinate
  // descent the group phi trains in G steps, every other parameter in F
  // steps.
  int64_t gSteps = t.phases ? t.phases->gSteps.gStepsIn(t.steps) : 0;
  int64_t fSteps = t.phases ? t.phases->gSteps.fStepsIn(t.steps) : t.steps;
  SmallVector<NamedAttribute> trainingAttrs =
      optimizerAttrs(b, t, fSteps);
  trainingAttrs.append({
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
  });
  if (!t.groups.empty()) {
    SmallVector<Attribute> groups;
    for (const ParamGroupSpec &g : t.groups) {
      bool phi = t.phases && t.phases->group == g.name;
      SmallVector<NamedAttribute> group =
          optimizerAttrs(b, g, phi ? gSteps : fSteps);
      std::vector<std::string> patterns;
      for (const ParamGroupSpec::Pattern &p : g.patterns)
        patterns.push_back(p.glob);
      group.push_back(b.getNamedAttr("name", s(g.name)));
      group.push_back(b.getNamedAttr("patterns", strings(patterns)));
      groups.push_back(b.getDictionaryAttr(group));
    }
    trainingAttrs.push_back(b.getNamedAttr("groups", b.getArrayAttr(groups)));
  }
  if (t.phases) {
    const moec::support::PhaseSchedule &g = t.phases->gSteps;
    bool every = g.kind == moec::support::PhaseSchedule::Kind::Every;
    SmallVector<NamedAttribute> phases = {
        b.getNamedAttr("kind", s("coordinate_descent")),
        b.getNamedAttr("group", s(t.phases->group)),
        b.getNamedAttr("g_steps", s(every ? "every" : "first"))};
    if (every)
      phases.append({b.getNamedAttr("period", i(g.period)),
                     b.getNamedAttr("length", i(g.length)),
                     b.getNamedAttr("offset", i(g.offset))});
    else
      phases.push_back(b.getNamedAttr("first", i(g.first)));
    if (g.thenF)
      phases.push_back(b.getNamedAttr("then_f", b.getBoolAttr(true)));
    trainingAttrs.push_back(
        b.getNamedAttr("phases", b.getDictionaryAttr(phases)));
  }
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
