//===- Sema.cpp - check a .moe file and extract its ModelSpec -------------===//
//
// Knows every section, layer kind and setting of language version 1. Each
// check reports at the setting (or node) it concerns and carries on, so one
// run lists every problem in the file.
//
//===----------------------------------------------------------------------===//

#include "moec/Frontend/Sema.h"
#include "moec/Frontend/LanguageSchema.h"
#include "Settings.h"
#include "moec/Frontend/ReadSpec.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include <cmath>

using namespace moec::frontend;
using namespace mlir::moe;
using llvm::StringRef;

namespace {

class Analyzer {
public:
  Analyzer(llvm::SourceMgr &sm, mlir::MLIRContext *ctx, StringRef dir)
      : reporter(sm, ctx), specDirectory(dir) {}

  std::optional<Spec> run(const SpecFile &file) {
    const SpecNode *model = nullptr, *train = nullptr, *data = nullptr;
    for (const SpecNode &section : file.sections) {
      const SpecNode **slot = section.kind == "model"   ? &model
                              : section.kind == "train" ? &train
                              : section.kind == "data"  ? &data
                                                        : nullptr;
      if (!slot) {
        auto diag = reporter.error(section.range.Start)
                    << "unknown section '" << section.kind
                    << "' (expected model, train or data)";
        std::string near =
            nearestName(section.kind, {"model", "train", "data"});
        if (!near.empty())
          diag << "; did you mean '" << near << "'?";
        continue;
      }
      if (*slot) {
        auto diag = reporter.error(section.range.Start)
                    << "a file has one '" << section.kind << "' section";
        diag.attachNote(toLocation(reporter.sources(), (*slot)->range.Start,
                                   reporter.getContext()))
            << "the first one is here";
        continue;
      }
      *slot = &section;
    }
    if (!model) {
      reporter.error(file.versionRange.Start)
          << "the file has no 'model' section";
      return std::nullopt;
    }
    Spec spec;
    analyzeModel(*model, spec.model);
    if (train)
      analyzeTrain(*train, spec);
    else
      spec.train.seqLen = spec.model.maxSeq;
    if (data)
      analyzeData(*data, spec);
    checkDataAgainstModel(data, *model, spec);
    if (reporter.failed())
      return std::nullopt;
    return spec;
  }

private:
  //===--------------------------------------------------------------------===//
  // model
  //===--------------------------------------------------------------------===//

  void analyzeModel(const SpecNode &node, ModelSpec &m) {
    m.name = node.label.empty() ? "model" : node.label;
    m.range = node.range;
    Settings s(node.settings, schemaOf("model"), node.range, reporter);
    size_t kind = s.getChoice("kind");
    if (kind != 0)
      reporter.error(s.get("kind")->range.Start)
          << "model kind '" << s.get("kind")->text
          << "' is not supported yet; this moec builds decoder models";
    m.vocab = s.getInt("vocab");
    m.dModel = s.getInt("d_model");
    m.maxSeq = s.getInt("max_seq");
    m.norm = analyzeNorm(s);
    m.preNorm = s.getChoice("norm_position") == 0;
    m.learnedPositions = s.getChoice("positions") == 0;
    m.tieEmbeddings = s.getBool("tie_embeddings");
    m.dropout = s.getFloat("dropout");
    m.initStd = s.getFloat("init_std");
    m.dtype = s.schema().find("dtype")->choices[s.getChoice("dtype")];
    s.finish();

    for (const SpecNode &child : node.children) {
      if (child.kind != "block") {
        reporter.error(child.range.Start)
            << "layer '" << child.kind
            << "' must be inside a block: write `repeat N { ... }` or "
               "`block { ... }`";
        continue;
      }
      m.blocks.push_back(analyzeBlock(child, m));
    }
    if (m.blocks.empty() && !reporter.failed())
      reporter.error(node.range.Start)
          << "the model has no blocks: add `repeat N { attention(...) "
             "ffn(...) }`";
  }

  /// The norm setting of the model: a name or a call (its eps).
  NormSpec analyzeNorm(Settings &model) {
    NormSpec norm;
    std::optional<std::string> name = model.getCallName("norm");
    if (!name)
      return norm;
    const SpecValue *value = model.get("norm");
    Settings s(callArguments(value),
               schemaOf("norm " + *name),
               value ? value->range : model.range(), reporter);
    norm.kind = *name == "rms_norm" ? NormSpec::Kind::RmsNorm
                                    : NormSpec::Kind::LayerNorm;
    norm.eps = s.getFloat("eps");
    s.finish();
    return norm;
  }

  BlockSpec analyzeBlock(const SpecNode &node, const ModelSpec &m) {
    BlockSpec block;
    if (!node.settings.empty())
      reporter.error(node.settings.front().nameRange.Start)
          << "a block holds layers, not settings; put '"
          << node.settings.front().name << "' on the model or a layer";
    std::map<std::string, int> counts;
    for (const SpecNode &child : node.children)
      ++counts[child.kind];
    std::map<std::string, int> seen;
    for (const SpecNode &child : node.children) {
      SublayerSpec sub;
      sub.range = child.range;
      std::string base;
      if (child.kind == "attention") {
        sub.kind = SublayerSpec::Kind::Attention;
        sub.attention = analyzeAttention(child, m);
        base = "attn";
      } else if (child.kind == "ffn") {
        sub.kind = SublayerSpec::Kind::Ffn;
        sub.ffn = analyzeFfn(child, m);
        base = "ffn";
      } else if (child.kind == "moe") {
        sub.kind = SublayerSpec::Kind::Moe;
        sub.moe = analyzeMoe(child, m);
        base = "moe";
      } else {
        auto diag = reporter.error(child.range.Start)
                    << "unknown layer '" << child.kind
                    << "' (attention, ffn or moe)";
        std::string near =
            nearestName(child.kind, {"attention", "ffn", "moe"});
        if (!near.empty())
          diag << "; did you mean '" << near << "'?";
        continue;
      }
      if (!child.children.empty())
        reporter.error(child.children.front().range.Start)
            << "layer '" << child.kind << "' cannot contain other layers";
      int index = seen[child.kind]++;
      sub.name = counts[child.kind] > 1 ? base + std::to_string(index) : base;
      block.sublayers.push_back(std::move(sub));
    }
    if (node.children.empty())
      reporter.error(node.range.Start) << "the block has no layers";
    return block;
  }

  AttentionSpec analyzeAttention(const SpecNode &node, const ModelSpec &m) {
    AttentionSpec a;
    Settings s(node.settings, schemaOf("layer attention"), node.range,
               reporter);
    a.heads = s.getInt("heads");
    a.kvHeads = s.getInt("kv_heads", a.heads);
    if (a.heads > 0 && a.heads % a.kvHeads != 0)
      reporter.error(s.get("kv_heads")->range.Start)
          << "heads (" << a.heads << ") must be a multiple of kv_heads ("
          << a.kvHeads << ")";
    int64_t defaultHeadDim =
        a.heads > 0 && m.dModel % a.heads == 0 ? m.dModel / a.heads : 0;
    if (!s.has("head_dim") && a.heads > 0 && m.dModel > 0 &&
        m.dModel % a.heads != 0)
      reporter.error(s.get("heads")->range.Start)
          << "d_model (" << m.dModel << ") is not divisible by heads ("
          << a.heads << "); set head_dim explicitly";
    a.headDim = s.getInt("head_dim", defaultHeadDim);
    a.causal = s.getBool("causal");
    if (!a.causal)
      reporter.error(s.get("causal")->range.Start)
          << "a decoder's attention must be causal";
    a.bias = s.getBool("bias");
    double defaultScale = a.headDim > 0 ? 1.0 / std::sqrt(a.headDim) : 1.0;
    a.scale = s.getFloat("scale", defaultScale);
    s.finish();
    return a;
  }

  FfnSpec analyzeFfn(const SpecNode &node, const ModelSpec &m) {
    FfnSpec f;
    Settings s(node.settings, schemaOf("layer ffn"), node.range, reporter);
    f.hidden = s.getInt("hidden");
    f.activation = s.getEnum<Activation>("activation");
    f.glu = s.getBool("glu");
    f.bias = s.getBool("bias");
    s.finish();
    return f;
  }

  MoeLayerSpec analyzeMoe(const SpecNode &node, const ModelSpec &m) {
    MoeLayerSpec e;
    Settings s(node.settings, schemaOf("layer moe"), node.range, reporter);
    e.experts = s.getInt("experts");
    e.k = s.getInt("k");
    if (e.experts > 0 && e.k > e.experts)
      reporter.error(s.get("k")->range.Start)
          << "k (" << e.k << ") exceeds the number of experts ("
          << e.experts << ")";
    e.hidden = s.getInt("hidden");
    e.activation = s.getEnum<Activation>("activation");
    e.glu = s.getBool("glu");
    e.bias = s.getBool("bias");
    e.routerBias = s.getBool("router_bias");
    e.gate = s.getEnum<GateWeighting>("gate");
    e.priority = s.getEnum<Priority>("priority");
    e.balance = s.getEnum<BalanceLoss>("balance");
    analyzeCapacity(s, e);
    s.finish();
    return e;
  }

  /// The capacity setting of a moe layer: a formula, with its factor and
  /// floor.
  void analyzeCapacity(Settings &layer, MoeLayerSpec &e) {
    std::optional<std::string> name = layer.getCallName("capacity");
    if (!name)
      return;
    e.capacity = *symbolizeCapacity(*name);
    const SpecValue *value = layer.get("capacity");
    Settings s(callArguments(value),
               schemaOf("capacity " + *name),
               value ? value->range : layer.range(), reporter);
    if (e.capacity != Capacity::None) {
      e.capacityFactor = s.getFloat("factor");
      e.minCapacity = s.getInt("min");
    }
    s.finish();
  }

  //===--------------------------------------------------------------------===//
  // train
  //===--------------------------------------------------------------------===//

  void analyzeTrain(const SpecNode &node, Spec &spec) {
    TrainSpec &t = spec.train;
    Settings s(node.settings, schemaOf("train"), node.range, reporter);
    analyzeOptimizer(s, t);
    t.steps = s.getInt("steps");
    analyzeSchedule(s, t);
    t.clipNorm = s.getFloat("clip_norm");
    t.batch = s.getInt("batch");
    t.seqLen = s.getInt("seq_len", spec.model.maxSeq);
    if (spec.model.maxSeq > 0 && t.seqLen > spec.model.maxSeq)
      reporter.error(s.get("seq_len")->range.Start)
          << "seq_len (" << t.seqLen << ") exceeds the model's max_seq ("
          << spec.model.maxSeq << ")";
    t.seed = s.getInt("seed");
    t.balanceLoss = s.getFloat("balance_loss");
    t.zLoss = s.getFloat("z_loss");
    t.labelSmoothing = s.getFloat("label_smoothing");
    t.logEvery = s.getInt("log_every");
    s.finish();
    if ((t.schedule == LrSchedule::Linear || t.schedule == LrSchedule::Cosine) &&
        t.steps <= t.warmup)
      reporter.error(node.range.Start)
          << "a decaying schedule needs steps (" << t.steps
          << ") > warmup (" << t.warmup << ")";
  }

  /// The optimizer of the training settings and its hyper-parameters.
  void analyzeOptimizer(Settings &train, TrainSpec &t) {
    std::optional<std::string> name = train.getCallName("optimizer");
    if (!name)
      return;
    t.optimizer = *name;
    const SpecValue *value = train.get("optimizer");
    Settings s(callArguments(value),
               schemaOf("optimizer " + *name),
               value ? value->range : train.range(), reporter);
    t.lr = s.getFloat("lr");
    if (t.lr <= 0 && s.has("lr"))
      reporter.error(s.get("lr")->range.Start) << "'lr' must be > 0";
    t.weightDecay = s.getFloat("weight_decay");
    if (t.optimizer == "sgd") {
      t.momentum = s.getFloat("momentum");
    } else {
      t.eps = s.getFloat("eps");
      if (const SpecValue *betas = s.get("betas")) {
        if (betas->kind != SpecValue::Kind::List || betas->list.size() != 2) {
          reporter.error(betas->range.Start)
              << "'betas' must be a list of two numbers, e.g. [0.9, 0.999]";
        } else {
          std::optional<double> b1 = s.asFloat(betas->list[0], "betas[0]");
          std::optional<double> b2 = s.asFloat(betas->list[1], "betas[1]");
          for (auto [v, item] :
               {std::make_pair(b1, &betas->list[0]),
                std::make_pair(b2, &betas->list[1])})
            if (v && !(*v >= 0 && *v < 1))
              reporter.error(item->range.Start)
                  << "betas must be in [0, 1), got " << *v;
          t.beta1 = b1.value_or(t.beta1);
          t.beta2 = b2.value_or(t.beta2);
        }
      }
    }
    s.finish();
  }

  /// The learning-rate schedule of the training settings.
  void analyzeSchedule(Settings &train, TrainSpec &t) {
    std::optional<std::string> name = train.getCallName("schedule");
    if (!name)
      return;
    t.schedule = *symbolizeLrSchedule(*name);
    const SpecValue *value = train.get("schedule");
    Settings s(callArguments(value),
               schemaOf("schedule " + *name),
               value ? value->range : train.range(), reporter);
    if (t.schedule != LrSchedule::Constant)
      t.warmup = s.getInt("warmup");
    if (t.schedule == LrSchedule::Linear || t.schedule == LrSchedule::Cosine)
      t.finalLr = s.getFloat("final_lr");
    s.finish();
  }

  //===--------------------------------------------------------------------===//
  // data
  //===--------------------------------------------------------------------===//

  void analyzeData(const SpecNode &node, Spec &spec) {
    DataSourceSpec &d = spec.data;
    Settings s(node.settings, schemaOf("data"), node.range, reporter);
    if (const SpecValue *source = s.require("source"))
      analyzeSource(*source, d);
    d.validFraction = s.getFloat("valid_fraction");
    if (d.kind != "text" && s.has("valid_fraction"))
      reporter.error(s.get("valid_fraction")->range.Start)
          << "'valid_fraction' applies to text(...) sources only; synthetic "
             "data draws its held-out sequences from their own stream";
    s.finish();
  }

  void analyzeSource(const SpecValue &value, DataSourceSpec &d) {
    if (value.kind != SpecValue::Kind::Call ||
        (value.text != "synthetic" && value.text != "text")) {
      reporter.error(value.range.Start)
          << "'source' must be synthetic(\"grammar\" | \"markov\" | "
             "\"copy\") or text(\"path\"), got "
          << describeValue(value);
      return;
    }
    d.kind = value.text;
    std::vector<SpecSetting> named;
    const SpecValue *first = nullptr;
    for (const SpecSetting &arg : value.args) {
      if (arg.name.empty() && !first)
        first = &arg.value;
      else
        named.push_back(arg);
    }
    Settings s(named, schemaOf("source " + value.text), value.range,
               reporter);
    if (!first || first->kind != SpecValue::Kind::String) {
      reporter.error(value.range.Start)
          << value.text << "(...) needs a string as its first argument";
      return;
    }
    if (d.kind == "synthetic") {
      d.task = first->text;
      if (d.task != "grammar" && d.task != "markov" && d.task != "copy") {
        auto diag = reporter.error(first->range.Start)
                    << "unknown synthetic task '" << d.task
                    << "' (grammar, markov or copy)";
        std::string near =
            nearestName(d.task, {"grammar", "markov", "copy"});
        if (!near.empty())
          diag << "; did you mean '" << near << "'?";
      }
      d.branching = s.getInt("branching");
      if (d.task != "markov" && s.has("branching"))
        reporter.error(s.get("branching")->range.Start)
            << "'branching' applies to the markov task only";
      d.taskSeed = s.getInt("seed");
    } else {
      llvm::SmallString<256> path(first->text);
      if (!llvm::sys::path::is_absolute(path)) {
        path = specDirectory;
        llvm::sys::path::append(path, first->text);
      }
      d.path = std::string(path);
      if (!llvm::sys::fs::exists(path))
        reporter.error(first->range.Start)
            << "cannot find the text file '" << first->text << "' (looked at "
            << d.path << ")";
    }
    s.finish();
  }

  void checkDataAgainstModel(const SpecNode *data, const SpecNode &model,
                             const Spec &spec) {
    bool byteLevel = spec.data.kind == "text" || spec.data.task == "grammar";
    if (byteLevel && spec.model.vocab > 0 && spec.model.vocab < 256) {
      // At the data section, or (the default data source) at the vocab.
      llvm::SMLoc loc = data ? data->range.Start : model.range.Start;
      for (const SpecSetting &setting : model.settings)
        if (!data && setting.name == "vocab")
          loc = setting.nameRange.Start;
      reporter.error(loc) << "the data source yields bytes (256 values) but "
                             "the model's vocab is "
                          << spec.model.vocab << "; set vocab = 256";
    }
    if (spec.data.task == "copy" && spec.model.vocab > 0 &&
        spec.model.vocab < 4 && data)
      reporter.error(data->range.Start)
          << "the copy task needs a vocab of at least 4";
  }

  Reporter reporter;
  StringRef specDirectory;
};

} // namespace

std::optional<Spec> moec::frontend::analyzeSpec(const SpecFile &file,
                                                llvm::SourceMgr &sourceMgr,
                                                mlir::MLIRContext *context,
                                                StringRef specDirectory) {
  return Analyzer(sourceMgr, context, specDirectory).run(file);
}
