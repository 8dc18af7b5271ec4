//===- Sema.cpp - check a .moe file and extract its ModelSpec -------------===//
//
// Knows every section, layer kind and setting of language version 1. Each
// check reports at the setting (or node) it concerns and carries on, so one
// run lists every problem in the file.
//
//===----------------------------------------------------------------------===//

#include "moec/Frontend/Sema.h"
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

constexpr StringRef kActivations[] = {"identity", "relu", "gelu_tanh",
                                      "gelu_erf", "silu", "tanh"};
constexpr Activation kActivationValues[] = {
    Activation::Identity, Activation::Relu, Activation::GeluTanh,
    Activation::GeluErf,  Activation::Silu, Activation::Tanh};

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
    Settings s(node.settings, "the model", node.range, reporter);
    size_t kind = s.getChoice("kind", {"decoder", "encoder", "encoder_decoder"},
                              0);
    if (kind != 0)
      reporter.error(s.get("kind")->range.Start)
          << "model kind '" << s.get("kind")->text
          << "' is not supported yet; this moec builds decoder models";
    m.vocab = s.requirePositive("vocab");
    if (m.vocab == 1)
      reporter.error(s.get("vocab")->range.Start)
          << "'vocab' of the model must be >= 2, got 1";
    m.dModel = s.requirePositive("d_model");
    m.maxSeq = s.requirePositive("max_seq");
    if (const SpecValue *norm = s.get("norm"))
      m.norm = analyzeNorm(*norm);
    m.preNorm = s.getChoice("norm_position", {"pre", "post"}, 0) == 0;
    m.learnedPositions = s.getChoice("positions", {"learned", "none"}, 0) == 0;
    m.tieEmbeddings = s.getBool("tie_embeddings", false);
    m.dropout = s.getFloat("dropout", 0.0, 0.0, 0.95);
    m.initStd = s.getFloat("init_std", 0.02, 0.0);
    static const char *const kDTypes[] = {"f32", "f64", "bf16"};
    m.dtype = kDTypes[s.getChoice("dtype", {"f32", "f64", "bf16"}, 0)];
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

  NormSpec analyzeNorm(const SpecValue &value) {
    NormSpec norm;
    static const std::vector<SpecSetting> none;
    const std::vector<SpecSetting> &args =
        value.kind == SpecValue::Kind::Call ? value.args : none;
    Settings s(args, "norm '" + value.text + "'", value.range, reporter);
    if (value.kind != SpecValue::Kind::Symbol &&
        value.kind != SpecValue::Kind::Call) {
      reporter.error(value.range.Start)
          << "'norm' must be layer_norm or rms_norm, got "
          << describeValue(value);
      return norm;
    }
    if (value.text == "layer_norm") {
      norm.kind = NormSpec::Kind::LayerNorm;
      norm.eps = s.getFloat("eps", 1e-5, 1e-30);
    } else if (value.text == "rms_norm") {
      norm.kind = NormSpec::Kind::RmsNorm;
      norm.eps = s.getFloat("eps", 1e-6, 1e-30);
    } else {
      auto diag = reporter.error(value.range.Start)
                  << "unknown norm '" << value.text
                  << "' (layer_norm or rms_norm)";
      std::string near = nearestName(value.text, {"layer_norm", "rms_norm"});
      if (!near.empty())
        diag << "; did you mean '" << near << "'?";
    }
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

  Activation activation(Settings &s, Activation fallback) {
    size_t i = s.getChoice("activation", kActivations,
                           static_cast<size_t>(fallback));
    return kActivationValues[i];
  }

  AttentionSpec analyzeAttention(const SpecNode &node, const ModelSpec &m) {
    AttentionSpec a;
    Settings s(node.settings, "the attention layer", node.range, reporter);
    a.heads = s.requirePositive("heads");
    a.kvHeads = s.getInt("kv_heads", a.heads, 1);
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
    a.headDim = s.getInt("head_dim", defaultHeadDim, 1);
    a.causal = s.getBool("causal", true);
    if (!a.causal)
      reporter.error(s.get("causal")->range.Start)
          << "a decoder's attention must be causal";
    a.bias = s.getBool("bias", false);
    double defaultScale = a.headDim > 0 ? 1.0 / std::sqrt(a.headDim) : 1.0;
    a.scale = s.getFloat("scale", defaultScale, 0.0);
    s.finish();
    return a;
  }

  FfnSpec analyzeFfn(const SpecNode &node, const ModelSpec &m) {
    FfnSpec f;
    Settings s(node.settings, "the ffn layer", node.range, reporter);
    f.hidden = s.requirePositive("hidden");
    f.activation = activation(s, Activation::GeluTanh);
    f.glu = s.getBool("glu", false);
    f.bias = s.getBool("bias", true);
    s.finish();
    return f;
  }

  MoeLayerSpec analyzeMoe(const SpecNode &node, const ModelSpec &m) {
    MoeLayerSpec e;
    Settings s(node.settings, "the moe layer", node.range, reporter);
    e.experts = s.requirePositive("experts");
    e.k = s.getInt("k", 1, 1);
    if (e.experts > 0 && e.k > e.experts)
      reporter.error(s.get("k")->range.Start)
          << "k (" << e.k << ") exceeds the number of experts ("
          << e.experts << ")";
    e.hidden = s.requirePositive("hidden");
    e.activation = activation(s, Activation::GeluTanh);
    e.glu = s.getBool("glu", false);
    e.bias = s.getBool("bias", false);
    e.routerBias = s.getBool("router_bias", false);
    e.gate = static_cast<GateWeighting>(s.getChoice(
        "gate", {"raw", "renorm_detached", "softmax_topk", "unit"}, 0));
    e.priority = static_cast<Priority>(
        s.getChoice("priority", {"token_order", "bpr"}, 0));
    e.balance = static_cast<BalanceLoss>(
        s.getChoice("balance", {"all_slots", "top1", "any_topk"}, 0));
    if (const SpecValue *capacity = s.get("capacity"))
      analyzeCapacity(*capacity, e);
    s.finish();
    return e;
  }

  void analyzeCapacity(const SpecValue &value, MoeLayerSpec &e) {
    static const StringRef names[] = {"none", "switch", "tutel",
                                      "sparse_mixer"};
    if (value.kind != SpecValue::Kind::Symbol &&
        value.kind != SpecValue::Kind::Call) {
      reporter.error(value.range.Start)
          << "'capacity' must be none, switch(factor = f), tutel(factor = f) "
             "or sparse_mixer(factor = f, min = n), got "
          << describeValue(value);
      return;
    }
    auto it = llvm::find(names, value.text);
    if (it == std::end(names)) {
      auto diag = reporter.error(value.range.Start)
                  << "unknown capacity '" << value.text
                  << "' (none, switch, tutel or sparse_mixer)";
      std::string near = nearestName(
          value.text, {"none", "switch", "tutel", "sparse_mixer"});
      if (!near.empty())
        diag << "; did you mean '" << near << "'?";
      return;
    }
    e.capacity = static_cast<Capacity>(it - std::begin(names));
    static const std::vector<SpecSetting> none;
    Settings s(value.kind == SpecValue::Kind::Call ? value.args : none,
               "capacity '" + value.text + "'", value.range, reporter);
    if (e.capacity != Capacity::None) {
      e.capacityFactor = s.getFloat("factor", 1.0, 1e-6);
      e.minCapacity = s.getInt("min", e.capacity == Capacity::SparseMixer ? 4 : 0,
                               0);
    }
    s.finish();
  }

  //===--------------------------------------------------------------------===//
  // train
  //===--------------------------------------------------------------------===//

  void analyzeTrain(const SpecNode &node, Spec &spec) {
    TrainSpec &t = spec.train;
    Settings s(node.settings, "the training settings", node.range, reporter);
    if (const SpecValue *opt = s.get("optimizer"))
      analyzeOptimizer(*opt, t);
    t.steps = s.getInt("steps", 100, 1);
    if (const SpecValue *schedule = s.get("schedule"))
      analyzeSchedule(*schedule, t);
    t.clipNorm = s.getFloat("clip_norm", 0.0, 0.0);
    t.batch = s.getInt("batch", 8, 1);
    t.seqLen = s.getInt("seq_len", spec.model.maxSeq, 1);
    if (spec.model.maxSeq > 0 && t.seqLen > spec.model.maxSeq)
      reporter.error(s.get("seq_len")->range.Start)
          << "seq_len (" << t.seqLen << ") exceeds the model's max_seq ("
          << spec.model.maxSeq << ")";
    t.seed = s.getInt("seed", 0, 0);
    t.balanceLoss = s.getFloat("balance_loss", 0.01, 0.0);
    t.zLoss = s.getFloat("z_loss", 0.001, 0.0);
    t.labelSmoothing = s.getFloat("label_smoothing", 0.0, 0.0, 0.99);
    t.logEvery = s.getInt("log_every", 10, 1);
    s.finish();
    if ((t.schedule == LrSchedule::Linear || t.schedule == LrSchedule::Cosine) &&
        t.steps <= t.warmup)
      reporter.error(node.range.Start)
          << "a decaying schedule needs steps (" << t.steps
          << ") > warmup (" << t.warmup << ")";
  }

  void analyzeOptimizer(const SpecValue &value, TrainSpec &t) {
    if (value.kind != SpecValue::Kind::Call &&
        value.kind != SpecValue::Kind::Symbol) {
      reporter.error(value.range.Start)
          << "'optimizer' must be adam(...), adamw(...) or sgd(...), got "
          << describeValue(value);
      return;
    }
    if (value.text != "adam" && value.text != "adamw" && value.text != "sgd") {
      auto diag = reporter.error(value.range.Start)
                  << "unknown optimizer '" << value.text
                  << "' (adam, adamw or sgd)";
      std::string near = nearestName(value.text, {"adam", "adamw", "sgd"});
      if (!near.empty())
        diag << "; did you mean '" << near << "'?";
      return;
    }
    t.optimizer = value.text;
    static const std::vector<SpecSetting> none;
    Settings s(value.kind == SpecValue::Kind::Call ? value.args : none,
               "optimizer '" + value.text + "'", value.range, reporter);
    t.lr = s.getFloat("lr", 1e-3, 0.0);
    if (t.lr <= 0 && s.has("lr"))
      reporter.error(s.get("lr")->range.Start) << "'lr' must be > 0";
    t.weightDecay = s.getFloat("weight_decay", 0.0, 0.0);
    if (t.optimizer == "sgd") {
      t.momentum = s.getFloat("momentum", 0.0, 0.0, 0.9999);
    } else {
      t.eps = s.getFloat("eps", 1e-8, 1e-30);
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

  void analyzeSchedule(const SpecValue &value, TrainSpec &t) {
    static const StringRef names[] = {"constant", "linear", "inverse_sqrt",
                                      "cosine"};
    if (value.kind != SpecValue::Kind::Call &&
        value.kind != SpecValue::Kind::Symbol) {
      reporter.error(value.range.Start)
          << "'schedule' must be constant, linear(...), inverse_sqrt(...) or "
             "cosine(...), got "
          << describeValue(value);
      return;
    }
    auto it = llvm::find(names, value.text);
    if (it == std::end(names)) {
      auto diag = reporter.error(value.range.Start)
                  << "unknown schedule '" << value.text
                  << "' (constant, linear, inverse_sqrt or cosine)";
      std::string near = nearestName(
          value.text, {"constant", "linear", "inverse_sqrt", "cosine"});
      if (!near.empty())
        diag << "; did you mean '" << near << "'?";
      return;
    }
    t.schedule = static_cast<LrSchedule>(it - std::begin(names));
    static const std::vector<SpecSetting> none;
    Settings s(value.kind == SpecValue::Kind::Call ? value.args : none,
               "schedule '" + value.text + "'", value.range, reporter);
    if (t.schedule != LrSchedule::Constant)
      t.warmup = s.getInt("warmup", 0, 0);
    if (t.schedule == LrSchedule::Linear || t.schedule == LrSchedule::Cosine)
      t.finalLr = s.getFloat("final_lr", 0.0, 0.0);
    s.finish();
  }

  //===--------------------------------------------------------------------===//
  // data
  //===--------------------------------------------------------------------===//

  void analyzeData(const SpecNode &node, Spec &spec) {
    DataSourceSpec &d = spec.data;
    Settings s(node.settings, "the data settings", node.range, reporter);
    if (const SpecValue *source = s.require("source"))
      analyzeSource(*source, d);
    if (d.kind == "text")
      d.validFraction = s.getFloat("valid_fraction", 0.1, 0.0, 0.9);
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
    Settings s(named, value.text + "(...)", value.range, reporter);
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
      if (d.task == "markov")
        d.branching = s.getInt("branching", 2, 1);
      d.taskSeed = s.getInt("seed", 0, 0);
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
