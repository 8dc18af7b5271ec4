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
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA256.h"
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
    const SpecNode *model = nullptr, *train = nullptr, *data = nullptr,
                   *generate = nullptr;
    for (const SpecNode &section : file.sections) {
      const SpecNode **slot = section.kind == "model"      ? &model
                              : section.kind == "train"    ? &train
                              : section.kind == "data"     ? &data
                              : section.kind == "generate" ? &generate
                                                           : nullptr;
      if (!slot) {
        auto diag = reporter.error(section.range.Start)
                    << "unknown section '" << section.kind
                    << "' (expected model, train, data or generate)";
        std::string near = nearestName(section.kind,
                                       {"model", "train", "data", "generate"});
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
    else
      defaultData(spec);
    if (generate)
      analyzeGenerate(*generate, spec);
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
    m.kind = static_cast<ModelKind>(s.getChoice("kind"));
    analyzeObjective(s, m);
    m.vocab = s.getInt("vocab");
    analyzeTokenizer(s, m);
    m.dModel = s.getInt("d_model");
    m.maxSeq = s.getInt("max_seq");
    m.norm = analyzeNorm(s);
    m.preNorm = s.getChoice("norm_position") == 0;
    analyzePositions(s, m);
    m.segments = s.getInt("segments");
    if (m.segments > 0 && m.kind != ModelKind::Encoder)
      reporter.error(s.get("segments")->range.Start)
          << "segment embeddings are for encoders (sentence pairs)";
    m.tieEmbeddings = s.getBool("tie_embeddings");
    m.shareEmbeddings = s.getBool("share_embeddings");
    if (m.shareEmbeddings && m.kind != ModelKind::EncoderDecoder)
      reporter.error(s.get("share_embeddings")->range.Start)
          << "share_embeddings applies to encoder_decoder models (one "
             "embedding for the encoder and the decoder)";
    m.embedScale = s.getBool("embed_scale");
    m.embedNorm = s.getBool("embed_norm");
    m.dropout = s.getFloat("dropout");
    m.initStd = s.getFloat("init_std");
    m.dtype = s.schema().find("dtype")->choices[s.getChoice("dtype")];
    m.f32Matmul =
        s.schema().find("f32_matmul")->choices[s.getChoice("f32_matmul")];
    if (m.objective == Objective::Classify && m.tieEmbeddings)
      reporter.error(s.get("tie_embeddings")->range.Start)
          << "a classifier has no token output projection to tie";
    s.finish();

    if (m.kind == ModelKind::EncoderDecoder)
      analyzeStacks(node, m);
    else
      m.stacks.push_back(analyzeStack(
          node, m,
          m.kind == ModelKind::Encoder ? StackSpec::Role::Encoder
                                       : StackSpec::Role::Decoder,
          "layers"));
  }

  /// The objective of the model: a name or a call; its default follows the
  /// family, and it must suit it.
  void analyzeObjective(Settings &model, ModelSpec &m) {
    const Objective byKind[] = {Objective::Lm, Objective::Mlm,
                                Objective::Translate};
    m.objective = byKind[static_cast<int>(m.kind)];
    const SpecValue *value = model.get("objective");
    if (!value)
      return;
    std::optional<std::string> name = model.getCallName("objective");
    if (!name)
      return;
    Settings s(callArguments(value), schemaOf("objective " + *name),
               value->range, reporter);
    if (*name == "lm") {
      m.objective = Objective::Lm;
    } else if (*name == "mlm") {
      m.objective = Objective::Mlm;
      m.mlm.rate = s.getFloat("rate");
      m.mlm.maskRate = s.getFloat("mask");
      m.mlm.randomRate = s.getFloat("random");
      m.mlm.maxPredictions = s.getInt("max_predictions");
      if (m.mlm.maskRate + m.mlm.randomRate > 1 + 1e-12)
        reporter.error(value->range.Start)
            << "mask (" << m.mlm.maskRate << ") + random ("
            << m.mlm.randomRate << ") must be at most 1";
    } else if (*name == "classify") {
      m.objective = Objective::Classify;
      m.classes = s.getInt("classes");
    } else {
      m.objective = Objective::Translate;
    }
    s.finish();
    const ModelKind fits[] = {ModelKind::Decoder, ModelKind::Encoder,
                              ModelKind::Encoder, ModelKind::EncoderDecoder};
    if (fits[static_cast<int>(m.objective)] != m.kind) {
      const char *families[] = {"decoder", "encoder", "encoder",
                                "encoder_decoder"};
      reporter.error(value->range.Start)
          << "objective '" << *name << "' is for "
          << families[static_cast<int>(m.objective)] << " models, not "
          << model.schema().find("kind")->choices[static_cast<int>(m.kind)];
    }
  }

  /// The tokenizer of the model: bytes, or a SentencePiece model file.
  void analyzeTokenizer(Settings &model, ModelSpec &m) {
    std::optional<std::string> name = model.getCallName("tokenizer");
    if (!name)
      return;
    m.tokenizer.kind = *name;
    const SpecValue *value = model.get("tokenizer");
    std::vector<SpecSetting> named;
    std::vector<const SpecValue *> positional;
    splitArguments(value, named, positional);
    Settings s(named, schemaOf("tokenizer " + *name),
               value ? value->range : model.range(), reporter);
    s.finish();
    if (*name == "bytes") {
      if (!positional.empty())
        reporter.error(positional.front()->range.Start)
            << "the byte tokenizer takes no arguments";
      return;
    }
    if (positional.size() != 1 ||
        positional.front()->kind != SpecValue::Kind::String) {
      reporter.error(value ? value->range.Start : model.range().Start)
          << "sentencepiece(...) needs the model file as a string, e.g. "
             "sentencepiece(\"spm.model\")";
      return;
    }
    const SpecValue &file = *positional.front();
    m.tokenizer.path = resolvePath(file, "SentencePiece model");
    if (!llvm::sys::fs::is_regular_file(m.tokenizer.path))
      return; // resolvePath said why
    auto bytes = llvm::MemoryBuffer::getFile(m.tokenizer.path);
    if (!bytes) {
      reporter.error(file.range.Start)
          << "cannot read the SentencePiece model '" << file.text
          << "': " << bytes.getError().message();
      return;
    }
    auto digest = llvm::SHA256::hash(llvm::arrayRefFromStringRef(
        (*bytes)->getBuffer()));
    m.tokenizer.sha256 = llvm::toHex(digest, /*LowerCase=*/true);
  }

  /// Call arguments split into named settings and positional values.
  static void splitArguments(const SpecValue *value,
                             std::vector<SpecSetting> &named,
                             std::vector<const SpecValue *> &positional) {
    for (const SpecSetting &arg : callArguments(value)) {
      if (arg.name.empty())
        positional.push_back(&arg.value);
      else
        named.push_back(arg);
    }
  }

  /// A file named by a string value, resolved against the spec's
  /// directory; a missing file is reported at the string, and so is
  /// anything but a regular file: reading a device or a FIFO would never
  /// end, and the runtime refuses them.
  std::string resolvePath(const SpecValue &value, llvm::StringRef what) {
    llvm::SmallString<256> path(value.text);
    if (!llvm::sys::path::is_absolute(path)) {
      path = specDirectory;
      llvm::sys::path::append(path, value.text);
    }
    // Stored absolute, so the bundle works from any directory; the runtime
    // also looks beside the bundle for a file that moved with it.
    (void)llvm::sys::fs::make_absolute(path);
    llvm::sys::path::remove_dots(path, /*remove_dot_dot=*/true);
    if (!llvm::sys::fs::exists(path))
      reporter.error(value.range.Start)
          << "cannot find the " << what << " '" << value.text
          << "' (looked at " << path << ")";
    else if (llvm::sys::fs::is_directory(path))
      reporter.error(value.range.Start)
          << "the " << what << " '" << value.text << "' is a directory";
    else if (!llvm::sys::fs::is_regular_file(path))
      reporter.error(value.range.Start)
          << "the " << what << " '" << value.text
          << "' is not a regular file";
    return std::string(path);
  }

  /// The `encoder { ... }` and `decoder { ... }` stacks of an
  /// encoder_decoder model.
  void analyzeStacks(const SpecNode &node, ModelSpec &m) {
    const SpecNode *encoder = nullptr, *decoder = nullptr;
    for (const SpecNode &child : node.children) {
      const SpecNode **slot = child.kind == "encoder"   ? &encoder
                              : child.kind == "decoder" ? &decoder
                                                        : nullptr;
      if (!slot) {
        reporter.error(child.range.Start)
            << "an encoder_decoder model holds an `encoder { ... }` and a "
               "`decoder { ... }` stack, not '"
            << child.kind << "'";
        continue;
      }
      if (*slot) {
        reporter.error(child.range.Start)
            << "the model has one '" << child.kind << "' stack";
        continue;
      }
      if (!child.settings.empty())
        reporter.error(child.settings.front().nameRange.Start)
            << "a stack holds blocks, not settings";
      *slot = &child;
    }
    if (!encoder || !decoder) {
      reporter.error(node.range.Start)
          << "an encoder_decoder model needs an `encoder { repeat N { ... } "
             "}` and a `decoder { repeat N { ... } }` stack";
      return;
    }
    m.stacks.push_back(
        analyzeStack(*encoder, m, StackSpec::Role::Encoder, "encoder.layers"));
    m.stacks.push_back(
        analyzeStack(*decoder, m, StackSpec::Role::Decoder, "decoder.layers"));
    bool crosses = false;
    for (const BlockSpec &b : m.stacks.back().blocks)
      for (const SublayerSpec &sub : b.sublayers)
        crosses |= (sub.kind == SublayerSpec::Kind::Attention &&
                    sub.attention.cross) ||
                   (sub.kind == SublayerSpec::Kind::Moa && sub.moa.cross);
    if (!crosses && !reporter.failed())
      reporter.error(decoder->range.Start)
          << "the decoder never reads the encoder: add cross_attention(...), "
             "cross_moa(...) or cross_mae(...) to its blocks";
  }

  /// The blocks of one stack (the model's own children for a one-stack
  /// model).
  StackSpec analyzeStack(const SpecNode &node, const ModelSpec &m,
                         StackSpec::Role role, std::string prefix) {
    StackSpec stack;
    stack.role = role;
    stack.prefix = std::move(prefix);
    for (const SpecNode &child : node.children) {
      if (child.kind == "encoder" || child.kind == "decoder") {
        reporter.error(child.range.Start)
            << "`" << child.kind
            << " { ... }` stacks belong to encoder_decoder models; write the "
               "blocks of this model directly in it";
        continue;
      }
      if (child.kind != "block") {
        reporter.error(child.range.Start)
            << "layer '" << child.kind
            << "' must be inside a block: write `repeat N { ... }` or "
               "`block { ... }`";
        continue;
      }
      stack.blocks.push_back(analyzeBlock(child, m, role));
    }
    if (stack.blocks.empty() && !reporter.failed())
      reporter.error(node.range.Start)
          << "the " << (node.kind == "model" ? "model" : node.kind)
          << " has no blocks: add `repeat N { attention(...) ffn(...) }`";
    return stack;
  }

  /// The positions setting of the model: a name, or rope(...) with its
  /// base and rotated share.
  void analyzePositions(Settings &model, ModelSpec &m) {
    std::optional<std::string> name = model.getCallName("positions");
    if (!name)
      return;
    const SpecValue *value = model.get("positions");
    Settings s(callArguments(value), schemaOf("positions " + *name),
               value ? value->range : model.range(), reporter);
    const std::vector<std::string> &names =
        model.schema().find("positions")->choices;
    m.positions =
        static_cast<Positions>(llvm::find(names, *name) - names.begin());
    if (m.positions == Positions::Rope) {
      m.rope.base = s.getFloat("base");
      m.rope.fraction = s.getFloat("fraction");
      if (m.rope.fraction <= 0 && s.has("fraction"))
        reporter.error(s.get("fraction")->range.Start)
            << "'fraction' must be > 0: rope rotates some features of "
               "every head";
    }
    s.finish();
  }

  /// The rotated width of a self-attention layer's heads under positions =
  /// rope: fraction * head_dim, which must be an even whole number.
  int64_t analyzeRotaryDim(const SpecNode &node, const ModelSpec &m,
                           int64_t headDim) {
    double width = m.rope.fraction * static_cast<double>(headDim);
    int64_t rotary = static_cast<int64_t>(std::llround(width));
    if (headDim > 0 && m.rope.fraction > 0 &&
        (std::fabs(width - static_cast<double>(rotary)) > 1e-9 ||
         rotary % 2 != 0 || rotary < 2))
      reporter.error(node.range.Start)
          << "positions = rope turns features in pairs, but this layer's "
             "rotary width (fraction "
          << limitText(m.rope.fraction) << " of head_dim " << headDim << " = "
          << limitText(width) << ") is not an even whole number";
    return rotary;
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

  BlockSpec analyzeBlock(const SpecNode &node, const ModelSpec &m,
                         StackSpec::Role role) {
    BlockSpec block;
    if (!node.settings.empty())
      reporter.error(node.settings.front().nameRange.Start)
          << "a block holds layers, not settings; put '"
          << node.settings.front().name << "' on the model or a layer";
    static const std::vector<std::string> kLayers = {
        "attention", "cross_attention", "ffn", "moe",      "mh_moe",
        "moa",       "cross_moa",       "mae", "cross_mae"};
    std::map<std::string, int> counts;
    for (const SpecNode &child : node.children)
      ++counts[child.kind];
    std::map<std::string, int> seen;
    bool inDecoderOfPair =
        role == StackSpec::Role::Decoder && m.kind == ModelKind::EncoderDecoder;
    for (const SpecNode &child : node.children) {
      SublayerSpec sub;
      sub.range = child.range;
      std::string base;
      bool cross = child.kind == "cross_attention" ||
                   child.kind == "cross_moa" || child.kind == "cross_mae";
      if (cross && !inDecoderOfPair) {
        reporter.error(child.range.Start)
            << "'" << child.kind
            << "' reads the encoder's output: it belongs in the decoder of "
               "an encoder_decoder model";
        continue;
      }
      if (child.kind == "attention" || child.kind == "cross_attention") {
        sub.kind = SublayerSpec::Kind::Attention;
        sub.attention = analyzeAttention(child, m, role, cross);
        base = cross ? "cross_attn" : "attn";
      } else if (child.kind == "mae" || child.kind == "cross_mae") {
        sub.kind = SublayerSpec::Kind::Attention;
        sub.attention = analyzeMae(child, m, role, cross);
        base = child.kind;
      } else if (child.kind == "ffn") {
        sub.kind = SublayerSpec::Kind::Ffn;
        sub.ffn = analyzeFfn(child, m);
        base = "ffn";
      } else if (child.kind == "moe" || child.kind == "mh_moe") {
        sub.kind = SublayerSpec::Kind::Moe;
        sub.moe = analyzeMoe(child, m, child.kind == "mh_moe");
        base = child.kind;
      } else if (child.kind == "moa" || child.kind == "cross_moa") {
        sub.kind = SublayerSpec::Kind::Moa;
        sub.moa = analyzeMoa(child, m, role, cross);
        base = child.kind;
      } else {
        std::string near = nearestName(child.kind, kLayers);
        reporter.error(child.range.Start)
            << "unknown layer '" << child.kind << "' ("
            << llvm::join(kLayers, ", ") << ")"
            << (near.empty() ? "" : "; did you mean '" + near + "'?");
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

  /// The causal setting of a self-attention layer: decoders must be
  /// causal, encoders are bidirectional by default.
  bool analyzeCausal(Settings &s, StackSpec::Role role) {
    bool decoder = role == StackSpec::Role::Decoder;
    const SpecValue *given = s.get("causal");
    if (!given)
      return decoder;
    bool typed = given->kind == SpecValue::Kind::Bool;
    bool causal = s.getBool("causal");
    if (decoder && typed && !causal)
      reporter.error(given->range.Start)
          << "a decoder's self-attention must be causal";
    return causal;
  }

  /// head_dim defaulting to d_model / `heads`, with a located error when
  /// that does not divide.
  int64_t analyzeHeadDim(Settings &s, const ModelSpec &m, int64_t heads,
                         llvm::StringRef headsName) {
    int64_t defaultHeadDim =
        heads > 0 && m.dModel % heads == 0 ? m.dModel / heads : 0;
    if (!s.has("head_dim") && heads > 0 && m.dModel > 0 &&
        m.dModel % heads != 0) {
      const SpecValue *at = s.get(headsName);
      reporter.error(at ? at->range.Start : s.range().Start)
          << "d_model (" << m.dModel << ") is not divisible by " << headsName
          << " (" << heads << "); set head_dim explicitly";
    }
    // The schema bounds a head_dim that is set; one that d_model gives is
    // checked here.
    if (!s.has("head_dim") && defaultHeadDim > kWidestHeadDim) {
      const SpecValue *at = s.get(headsName);
      reporter.error(at ? at->range.Start : s.range().Start)
          << "a head of d_model / " << headsName << " = " << defaultHeadDim
          << " dims is too wide: attention kernels stage query and key rows "
             "in 48 KiB of shared memory, which holds at most "
          << kWidestHeadDim << " dims; set head_dim or more " << headsName;
    }
    return s.getInt("head_dim", defaultHeadDim);
  }

  AttentionSpec analyzeAttention(const SpecNode &node, const ModelSpec &m,
                                 StackSpec::Role role, bool cross) {
    Settings s(node.settings,
               schemaOf(cross ? "layer cross_attention" : "layer attention"),
               node.range, reporter);
    AttentionSpec a = readAttention(s, node, m, role, cross);
    s.finish();
    return a;
  }

  /// An MAE layer: its attention settings, then its gate's.
  AttentionSpec analyzeMae(const SpecNode &node, const ModelSpec &m,
                           StackSpec::Role role, bool cross) {
    Settings s(node.settings,
               schemaOf(cross ? "layer cross_mae" : "layer mae"), node.range,
               reporter);
    AttentionSpec a = readAttention(s, node, m, role, cross);
    MaeSpec &mae = a.mae.emplace();
    if (a.heads == 1)
      reporter.error(s.get("heads")->range.Start)
          << "'" << node.kind
          << "' needs at least 2 heads: each of its experts drops one head "
             "and rescales the others by h / (h - 1)";
    mae.uniform = s.getChoice("responsibilities") == 1;
    if (a.heads > 64 && !mae.uniform)
      reporter.error(s.get("heads")->range.Start)
          << "an MAE gate handles at most 64 heads, got " << a.heads;
    analyzePool(s, role, mae);
    mae.gateHidden = s.getInt("gate_hidden");
    mae.gateDropout = s.getFloat("gate_dropout");
    mae.bnMomentum = s.getFloat("bn_momentum");
    mae.bnEps = s.getFloat("bn_eps");
    s.finish();
    return a;
  }

  /// The window of an MAE gate's summary: the whole sequence in encoders,
  /// a causal one (prefix, last N) in decoders, where generation must never
  /// look ahead.
  void analyzePool(Settings &layer, StackSpec::Role role, MaeSpec &mae) {
    bool decoder = role == StackSpec::Role::Decoder;
    const SpecValue *value = layer.get("pool");
    if (!value) {
      mae.pool = decoder ? MaeSpec::Pool::Prefix : MaeSpec::Pool::Sequence;
      return;
    }
    std::optional<std::string> name = layer.getCallName("pool");
    if (!name)
      return;
    Settings s(callArguments(value), schemaOf("pool " + *name), value->range,
               reporter);
    if (*name == "sequence")
      mae.pool = MaeSpec::Pool::Sequence;
    else if (*name == "prefix")
      mae.pool = MaeSpec::Pool::Prefix;
    else {
      mae.pool = MaeSpec::Pool::Last;
      mae.windowSize = s.getInt("size");
    }
    s.finish();
    if (decoder && mae.pool == MaeSpec::Pool::Sequence)
      reporter.error(value->range.Start)
          << "pool = sequence averages later positions too, which a "
             "decoder's gate must not see: use prefix or last(size = N)";
    if (!decoder && mae.pool != MaeSpec::Pool::Sequence)
      reporter.error(value->range.Start)
          << "pool = " << *name
          << " is a causal window for decoders; an encoder's gate pools its "
             "whole sequence (pool = sequence)";
  }

  /// The settings every attention layer has (heads, kv_heads, head_dim,
  /// causal, bias, scale), read from `s`.
  AttentionSpec readAttention(Settings &s, const SpecNode &node,
                              const ModelSpec &m, StackSpec::Role role,
                              bool cross) {
    AttentionSpec a;
    a.cross = cross;
    a.heads = s.getInt("heads");
    a.kvHeads = s.getInt("kv_heads", a.heads);
    if (a.heads > 0 && a.heads % a.kvHeads != 0)
      reporter.error(s.get("kv_heads")->range.Start)
          << "heads (" << a.heads << ") must be a multiple of kv_heads ("
          << a.kvHeads << ")";
    a.headDim = analyzeHeadDim(s, m, a.heads, "heads");
    a.causal = cross ? false : analyzeCausal(s, role);
    a.bias = s.getBool("bias");
    double defaultScale = a.headDim > 0 ? 1.0 / std::sqrt(a.headDim) : 1.0;
    a.scale = s.getFloat("scale", defaultScale);
    if (!cross && m.positions == Positions::Rope)
      a.rotaryDim = analyzeRotaryDim(node, m, a.headDim);
    return a;
  }

  MoaSpec analyzeMoa(const SpecNode &node, const ModelSpec &m,
                     StackSpec::Role role, bool cross) {
    MoaSpec a;
    a.cross = cross;
    if (m.positions == Positions::Rope)
      reporter.error(node.range.Start)
          << "positions = rope rotates the queries and keys of attention "
             "heads, which '"
          << node.kind
          << "' routes per token: use positions = learned or sinusoidal "
             "with moa layers";
    Settings s(node.settings,
               schemaOf(cross ? "layer cross_moa" : "layer moa"), node.range,
               reporter);
    a.experts = s.getInt("experts");
    a.k = s.getInt("k");
    if (a.experts > 0 && a.k > a.experts)
      reporter.error(s.get("k")->range.Start)
          << "k (" << a.k << ") exceeds the number of experts (" << a.experts
          << ")";
    checkRouterExperts(s, a.experts);
    a.headDim = analyzeHeadDim(s, m, a.k, "k");
    a.gate = *symbolizeGateWeighting(
        s.schema().find("gate")->choices[s.getChoice("gate")]);
    a.sample = s.getInt("sample");
    if (a.sample > a.k)
      reporter.error(s.get("sample")->range.Start)
          << "sample (" << a.sample << ") exceeds k (" << a.k << ")";
    a.auxPerToken = s.getChoice("aux") == 0;
    a.bias = s.getBool("bias");
    double defaultScale = a.headDim > 0 ? 1.0 / std::sqrt(a.headDim) : 1.0;
    a.scale = s.getFloat("scale", defaultScale);
    if (!cross)
      a.causal = analyzeCausal(s, role);
    else
      a.causal = false;
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

  /// The CUDA router (runtime/device/router.cuh) holds a token's
  /// probabilities in one warp, at most 32 per lane, and marks a lane's
  /// chosen experts in a 32-bit mask: 1024 experts at most.
  void checkRouterExperts(Settings &s, int64_t experts) {
    constexpr int64_t kMaxRouterExperts = 1024;
    if (experts > kMaxRouterExperts)
      reporter.error(s.get("experts")->range.Start)
          << "a router handles at most " << kMaxRouterExperts
          << " experts (32 per lane of the warp that routes a token), got "
          << experts;
  }

  MoeLayerSpec analyzeMoe(const SpecNode &node, const ModelSpec &m,
                          bool multiHead) {
    MoeLayerSpec e;
    Settings s(node.settings,
               schemaOf(multiHead ? "layer mh_moe" : "layer moe"), node.range,
               reporter);
    if (multiHead)
      analyzeMultiHead(s, m, e);
    e.experts = s.getInt("experts");
    e.k = s.getInt("k");
    if (e.experts > 0 && e.k > e.experts)
      reporter.error(s.get("k")->range.Start)
          << "k (" << e.k << ") exceeds the number of experts ("
          << e.experts << ")";
    checkRouterExperts(s, e.experts);
    e.hidden = s.getInt("hidden");
    e.activation = s.getEnum<Activation>("activation");
    e.glu = s.getBool("glu");
    e.bias = s.getBool("bias");
    e.routerBias = !multiHead && s.getBool("router_bias");
    e.gate = s.getEnum<GateWeighting>("gate");
    e.priority = s.getEnum<Priority>("priority");
    e.balance = s.getEnum<BalanceLoss>("balance");
    analyzeCapacity(s, "capacity", e.capacity, e.capacityFactor,
                    e.minCapacity);
    if (multiHead)
      analyzeCapacity(s, "eval_capacity", e.evalCapacity,
                      e.evalCapacityFactor, e.evalMinCapacity);
    else {
      // A moe layer routes the same way in training and eval.
      e.evalCapacity = e.capacity;
      e.evalCapacityFactor = e.capacityFactor;
      e.evalMinCapacity = e.minCapacity;
    }
    s.finish();
    return e;
  }

  /// MH-MoE's own settings: the split, the two projections and the router.
  void analyzeMultiHead(Settings &s, const ModelSpec &m, MoeLayerSpec &e) {
    e.multiHead = true;
    e.zLoss = false;
    e.heads = s.getInt("heads");
    if (e.heads > 0 && m.dModel > 0 && m.dModel % e.heads != 0)
      reporter.error(s.get("heads")->range.Start)
          << "d_model (" << m.dModel << ") is not divisible by heads ("
          << e.heads << "): every token splits into heads sub-tokens of "
          << "equal width";
    e.headProj = s.getBool("head_proj");
    e.mergeProj = s.getBool("merge_proj");
    std::optional<std::string> router = s.getCallName("router");
    if (!router)
      return;
    const SpecValue *value = s.get("router");
    Settings r(callArguments(value), schemaOf("router " + *router),
               value ? value->range : s.range(), reporter);
    if (*router == "xmoe")
      e.xmoeDim = r.getInt("dim");
    r.finish();
  }

  /// A capacity setting (`capacity`, `eval_capacity`): a formula, with its
  /// factor and floor.
  void analyzeCapacity(Settings &layer, llvm::StringRef setting,
                       Capacity &kind, double &factor, int64_t &minimum) {
    std::optional<std::string> name = layer.getCallName(setting);
    if (!name)
      return;
    kind = *symbolizeCapacity(*name);
    const SpecValue *value = layer.get(setting);
    Settings s(callArguments(value),
               schemaOf("capacity " + *name),
               value ? value->range : layer.range(), reporter);
    if (kind != Capacity::None) {
      factor = s.getFloat("factor");
      minimum = s.getInt("min");
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
    t.cvLoss = s.getFloat("cv_loss");
    t.labelSmoothing = s.getFloat("label_smoothing");
    t.logEvery = s.getInt("log_every");
    analyzeGroups(s, t);
    analyzePhases(s, t);
    s.finish();
    checkDecayingSchedules(node, t);
  }

  /// A decaying schedule reaches final_lr at its last update: it needs more
  /// updates than warm-up steps. Each group counts its own updates.
  void checkDecayingSchedules(const SpecNode &node, const TrainSpec &t) {
    int64_t gSteps = t.phases ? t.phases->gSteps.gStepsIn(t.steps) : 0;
    int64_t fSteps = t.phases ? t.phases->gSteps.fStepsIn(t.steps) : t.steps;
    if (decays(t.schedule) && fSteps <= t.warmup) {
      if (!t.phases)
        reporter.error(node.range.Start)
            << "a decaying schedule needs steps (" << t.steps << ") > warmup ("
            << t.warmup << ")";
      else
        reporter.error(node.range.Start)
            << "a decaying schedule needs more updates than warmup ("
            << t.warmup << "), but the parameters outside group '"
            << t.phases->group << "' train in " << fSteps
            << " F steps of " << t.steps;
    }
    for (const ParamGroupSpec &g : t.groups) {
      bool phi = t.phases && t.phases->group == g.name;
      int64_t updates = phi ? gSteps : fSteps;
      if (decays(g.schedule) && updates <= g.warmup)
        reporter.error(g.range.Start)
            << "a decaying schedule needs more updates than warmup ("
            << g.warmup << "), but group '" << g.name << "' trains in "
            << updates
            << (phi        ? " G steps"
                : t.phases ? " F steps"
                           : " steps")
            << " of " << t.steps;
    }
  }

  /// `groups = [group("name", params = [...], optimizer = ..., schedule =
  /// ...), ...]`. Which parameters the patterns match is known once the
  /// model's parameters are declared (MLIRGen checks that).
  void analyzeGroups(Settings &train, TrainSpec &t) {
    const SpecValue *value = train.get("groups");
    if (!value)
      return;
    if (value->kind != SpecValue::Kind::List) {
      reporter.error(value->range.Start)
          << "'groups' must be a list of group(...) calls, e.g. "
             "[group(\"gate\", params = [\"*.router\"])], got "
          << describeValue(*value);
      return;
    }
    for (const SpecValue &item : value->list) {
      if (item.kind != SpecValue::Kind::Call || item.text != "group") {
        auto diag = reporter.error(item.range.Start)
                    << "a parameter group is written group(\"NAME\", "
                       "params = [\"PATTERN\", ...]), got "
                    << describeValue(item);
        if (item.kind == SpecValue::Kind::Call &&
            !nearestName(item.text, {"group"}).empty())
          diag << "; did you mean 'group'?";
        continue;
      }
      t.groups.push_back(analyzeGroup(item, t));
    }
  }

  ParamGroupSpec analyzeGroup(const SpecValue &call, const TrainSpec &t) {
    ParamGroupSpec g;
    g.range = call.range;
    std::vector<SpecSetting> named;
    std::vector<const SpecValue *> positional;
    splitArguments(&call, named, positional);
    if (positional.size() != 1 ||
        positional.front()->kind != SpecValue::Kind::String) {
      reporter.error(call.range.Start)
          << "group(...) needs its name as a string first, e.g. "
             "group(\"gate\", params = [\"*.router\"])";
    } else {
      const SpecValue &name = *positional.front();
      g.name = name.text;
      bool valid = !g.name.empty() && llvm::all_of(g.name, [](char c) {
        return llvm::isAlnum(c) || c == '_';
      });
      if (!valid)
        reporter.error(name.range.Start)
            << "a group's name is letters, digits and _, got \"" << g.name
            << "\"";
      for (const ParamGroupSpec &other : t.groups)
        if (other.name == g.name)
          reporter.error(name.range.Start)
              << "the group \"" << g.name << "\" is declared twice";
    }
    Settings s(named, schemaOf("groups group"), call.range, reporter);
    analyzePatterns(s, g);
    if (s.has("optimizer")) {
      analyzeOptimizer(s, g);
    } else {
      // Without its own, the group trains with a copy of the main
      // optimizer (its own moments and update count).
      static_cast<OptimizerSpec &>(g) = t;
    }
    g.schedule = LrSchedule::Constant;
    g.warmup = 0;
    g.finalLr = 0;
    g.power = 1;
    analyzeSchedule(s, g);
    s.finish();
    return g;
  }

  void analyzePatterns(Settings &s, ParamGroupSpec &g) {
    const SpecValue *params = s.require("params");
    if (!params)
      return;
    if (params->kind != SpecValue::Kind::List || params->list.empty()) {
      reporter.error(params->range.Start)
          << "'params' must be a list of patterns, e.g. [\"*.router\"], got "
          << describeValue(*params);
      return;
    }
    for (const SpecValue &item : params->list) {
      if (item.kind != SpecValue::Kind::String || item.text.empty()) {
        reporter.error(item.range.Start)
            << "a pattern is a non-empty string of a parameter path, `*` "
               "standing for any run of characters, got "
            << describeValue(item);
        continue;
      }
      g.patterns.push_back({item.text, item.range});
    }
  }

  /// `phases = coordinate_descent(group = "g", g_steps = every(...) |
  /// first(N))`.
  void analyzePhases(Settings &train, TrainSpec &t) {
    if (!train.has("phases"))
      return;
    std::optional<std::string> name = train.getCallName("phases");
    if (!name)
      return;
    const SpecValue *value = train.get("phases");
    Settings s(callArguments(value), schemaOf("phases " + *name), value->range,
               reporter);
    PhaseSpec phases;
    bool valid = analyzePhaseGroup(s, t, phases);
    valid &= analyzeGSteps(s, phases);
    phases.gSteps.thenF = s.getBool("then_f");
    s.finish();
    if (valid)
      t.phases = phases;
  }

  bool analyzePhaseGroup(Settings &s, const TrainSpec &t, PhaseSpec &phases) {
    const SpecValue *group = s.require("group");
    if (!group)
      return false;
    if (group->kind != SpecValue::Kind::String) {
      reporter.error(group->range.Start)
          << "'group' of coordinate_descent(...) must be a group's name as a "
             "string, e.g. \"gate\", got "
          << describeValue(*group);
      return false;
    }
    std::vector<std::string> names;
    for (const ParamGroupSpec &g : t.groups)
      names.push_back(g.name);
    if (!llvm::is_contained(names, group->text)) {
      auto diag = reporter.error(group->range.Start)
                  << "unknown group \"" << group->text << "\"";
      if (names.empty()) {
        diag << "; declare it in 'groups', e.g. groups = [group(\""
             << group->text << "\", params = [\"*.router\"])]";
      } else {
        diag << " (groups: " << llvm::join(names, ", ") << ")";
        std::string near = nearestName(group->text, names);
        if (!near.empty())
          diag << "; did you mean \"" << near << "\"?";
      }
      return false;
    }
    phases.group = group->text;
    return true;
  }

  bool analyzeGSteps(Settings &phaseSettings, PhaseSpec &phases) {
    if (!phaseSettings.require("g_steps"))
      return false;
    std::optional<std::string> name = phaseSettings.getCallName("g_steps");
    if (!name)
      return false;
    const SpecValue *value = phaseSettings.get("g_steps");
    moec::support::PhaseSchedule &g = phases.gSteps;
    std::vector<SpecSetting> named;
    std::vector<const SpecValue *> positional;
    splitArguments(value, named, positional);
    Settings s(*name == "first" ? named : callArguments(value),
               schemaOf("g_steps " + *name), value->range, reporter);
    bool valid = true;
    if (*name == "every") {
      g.kind = moec::support::PhaseSchedule::Kind::Every;
      g.period = s.getInt("period");
      g.length = s.getInt("length");
      g.offset = s.getInt("offset");
      valid = g.period >= 1;
      if (valid && g.length > g.period) {
        reporter.error(s.get("length")->range.Start)
            << "length (" << g.length << ") exceeds period (" << g.period
            << "): a window of " << g.period << " steps holds at most "
            << g.period << " G steps";
        valid = false;
      }
      if (valid && g.offset >= g.period) {
        reporter.error(s.get("offset")->range.Start)
            << "offset (" << g.offset << ") must be less than period ("
            << g.period << ")";
        valid = false;
      }
    } else {
      g.kind = moec::support::PhaseSchedule::Kind::First;
      const SpecValue *count =
          positional.size() == 1 ? positional.front() : nullptr;
      constexpr int64_t kMaxSteps = int64_t(1) << 40;
      if (!count || count->kind != SpecValue::Kind::Int ||
          count->intValue < 1 || count->intValue > kMaxSteps) {
        reporter.error(count ? count->range.Start : value->range.Start)
            << "first(N) needs the number of G steps, an integer in [1, "
               "2^40], e.g. first(100)"
            << (count ? ", got " + describeValue(*count) : std::string());
        valid = false;
      } else {
        g.first = count->intValue;
      }
    }
    s.finish();
    return valid;
  }

  /// An optimizer setting (of the training settings or of a group) and its
  /// hyper-parameters.
  void analyzeOptimizer(Settings &train, OptimizerSpec &t) {
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

  /// Whether a schedule decays to final_lr by the last step.
  static bool decays(LrSchedule schedule) {
    return schedule == LrSchedule::Linear || schedule == LrSchedule::Cosine ||
           schedule == LrSchedule::Polynomial;
  }

  /// The learning-rate schedule of the training settings or of a group.
  void analyzeSchedule(Settings &train, OptimizerSpec &t) {
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
    if (decays(t.schedule))
      t.finalLr = s.getFloat("final_lr");
    if (t.schedule == LrSchedule::Polynomial) {
      t.power = s.getFloat("power");
      if (t.power <= 0 && s.has("power"))
        reporter.error(s.get("power")->range.Start) << "'power' must be > 0";
    }
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
    if (d.kind == "synthetic" && s.has("valid_fraction"))
      reporter.error(s.get("valid_fraction")->range.Start)
          << "'valid_fraction' applies to file sources only; synthetic "
             "data draws its held-out sequences from their own stream";
    s.finish();
  }

  /// Without a data section: a synthetic task that suits the objective.
  void defaultData(Spec &spec) {
    if (spec.model.objective == Objective::Translate)
      spec.data.task = "translate";
  }

  void analyzeSource(const SpecValue &value, DataSourceSpec &d) {
    static const std::vector<std::string> kSources = {
        "synthetic", "text", "lines", "labelled", "parallel"};
    if (value.kind != SpecValue::Kind::Call ||
        !llvm::is_contained(kSources, value.text)) {
      auto diag = reporter.error(value.range.Start)
                  << "'source' must be synthetic(\"TASK\"), text(\"path\"), "
                     "lines(\"path\"), labelled(\"path\") or "
                     "parallel(\"path\"), got "
                  << describeValue(value);
      if (value.kind == SpecValue::Kind::Symbol ||
          value.kind == SpecValue::Kind::Call) {
        std::string near = nearestName(value.text, kSources);
        if (!near.empty())
          diag << "; did you mean '" << near << "'?";
      }
      return;
    }
    d.kind = value.text;
    std::vector<SpecSetting> named;
    std::vector<const SpecValue *> positional;
    splitArguments(&value, named, positional);
    Settings s(named, schemaOf("source " + value.text), value.range,
               reporter);
    size_t wanted = d.kind == "parallel" ? 2 : 1;
    bool stringsOnly = llvm::all_of(positional, [](const SpecValue *v) {
      return v->kind == SpecValue::Kind::String;
    });
    if (positional.empty() || positional.size() > wanted || !stringsOnly) {
      reporter.error(value.range.Start)
          << value.text << "(...) needs "
          << (d.kind == "synthetic"  ? "the task name"
              : d.kind == "parallel" ? "one or two file names"
                                     : "a file name")
          << " as a string, e.g. " << value.text << "(\""
          << (d.kind == "synthetic" ? "grammar" : "data.txt") << "\")";
      s.finish();
      return;
    }
    if (d.kind == "synthetic") {
      static const std::vector<std::string> kTasks = {"grammar", "markov",
                                                      "copy", "translate"};
      const SpecValue &task = *positional.front();
      d.task = task.text;
      if (!llvm::is_contained(kTasks, d.task)) {
        auto diag = reporter.error(task.range.Start)
                    << "unknown synthetic task '" << d.task << "' ("
                    << llvm::join(kTasks, ", ") << ")";
        std::string near = nearestName(d.task, kTasks);
        if (!near.empty())
          diag << "; did you mean '" << near << "'?";
      }
      d.branching = s.getInt("branching");
      if (d.task != "markov" && s.has("branching"))
        reporter.error(s.get("branching")->range.Start)
            << "'branching' applies to the markov task only";
      d.taskSeed = s.getInt("seed");
    } else {
      for (const SpecValue *file : positional)
        d.paths.push_back(resolvePath(*file, "data file"));
      if (d.kind == "labelled")
        analyzeLabels(s, d);
    }
    s.finish();
  }

  /// labelled(..., labels = ["a", "b"]): distinct names.
  void analyzeLabels(Settings &s, DataSourceSpec &d) {
    const SpecValue *labels = s.get("labels");
    if (!labels)
      return;
    if (labels->kind != SpecValue::Kind::List || labels->list.size() < 2) {
      reporter.error(labels->range.Start)
          << "'labels' must be a list of at least two strings, e.g. "
             "[\"neg\", \"pos\"]";
      return;
    }
    for (const SpecValue &item : labels->list) {
      if (item.kind != SpecValue::Kind::String || item.text.empty()) {
        reporter.error(item.range.Start)
            << "a label must be a non-empty string, got "
            << describeValue(item);
        continue;
      }
      if (llvm::is_contained(d.labels, item.text))
        reporter.error(item.range.Start)
            << "the label \"" << item.text << "\" is listed twice";
      d.labels.push_back(item.text);
    }
  }

  void analyzeGenerate(const SpecNode &node, Spec &spec) {
    GenerateSpec &g = spec.generate;
    Settings s(node.settings, schemaOf("generate"), node.range, reporter);
    g.beam = s.getInt("beam");
    g.lengthPenalty = s.getFloat("length_penalty");
    g.maxLenA = s.getFloat("max_len_a");
    g.maxLenB = s.getInt("max_len_b");
    s.finish();
    if (spec.model.kind != ModelKind::EncoderDecoder)
      reporter.error(node.range.Start)
          << "a 'generate' section configures encoder_decoder models; "
             "decoders take their sampling settings from `moec run`";
  }

  /// Whether the data source suits the model's objective and vocabulary.
  void checkDataAgainstModel(const SpecNode *data, const SpecNode &model,
                             const Spec &spec) {
    const ModelSpec &m = spec.model;
    const DataSourceSpec &d = spec.data;
    // At the data section, or (the default data source) at the model.
    llvm::SMLoc at = data ? data->range.Start : model.range.Start;
    static const std::map<Objective, std::vector<std::string>> kFits = {
        {Objective::Lm, {"synthetic", "text"}},
        {Objective::Mlm, {"lines", "text"}},
        {Objective::Classify, {"labelled"}},
        {Objective::Translate, {"parallel", "synthetic"}}};
    const std::vector<std::string> &fits = kFits.at(m.objective);
    bool translateTask = d.kind == "synthetic" && d.task == "translate";
    bool fitsKind = llvm::is_contained(fits, d.kind) &&
                    (m.objective != Objective::Translate ||
                     d.kind != "synthetic" || translateTask) &&
                    (m.objective != Objective::Lm || !translateTask);
    if (!fitsKind) {
      const char *objectives[] = {"lm", "mlm", "classify", "translate"};
      reporter.error(at) << "the objective '"
                         << objectives[static_cast<int>(m.objective)]
                         << "' cannot train on "
                         << (d.kind == "synthetic" ? "synthetic(\"" + d.task +
                                                         "\")"
                                                   : d.kind + "(...)")
                         << " data; use "
                         << (m.objective == Objective::Lm
                                 ? "synthetic(...) or text(...)"
                             : m.objective == Objective::Mlm
                                 ? "lines(...) or text(...)"
                             : m.objective == Objective::Classify
                                 ? "labelled(...)"
                                 : "parallel(...) or synthetic(\"translate\")");
      return;
    }
    if (d.kind == "labelled" && !d.labels.empty() &&
        static_cast<int64_t>(d.labels.size()) != m.classes && m.classes > 0)
      reporter.error(at) << "the data names " << d.labels.size()
                         << " labels but the classifier has " << m.classes
                         << " classes";
    if (m.tokenizer.kind == "sentencepiece" && d.kind == "synthetic")
      reporter.error(at) << "synthetic data brings its own tokens; the "
                            "sentencepiece tokenizer is for file sources";
    bool byteLevel = m.tokenizer.kind == "bytes" &&
                     (d.kind != "synthetic" || d.task == "grammar");
    int64_t needed = byteLevel && m.kind != ModelKind::Decoder ? 262 : 256;
    if (byteLevel && m.vocab > 0 && m.vocab < needed) {
      llvm::SMLoc loc = at;
      for (const SpecSetting &setting : model.settings)
        if (setting.name == "vocab")
          loc = setting.nameRange.Start;
      reporter.error(loc)
          << "the byte tokenizer needs a vocab of at least " << needed
          << (needed == 256 ? " (the bytes)"
                            : " (the bytes and the special tokens pad, bos, "
                              "eos, mask, cls and sep)")
          << "; the model's vocab is " << m.vocab;
    }
    if (d.task == "copy" && d.kind == "synthetic" && m.vocab > 0 &&
        m.vocab < 4 && data)
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
