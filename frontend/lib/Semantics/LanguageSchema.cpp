//===- LanguageSchema.cpp - every setting of the .moe language ------------===//
//
// The table itself, and the reference generated from it. Enum-valued
// settings take their names from the dialect's enums (MoeDefs.h), so a new
// gate weighting or activation appears here, in Sema and in the reference
// at once.
//
//===----------------------------------------------------------------------===//

#include "moec/Frontend/LanguageSchema.h"
#include "moec/support/MoeDefs.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace moec::frontend {

namespace {

/// The spellings of every value of a generated enum.
template <typename E> std::vector<std::string> spellings() {
  std::vector<std::string> names;
  for (E value : defs::EnumTraits<E>::kValues)
    names.emplace_back(defs::spelling(value));
  return names;
}

SettingInfo setting(std::string name, SettingType type, std::string help) {
  SettingInfo s;
  s.name = std::move(name);
  s.type = type;
  s.help = std::move(help);
  return s;
}

SettingInfo required(SettingInfo s) {
  s.required = true;
  return s;
}

SettingInfo fallback(SettingInfo s, std::string text) {
  s.defaultText = std::move(text);
  return s;
}

SettingInfo computed(SettingInfo s, std::string text) {
  s.defaultText = std::move(text);
  s.computed = true;
  return s;
}

/// The limits the bundle reader and the runtime enforce, so that what
/// `check` accepts is accepted downstream.
constexpr double kMaxIntegerSetting = 2147483648.0; // 2^31: widths, counts
constexpr double kMaxTokensPerBatch = 16777216.0;   // 2^24: batch, lengths
constexpr double kMaxSteps = 1099511627776.0;       // 2^40
constexpr double kMaxSeed = 4611686018427387904.0;  // 2^62

SettingInfo range(SettingInfo s, std::optional<double> min,
                  std::optional<double> max = std::nullopt) {
  s.min = min;
  s.max = max;
  return s;
}

SettingInfo choices(SettingInfo s, std::vector<std::string> names) {
  s.choices = std::move(names);
  return s;
}

/// The settings of one optimizer call.
std::vector<SettingInfo> optimizerSettings(bool adam) {
  std::vector<SettingInfo> s = {
      range(fallback(setting("lr", SettingType::Number,
                             "the base learning rate (> 0)"),
                     "1e-3"),
            0.0),
      range(fallback(setting("weight_decay", SettingType::Number,
                             "L2 weight decay (adamw: decoupled, applied to "
                             "the weights directly; adam and sgd: added to "
                             "the gradient)"),
                     "0"),
            0.0)};
  if (adam) {
    s.push_back(range(fallback(setting("eps", SettingType::Number,
                                       "added to the denominator"),
                               "1e-8"),
                      1e-30));
    s.push_back(fallback(setting("betas", SettingType::Pair,
                                 "the moment decays [beta1, beta2], each in "
                                 "[0, 1)"),
                         "[0.9, 0.999]"));
  } else {
    s.push_back(range(fallback(setting("momentum", SettingType::Number,
                                       "heavy-ball momentum (0: plain SGD)"),
                               "0"),
                      0.0, 0.9999));
  }
  return s;
}

SettingInfo warmupSetting() {
  return range(fallback(setting("warmup", SettingType::Integer,
                                "steps of linear warm-up from 0"),
                        "0"),
               0.0);
}

SettingInfo finalLrSetting() {
  return range(fallback(setting("final_lr", SettingType::Number,
                                "the rate the decay reaches at the last step"),
                        "0"),
               0.0);
}

/// The settings of a moe layer; `multiHead` adds MH-MoE's and takes the
/// defaults of its authors' code.
std::vector<SettingInfo> moeLayerSettings(bool multiHead) {
  using T = SettingType;
  auto byKind = [&](const char *moe, const char *mhMoe) {
    return std::string(multiHead ? mhMoe : moe);
  };
  std::vector<SettingInfo> s;
  if (multiHead) {
    s.push_back(range(required(setting("heads", T::Integer,
                                       "sub-tokens per token h (a divisor "
                                       "of d_model)")),
                      1.0));
    s.push_back(fallback(setting("head_proj", T::Flag,
                                 "the multi-head layer Linear(d, d) with "
                                 "bias before the split"),
                         "true"));
    s.push_back(fallback(setting("merge_proj", T::Flag,
                                 "the merge layer Linear(d, d) with bias "
                                 "after the merge"),
                         "true"));
    s.push_back(choices(fallback(setting("router", T::Call,
                                         "linear: logits = x Wg; xmoe: the "
                                         "X-MoE gate (see below)"),
                                 "linear"),
                        {"linear", "xmoe"}));
  }
  s.push_back(range(required(setting("experts", T::Integer,
                                     "the number of experts E, at most 1024")),
                    1.0));
  s.push_back(range(fallback(setting("k", T::Integer,
                                     byKind("experts per token (at most E)",
                                            "experts per sub-token (at most "
                                            "E)")),
                             "1"),
                    1.0));
  s.push_back(range(required(setting("hidden", T::Integer,
                                     "each expert's inner width")),
                    1.0));
  s.push_back(choices(fallback(setting("activation", T::Name,
                                       "the experts' activation"),
                               byKind("gelu_tanh", "silu")),
                      spellings<defs::Activation>()));
  s.push_back(fallback(setting("glu", T::Flag,
                               "gated experts: W2 (act(x W1) * x W3), "
                               "SwiGLU with silu"),
                       byKind("false", "true")));
  s.push_back(
      fallback(setting("bias", T::Flag, "biases in the experts"), "false"));
  if (!multiHead)
    s.push_back(fallback(setting("router_bias", T::Flag,
                                 "a bias on the router's logits"),
                         "false"));
  s.push_back(choices(fallback(setting("gate", T::Name,
                                       "the weight of each selected expert: "
                                       "raw = its softmax probability; "
                                       "renorm_detached = that over the sum "
                                       "of the selected (the sum not "
                                       "differentiated); softmax_topk = "
                                       "softmax over the selected logits; "
                                       "unit = 1"),
                               "raw"),
                      spellings<defs::GateWeighting>()));
  s.push_back(choices(fallback(setting("capacity", T::Call,
                                       byKind("how many assignments each "
                                              "expert keeps; the rest are "
                                              "dropped",
                                              "how many assignments each "
                                              "expert keeps in training, N "
                                              "counting sub-tokens; the rest "
                                              "are dropped")),
                               byKind("none", "tutel")),
                      spellings<defs::Capacity>()));
  if (multiHead)
    s.push_back(choices(fallback(setting("eval_capacity", T::Call,
                                         "the capacity in eval and "
                                         "generation: none keeps every "
                                         "assignment, so that generation "
                                         "with the KV cache equals a full "
                                         "forward; the authors' rule is "
                                         "fraction(factor = f) for f > 0, "
                                         "else the training formula"),
                                 "none"),
                        spellings<defs::Capacity>()));
  s.push_back(choices(fallback(setting("priority", T::Name,
                                       "which assignments claim capacity "
                                       "first: all first choices, then "
                                       "second choices, ...; within a "
                                       "choice tokens in order, or by "
                                       "descending top-1 probability (bpr)"),
                               "token_order"),
                      spellings<defs::Priority>()));
  s.push_back(choices(fallback(setting("balance", T::Name,
                                       "the balance loss E * sum_e f_e P_e "
                                       "with f_e the share of all k slots "
                                       "(all_slots), of first choices "
                                       "(top1), or of tokens that chose e "
                                       "(any_topk)"),
                               byKind("all_slots", "top1")),
                      spellings<defs::BalanceLoss>()));
  return s;
}

std::vector<OwnerInfo> buildSchema() {
  using T = SettingType;
  const std::vector<std::string> activations = spellings<defs::Activation>();
  std::vector<OwnerInfo> owners;
  auto owner = [&](std::string id, std::string what, std::string summary,
                   std::vector<SettingInfo> settings) {
    owners.push_back({std::move(id), std::move(what), std::move(summary),
                      std::move(settings)});
  };

  owner("model", "the model",
        "The architecture: `model NAME { settings; layers }`, the layers in "
        "`repeat N { ... }` or `block { ... }` blocks.",
        {
            choices(fallback(setting("kind", T::Name,
                                     "the model family: decoder (causal "
                                     "language models), encoder "
                                     "(bidirectional, BERT-style), "
                                     "encoder_decoder (translation)"),
                             "decoder"),
                    {"decoder", "encoder", "encoder_decoder"}),
            choices(computed(setting("objective", T::Call,
                                     "what the model is trained to predict"),
                             "lm (decoder), mlm (encoder), translate "
                             "(encoder_decoder)"),
                    {"lm", "mlm", "classify", "translate"}),
            range(required(setting("vocab", T::Integer,
                                   "the vocabulary size (256 for byte data; "
                                   "262 with the byte tokenizer's special "
                                   "tokens)")),
                  2.0),
            choices(fallback(setting("tokenizer", T::Call,
                                     "how text becomes token ids"),
                             "bytes"),
                    {"bytes", "sentencepiece"}),
            range(required(setting("d_model", T::Integer,
                                   "the width of the residual stream")),
                  1.0),
            range(required(setting("max_seq", T::Integer,
                                   "the longest sequence (positions, KV "
                                   "cache)")),
                  1.0),
            choices(fallback(setting("norm", T::Call,
                                     "the normalisation of every block"),
                             "layer_norm"),
                    {"layer_norm", "rms_norm"}),
            choices(fallback(setting("norm_position", T::Name,
                                     "pre: x + f(norm(x)); post: norm(x + "
                                     "f(x))"),
                             "pre"),
                    {"pre", "post"}),
            choices(fallback(setting("positions", T::Call,
                                     "how tokens know their position: "
                                     "learned or fixed sinusoidal (fairseq's "
                                     "layout) absolute embeddings, rotary "
                                     "embeddings of the self-attention "
                                     "queries and keys, or none"),
                             "learned"),
                    {"learned", "sinusoidal", "none", "rope"}),
            range(fallback(setting("segments", T::Integer,
                                   "segment (token type) embeddings for "
                                   "sentence pairs, 2 as in BERT; 0: none "
                                   "(encoders only)"),
                           "0"),
                  0.0, 16.0),
            fallback(setting("tie_embeddings", T::Flag,
                             "the output projection is the (target) token "
                             "embedding transposed"),
                     "false"),
            fallback(setting("share_embeddings", T::Flag,
                             "encoder_decoder: encoder and decoder read one "
                             "token embedding"),
                     "false"),
            fallback(setting("embed_scale", T::Flag,
                             "multiply token embeddings by sqrt(d_model) "
                             "(fairseq's transformer)"),
                     "false"),
            fallback(setting("embed_norm", T::Flag,
                             "a norm right after the embeddings (BERT)"),
                     "false"),
            range(fallback(setting("dropout", T::Number,
                                   "dropout after attention, FFN and expert "
                                   "outputs and on the embeddings"),
                           "0"),
                  0.0, 0.95),
            range(fallback(setting("init_std", T::Number,
                                   "the standard deviation of normal "
                                   "initialisers"),
                           "0.02"),
                  0.0),
            choices(fallback(setting("dtype", T::Name,
                                     "the storage type of activations (bf16: "
                                     "f32 master weights, see the README)"),
                             "f32"),
                    {"f32", "f64", "bf16"}),
            choices(fallback(setting("f32_matmul", T::Name,
                                     "f32 models: matrix products on the "
                                     "cuda and emu devices in fp32 (FMA), "
                                     "tf32 or tf32x3 (3xTF32) on the tensor "
                                     "cores; the cpu device stays fp32"),
                             "fp32"),
                    {"fp32", "tf32", "tf32x3"}),
        });
  owner("norm layer_norm", "norm 'layer_norm'",
        "`(x - mean) / sqrt(var + eps) * gamma + beta` over the last "
        "dimension.",
        {range(fallback(setting("eps", T::Number, "added to the variance"),
                        "1e-5"),
               1e-30)});
  owner("norm rms_norm", "norm 'rms_norm'",
        "`x / sqrt(mean(x^2) + eps) * gamma` over the last dimension.",
        {range(fallback(setting("eps", T::Number,
                                "added to the mean square"),
                        "1e-6"),
               1e-30)});

  owner("positions learned", "positions 'learned'",
        "A trained [max_seq, d_model] table added to the token embeddings "
        "(per stack in encoder_decoder models).",
        {});
  owner("positions sinusoidal", "positions 'sinusoidal'",
        "Fixed sinusoids added to the token embeddings: sines in the first "
        "half of the width, cosines in the second (fairseq).",
        {});
  owner("positions none", "positions 'none'", "No position information.", {});
  owner("positions rope", "positions 'rope'",
        "Rotary position embeddings (RoPE, LLaMA's layout): in every head of "
        "every self-attention layer, query and key feature i < D/2 turns "
        "with feature i + D/2 by the angle p * base^(-2i/D), p the token's "
        "position and D = fraction * head_dim (the rotary width, even); the "
        "KV cache holds rotated keys. Cross-attention is not rotated; moa "
        "layers cannot use it.",
        {range(fallback(setting("base", T::Number,
                                "the base of the rotation frequencies"),
                        "10000"),
               1.0),
         range(fallback(setting("fraction", T::Number,
                                "the share of each head's features that "
                                "rotate (the rest pass through)"),
                        "1"),
               0.0, 1.0)});

  owner("objective lm", "objective 'lm'",
        "Next-token prediction (decoders): the cross-entropy of every "
        "position's next token.",
        {});
  owner("objective mlm", "objective 'mlm'",
        "Masked language modelling (encoders, BERT): `rate` of the real "
        "tokens of each sequence (at most `max_predictions`, at least one) "
        "are predicted; of those, `mask` are replaced by the mask token, "
        "`random` by a random token and the rest kept.",
        {range(fallback(setting("rate", T::Number,
                                "the share of real tokens predicted"),
                        "0.15"),
               0.0, 1.0),
         range(fallback(setting("mask", T::Number,
                                "of those, the share shown as the mask "
                                "token"),
                        "0.8"),
               0.0, 1.0),
         range(fallback(setting("random", T::Number,
                                "of those, the share shown as a random "
                                "token (the rest are kept)"),
                        "0.1"),
               0.0, 1.0),
         range(fallback(setting("max_predictions", T::Integer,
                                "the most predictions per sequence"),
                        "20"),
               1.0, kMaxTokensPerBatch)});
  owner("objective classify", "objective 'classify'",
        "Sequence classification (encoders): the first position through the "
        "pooler tanh(Dense) and a linear classifier.",
        {range(required(setting("classes", T::Integer,
                                "the number of classes")),
               2.0)});
  owner("objective translate", "objective 'translate'",
        "Sequence-to-sequence (encoder_decoder): the decoder predicts each "
        "target token from the source and the target tokens before it "
        "(teacher forcing).",
        {});
  owner("tokenizer bytes", "tokenizer 'bytes'",
        "Every byte is a token (ids 0-255); with a vocab of at least 262, "
        "ids 256-261 are pad, bos, eos, mask, cls and sep.",
        {});
  owner("tokenizer sentencepiece", "tokenizer 'sentencepiece'",
        "A SentencePiece model file (BPE or unigram, e.g. from `moec "
        "tokenizer train`): `sentencepiece(\"path.model\")`, the path "
        "relative to the spec's directory. Its pad, bos, eos and unk "
        "pieces and the pieces [MASK], [CLS] and [SEP] are the special "
        "tokens.",
        {});

  const std::string attentionDefaultCausal = "true in decoders, false in "
                                             "encoders";
  auto attentionSettings = [&](bool cross) {
    std::vector<SettingInfo> settings = {
        range(required(setting("heads", T::Integer, "query heads")), 1.0),
        range(computed(setting("kv_heads", T::Integer,
                               cross ? "key/value heads (a divisor of heads)"
                                     : "key/value heads (a divisor of heads; "
                                       "1: multi-query)"),
                       "heads"),
              1.0),
        range(computed(setting("head_dim", T::Integer, "width of a head"),
                       "d_model / heads"),
              1.0, kWidestHeadDim),
    };
    if (!cross)
      settings.push_back(computed(setting("causal", T::Flag,
                                          "each position sees only earlier "
                                          "ones (decoders must be causal)"),
                                  attentionDefaultCausal));
    settings.push_back(fallback(setting("bias", T::Flag,
                                        "biases on the Q, K, V and output "
                                        "projections"),
                                "false"));
    settings.push_back(range(computed(setting("scale", T::Number,
                                              "the score scale"),
                                      "1 / sqrt(head_dim)"),
                             0.0));
    return settings;
  };
  owner("layer attention", "the attention layer",
        "Multi-head self-attention with grouped key/value heads (causal in "
        "decoders; padding keys are masked).",
        attentionSettings(false));
  owner("layer cross_attention", "the cross_attention layer",
        "Attention from the decoder to the encoder's output "
        "(encoder_decoder decoders only); padding source positions are "
        "masked.",
        attentionSettings(true));
  auto maeSettings = [&](bool cross) {
    std::vector<SettingInfo> settings = attentionSettings(cross);
    settings.push_back(choices(
        fallback(setting("responsibilities", T::Name,
                         "learned: the gate network gives each expert its "
                         "responsibility; uniform: no gate, one head "
                         "dropped uniformly at random per sequence in "
                         "training and the plain attention in eval (the "
                         "MAE paper's baseline)"),
                 "learned"),
        {"learned", "uniform"}));
    settings.push_back(choices(
        computed(setting("pool", T::Call,
                         "the positions the gate's summary averages: the "
                         "whole sequence (padding excluded), each "
                         "position's causal prefix, or its last N "
                         "positions; decoders must pool causally"),
                 "sequence in encoders, prefix in decoders"),
        {"sequence", "prefix", "last"}));
    settings.push_back(range(fallback(setting("gate_hidden", T::Integer,
                                              "the width of the gate's tanh "
                                              "layer"),
                                      "256"),
                             1.0));
    settings.push_back(range(fallback(setting("gate_dropout", T::Number,
                                              "dropout after the gate's tanh "
                                              "layer (training)"),
                                      "0.1"),
                             0.0, 0.999));
    settings.push_back(range(fallback(setting("bn_momentum", T::Number,
                                              "the weight of each batch in "
                                              "the gate's BatchNorm running "
                                              "statistics"),
                                      "0.1"),
                             1e-6, 1.0));
    settings.push_back(range(fallback(setting("bn_eps", T::Number,
                                              "the gate's BatchNorm epsilon"),
                                      "1e-5"),
                             1e-12));
    return settings;
  };
  owner("layer mae", "the mae layer",
        "Mixture of attentive experts (MAE): multi-head self-attention with "
        "h >= 2 heads as h experts, expert j being every head but head j "
        "(its output rescaled by h / (h - 1)). A gate network (BatchNorm, "
        "Linear(d, gate_hidden), tanh, dropout, Linear(gate_hidden, h), "
        "softmax) maps an average of the layer's input to responsibilities "
        "g, and the output is the attention with head j scaled by h (1 - "
        "g_j) / (h - 1) before the output projection: one attention, not h. "
        "How it trains (jointly, or by block coordinate descent) is "
        "train's `phases`.",
        maeSettings(false));
  owner("layer cross_mae", "the cross_mae layer",
        "MAE attending from the decoder to the encoder's output "
        "(encoder_decoder decoders only); the gate pools the decoder's own "
        "input, causally.",
        maeSettings(true));
  owner("pool sequence", "pool 'sequence'",
        "The mean over the sequence's real positions: one gate per "
        "sequence (encoders).",
        {});
  owner("pool prefix", "pool 'prefix'",
        "At each position, the mean over it and every earlier position "
        "(decoders).",
        {});
  owner("pool last", "pool 'last'",
        "At each position, the mean over its last `size` positions, "
        "itself included (decoders; the MAE paper's language models "
        "average the last 100).",
        {range(required(setting("size", T::Integer,
                                "how many positions the window holds")),
               1.0)});
  auto moaSettings = [&](bool cross) {
    std::vector<SettingInfo> settings = {
        range(required(setting("experts", T::Integer,
                               "attention experts E (query and output "
                               "projections), at most 1024")),
              1.0),
        range(fallback(setting("k", T::Integer,
                               "experts (heads) per query token, at most E"),
                       "1"),
              1.0),
        range(computed(setting("head_dim", T::Integer,
                               "width of a head (and of the shared key and "
                               "value)"),
                       "d_model / k"),
              1.0, kWidestHeadDim),
        choices(fallback(setting("gate", T::Name,
                                 "raw: each head's output weighted by its "
                                 "router probability (MoA's code); "
                                 "renorm_detached: by that over the sum of "
                                 "the k selected, the sum not differentiated "
                                 "(MoA's paper)"),
                         "raw"),
                {"raw", "renorm_detached"}),
        range(fallback(setting("sample", T::Integer,
                               "in training, the last `sample` of the k "
                               "heads are drawn at random in proportion to "
                               "p (MoA's sample_topk); 0: none"),
                       "0"),
              0.0),
        choices(fallback(setting("aux", T::Name,
                                 "how the layer's balance, z and cv losses "
                                 "join the objective: per_token divides them "
                                 "by the number of target tokens, as adding "
                                 "them to a summed cross-entropy does (MoA's "
                                 "code); mean adds them to the mean "
                                 "cross-entropy (MoA's paper)"),
                         "per_token"),
                {"per_token", "mean"}),
        fallback(setting("bias", T::Flag,
                         "biases on the shared key and value projections"),
                 "false"),
        range(computed(setting("scale", T::Number, "the score scale"),
                       "1 / sqrt(head_dim)"),
              0.0),
    };
    if (!cross)
      settings.push_back(computed(setting("causal", T::Flag,
                                          "each position sees only earlier "
                                          "ones (decoders must be causal)"),
                                  attentionDefaultCausal));
    return settings;
  };
  owner("layer moa", "the moa layer",
        "Mixture of attention heads (MoA): a router picks k of E attention "
        "experts per query token; each expert has its own query and output "
        "projection, all share one key and one value projection (one head "
        "wide), and the output is the gate-weighted sum over the selected "
        "experts. Padding tokens are not routed.",
        moaSettings(false));
  owner("layer cross_moa", "the cross_moa layer",
        "MoA attending from the decoder to the encoder's output: the query "
        "is routed, keys and values come from the encoder (encoder_decoder "
        "decoders only).",
        moaSettings(true));
  owner("layer ffn", "the ffn layer", "A dense feed-forward sublayer.",
        {
            range(required(setting("hidden", T::Integer, "the inner width")),
                  1.0),
            choices(fallback(setting("activation", T::Name,
                                     "the pointwise activation"),
                             "gelu_tanh"),
                    activations),
            fallback(setting("glu", T::Flag,
                             "gated: act(x W1) * (x W3) (SwiGLU with silu)"),
                     "false"),
            fallback(setting("bias", T::Flag, "biases on both projections"),
                     "true"),
        });
  owner("layer moe", "the moe layer",
        "A top-k mixture-of-experts FFN: a linear router over the experts, "
        "each token sent to its k best (see the README's routing "
        "conventions).",
        moeLayerSettings(/*multiHead=*/false));
  owner("layer mh_moe", "the mh_moe layer",
        "Multi-head mixture of experts (MH-MoE): the multi-head layer "
        "(Linear(d, d) with bias) maps each token, which is then split into "
        "`heads` sub-tokens of width d / heads (sub-token j is features "
        "[j*d/heads, (j+1)*d/heads), token-major order); every sub-token is "
        "routed to its k best experts on its own, the experts run on width "
        "d / heads, the outputs are joined back into tokens and go through "
        "the merge layer (Linear(d, d) with bias). The balance loss (weight: "
        "train's balance_loss) counts sub-tokens; there is no z-loss.",
        moeLayerSettings(/*multiHead=*/true));
  owner("capacity none", "capacity 'none'",
        "Every assignment is kept (dropless).", {});
  auto capacity = [&](std::string name, std::string formula,
                      std::string minDefault) {
    owner("capacity " + name, "capacity '" + name + "'",
          "C = " + formula + " for N tokens.",
          {range(fallback(setting("factor", T::Number,
                                  "the capacity factor cf"),
                          "1"),
                 1e-6),
           range(fallback(setting("min", T::Integer,
                                  "the smallest capacity"),
                          minDefault),
                 0.0)});
  };
  capacity("switch", "max(ceil(cf * k * N / E), min) (Switch, GShard)", "0");
  capacity("tutel", "max(k * floor(cf * ceil(N / E)), min) (Tutel, MH-MoE)",
           "0");
  capacity("sparse_mixer",
           "max(round_half_even(cf * N / E), min) (Sparse Mixer)", "4");
  capacity("fraction",
           "max(ceil(cf * N), min), whatever k and E (MH-MoE's eval "
           "capacity token fraction)",
           "0");
  owner("router linear", "router 'linear'",
        "logits = x Wg, Wg of shape [d / heads, E], no bias.", {});
  owner("router xmoe", "router 'xmoe'",
        "The X-MoE gate: logits = (x W_red) . normalize(e_j) for each expert "
        "embedding e_j (rows of [E, dim], L2-normalised, eps 1e-4); each "
        "embedding row is rescaled in place to norm 1.5 before every "
        "training step, and non-finite logits become the smallest finite "
        "logit of the whole call.",
        {range(fallback(setting("dim", T::Integer,
                                "the width of the projection and the expert "
                                "embeddings"),
                        "16"),
               1.0)});

  owner("train", "the training settings",
        "How `moec train` optimises: `train { settings }`.",
        {
            choices(fallback(setting("optimizer", T::Call, "the optimizer"),
                             "adamw"),
                    {"adam", "adamw", "sgd"}),
            range(fallback(setting("steps", T::Integer, "optimizer steps"),
                           "100"),
                  1.0, kMaxSteps),
            choices(fallback(setting("schedule", T::Call,
                                     "the learning-rate schedule"),
                             "constant"),
                    spellings<defs::LrSchedule>()),
            range(fallback(setting("clip_norm", T::Number,
                                   "clip the global gradient norm to this (0: "
                                   "off)"),
                           "0"),
                  0.0),
            range(fallback(setting("batch", T::Integer, "sequences per step"),
                           "8"),
                  1.0, kMaxTokensPerBatch),
            range(computed(setting("seq_len", T::Integer,
                                   "tokens per sequence (at most max_seq)"),
                           "max_seq"),
                  1.0, kMaxTokensPerBatch),
            range(fallback(setting("seed", T::Integer,
                                   "seeds initialisation, dropout and data; "
                                   "an initial weight is a function of the "
                                   "seed, the parameter's name and its index "
                                   "alone (Philox-4x32 counters), the same "
                                   "on every device and any thread count"),
                           "0"),
                  0.0, kMaxSeed),
            range(fallback(setting("balance_loss", T::Number,
                                   "the weight of each MoE layer's balance "
                                   "loss"),
                           "0.01"),
                  0.0),
            range(fallback(setting("z_loss", T::Number,
                                   "the weight of each router's z-loss"),
                           "0.001"),
                  0.0),
            range(fallback(setting("cv_loss", T::Number,
                                   "the weight of each moa layer's "
                                   "coefficient-of-variation loss"),
                           "0"),
                  0.0),
            range(fallback(setting("label_smoothing", T::Number,
                                   "label smoothing a of the cross-entropy: "
                                   "each target token costs (1 - a) (-log "
                                   "p_target) + a mean_v (-log p_v) over the "
                                   "vocabulary (PyTorch's form; fairseq "
                                   "spreads a over the V - 1 other tokens); "
                                   "padding targets cost nothing. At 0 the "
                                   "second term is left out, so a masked "
                                   "(-inf) logit costs nothing unless it is "
                                   "the target (with a > 0 it makes the loss "
                                   "+inf)"),
                           "0"),
                  0.0, 0.99),
            range(fallback(setting("log_every", T::Integer,
                                   "steps between progress lines"),
                           "10"),
                  1.0, kMaxSteps),
            choices(fallback(setting("groups", T::CallList,
                                     "parameter groups with optimizers of "
                                     "their own (see below); every other "
                                     "trainable parameter uses the optimizer "
                                     "and schedule above"),
                             "[]"),
                    {"group"}),
            choices(fallback(setting("phases", T::Call,
                                     "block coordinate descent between one "
                                     "group and the rest (see below); none: "
                                     "every group trains at every step"),
                             "none"),
                    {"coordinate_descent"}),
        });
  owner("groups group", "group(...)",
        "A parameter group: `group(\"NAME\", params = [\"PATTERN\", ...], "
        "settings)`. NAME (letters, digits and _) names the group in "
        "`phases`, in progress lines and in checkpoints. A pattern matches "
        "parameter paths, `*` standing for any run of characters "
        "(`\"*.router\"`: the router of every moe layer); each pattern must "
        "match a trainable parameter, and no parameter may be in two "
        "groups. The group's parameters train with its own optimizer and "
        "schedule, which count the group's own updates (the schedule's "
        "steps, Adam's bias correction).",
        {required(setting("params", T::TextList,
                          "the patterns of the group's parameters")),
         choices(computed(setting("optimizer", T::Call,
                                  "the group's optimizer and its settings"),
                          "train's optimizer"),
                 {"adam", "adamw", "sgd"}),
         choices(fallback(setting("schedule", T::Call,
                                  "the group's learning-rate schedule over "
                                  "its own updates"),
                          "constant"),
                 spellings<defs::LrSchedule>())});
  owner("phases coordinate_descent", "coordinate_descent(...)",
        "Block coordinate descent (MAE): the named group is phi, every other "
        "trainable parameter theta. An F step trains theta on the objective "
        "`loss` with phi frozen; a G step trains only phi on `loss_g`. "
        "Steps are numbered from 1; `g_steps` says which are G steps.",
        {required(setting("group", T::Text, "the group phi, by name")),
         choices(required(setting("g_steps", T::Call,
                                  "which steps are G steps")),
                 {"every", "first"}),
         fallback(setting("then_f", T::Flag,
                          "each G step is followed by an F step on the "
                          "same batch, so theta trains at every step (the "
                          "MAE paper's Algorithm 3: G and F updates on "
                          "every batch of a G epoch); false: a G step "
                          "replaces the F step"),
                  "false")});
  owner("g_steps every", "g_steps 'every'",
        "In every window of `period` steps the last `length` are G steps: "
        "step n is a G step when (n - 1 - offset) mod period >= period - "
        "length. One G step in five: `every(period = 5)`; G steps for one "
        "epoch of E steps in every fifth epoch: `every(period = 5 * E, "
        "length = E)`.",
        {range(required(setting("period", T::Integer,
                                "the steps of a window")),
               1.0, kMaxSteps),
         range(fallback(setting("length", T::Integer,
                                "the G steps at the end of each window (at "
                                "most period)"),
                        "1"),
               1.0, kMaxSteps),
         range(fallback(setting("offset", T::Integer,
                                "shifts the windows by this many steps "
                                "(less than period)"),
                        "0"),
               0.0, kMaxSteps)});
  owner("g_steps first", "g_steps 'first'",
        "`first(N)`: steps 1 to N are G steps, then only F steps.", {});
  owner("optimizer adam", "optimizer 'adam'", "Adam (Kingma and Ba).",
        optimizerSettings(true));
  owner("optimizer adamw", "optimizer 'adamw'",
        "Adam with decoupled weight decay (Loshchilov and Hutter).",
        optimizerSettings(true));
  owner("optimizer sgd", "optimizer 'sgd'",
        "Stochastic gradient descent, with optional momentum.",
        optimizerSettings(false));
  owner("schedule constant", "schedule 'constant'", "lr = base.", {});
  owner("schedule linear", "schedule 'linear'",
        "Linear warm-up, then linear decay to final_lr at the last step.",
        {warmupSetting(), finalLrSetting()});
  owner("schedule inverse_sqrt", "schedule 'inverse_sqrt'",
        "Linear warm-up, then base * sqrt(warmup / step) (fairseq).",
        {warmupSetting()});
  owner("schedule cosine", "schedule 'cosine'",
        "Linear warm-up, then cosine decay to final_lr at the last step.",
        {warmupSetting(), finalLrSetting()});
  owner("schedule polynomial", "schedule 'polynomial'",
        "Linear warm-up, then lr = (base - final_lr) * (1 - (step - warmup) "
        "/ (steps - warmup))^power + final_lr down to final_lr at the last "
        "step (fairseq's polynomial_decay; power 1 is linear).",
        {warmupSetting(), finalLrSetting(),
         range(fallback(setting("power", T::Number,
                                "the exponent of the decay (> 0)"),
                        "1"),
               0.0)});

  owner("data", "the data settings",
        "What `moec train` trains on: `data { source = ... }`.",
        {
            choices(required(setting("source", T::Call,
                                     "where the examples come from (see "
                                     "below)")),
                    {"synthetic", "text", "lines", "labelled", "parallel"}),
            range(fallback(setting("valid_fraction", T::Number,
                                   "file sources: the share held out for "
                                   "validation (the end of the file)"),
                           "0.1"),
                  0.0, 0.9),
        });
  owner("generate", "the generation settings",
        "How encoder_decoder models decode (`moec eval`, `moec run`): "
        "`generate { settings }`. Beam search ranks finished hypotheses by "
        "log-probability / ((5 + length) / 6)^length_penalty (GNMT); the "
        "output has at most max_len_a * source length + max_len_b tokens.",
        {
            range(fallback(setting("beam", T::Integer,
                                   "hypotheses kept per sentence (1: greedy "
                                   "search)"),
                           "4"),
                  1.0, 64.0),
            range(fallback(setting("length_penalty", T::Number,
                                   "alpha of the length penalty (0: none)"),
                           "0.6"),
                  0.0, 10.0),
            range(fallback(setting("max_len_a", T::Number,
                                   "the longest output per source token"),
                           "1.2"),
                  0.0),
            range(fallback(setting("max_len_b", T::Integer,
                                   "the longest output beyond that"),
                           "10"),
                  0.0, kMaxTokensPerBatch),
        });
  owner("source synthetic", "synthetic(...)",
        "Generated data: `synthetic(\"TASK\", settings)` with TASK grammar "
        "(bytes of sentences of a small English-like grammar), markov (a "
        "random Markov chain over the vocabulary), copy (a sequence, a "
        "separator, the sequence again) or translate (sentence pairs of two "
        "made-up languages, word for word through a fixed lexicon with the "
        "verb moved to the end and adjectives after their noun; its own "
        "word vocabulary; a fixed hash of each source sentence decides "
        "whether the pair is held out for validation).",
        {range(fallback(setting("branching", T::Integer,
                                "markov: successors per token"),
                        "2"),
               1.0),
         range(fallback(setting("seed", T::Integer,
                                "the task's own seed (the data is fixed by "
                                "it, whatever the training seed)"),
                        "0"),
               0.0, kMaxSeed)});
  owner("source text", "text(...)",
        "A UTF-8 text file as one token stream (language models; masked "
        "language models read windows of it): "
        "`text(\"path\")`, the path relative to the spec's directory.",
        {});
  owner("source lines", "lines(...)",
        "One example per line (masked language modelling): "
        "`lines(\"path\")`; empty lines are skipped, long lines cut.",
        {});
  owner("source labelled", "labelled(...)",
        "Labelled examples for classification, one per line: "
        "`label<TAB>text` or `label<TAB>text<TAB>text2` (a sentence pair): "
        "`labelled(\"path\", labels = [\"neg\", \"pos\"])`.",
        {setting("labels", T::TextList,
                 "the label names, in class order; without it labels are "
                 "the integers 0 .. classes - 1")});
  owner("source parallel", "parallel(...)",
        "Sentence pairs for translation: `parallel(\"pairs.tsv\")` with "
        "`source<TAB>target` lines, or `parallel(\"src.txt\", "
        "\"tgt.txt\")` with aligned lines.",
        {});
  // An integer setting whose row names no maximum takes the runtime's
  // limit on widths and counts, so Sema and the reference both see it.
  for (OwnerInfo &o : owners)
    for (SettingInfo &setting : o.settings)
      if (setting.type == SettingType::Integer && !setting.max)
        setting.max = kMaxIntegerSetting;
  return owners;
}

std::string typeName(const SettingInfo &s) {
  switch (s.type) {
  case SettingType::Integer:
    return "integer";
  case SettingType::Number:
    return "number";
  case SettingType::Flag:
    return "true / false";
  case SettingType::Text:
    return "string";
  case SettingType::Name:
    return "name";
  case SettingType::Call:
    return "name or call";
  case SettingType::Pair:
    return "[number, number]";
  case SettingType::TextList:
    return "[string, ...]";
  case SettingType::CallList:
    return "[call, ...]";
  }
  return "";
}

} // namespace

std::string limitText(double v) {
  // Limits are powers of two: 2^31 reads better than 2.14748e+09.
  int exponent = 0;
  if (v >= 1048576.0 && std::frexp(v, &exponent) == 0.5)
    return "2^" + std::to_string(exponent - 1);
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", v);
  return buffer;
}

namespace {

std::string allowed(const SettingInfo &s) {
  if (!s.choices.empty()) {
    std::string text;
    for (size_t i = 0; i < s.choices.size(); ++i)
      text += (i ? ", `" : "`") + s.choices[i] + "`";
    return text;
  }
  if (s.min && s.max)
    return "[" + limitText(*s.min) + ", " + limitText(*s.max) + "]";
  if (s.min)
    return ">= " + limitText(*s.min);
  return "";
}

/// Pipes in table cells would end the cell.
std::string cell(std::string text) {
  std::string out;
  for (char c : text)
    out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

void appendTable(std::string &md, const OwnerInfo &o) {
  md += o.summary + "\n\n";
  if (o.settings.empty()) {
    md += "No settings.\n\n";
    return;
  }
  md += "| setting | type | default | allowed | meaning |\n"
        "|---|---|---|---|---|\n";
  for (const SettingInfo &s : o.settings) {
    std::string def = s.required ? "required" : "`" + s.defaultText + "`";
    if (s.computed)
      def = s.defaultText;
    md += "| `" + s.name + "` | " + typeName(s) + " | " + cell(def) + " | " +
          cell(allowed(s)) + " | " + cell(s.help) + " |\n";
  }
  md += "\n";
}

} // namespace

const SettingInfo *OwnerInfo::find(std::string_view name) const {
  for (const SettingInfo &s : settings)
    if (s.name == name)
      return &s;
  return nullptr;
}

std::vector<std::string> OwnerInfo::names() const {
  std::vector<std::string> out;
  for (const SettingInfo &s : settings)
    out.push_back(s.name);
  return out;
}

const std::vector<OwnerInfo> &languageSchema() {
  static const std::vector<OwnerInfo> schema = buildSchema();
  return schema;
}

const OwnerInfo &schemaOf(std::string_view id) {
  for (const OwnerInfo &o : languageSchema())
    if (o.id == id)
      return o;
  std::fprintf(stderr, "internal error: no settings table for '%.*s'\n",
               static_cast<int>(id.size()), id.data());
  std::abort();
}

std::string languageReference() {
  std::string md =
      "# The .moe language: every section, layer and setting\n\n"
      "<!-- Generated by `moec language` from the table the checker uses "
      "(frontend/lib/Semantics/LanguageSchema.cpp); do not edit. -->\n\n"
      "A spec is a version line (`moe 1`), `let` constants, and up to four "
      "sections: `model` (required), `train`, `data` and `generate`. Settings are "
      "`name = value`; values are integers, numbers, `true`/`false`, "
      "strings, names, lists `[a, b]`, calls `name(setting = value, ...)` "
      "and expressions over `let` constants. The syntax (`repeat N as i`, "
      "`if`, expressions) is in `GRAMMAR.md`. Every setting below is "
      "checked for its type and range at its line and column; an unknown "
      "one is reported with the nearest known name or the list of valid "
      "ones. An integer setting is at most 2^31 unless its row says "
      "otherwise, a number must be finite and within float32's range "
      "(magnitude at most 3.4e38), and no parameter tensor may hold more "
      "than 2^40 elements: the limits the runtime enforces, checked here "
      "so that a spec `check` accepts also compiles and loads.\n\n";
  auto section = [&](const char *title, const char *intro,
                     const char *prefix) {
    md += std::string("## ") + title + "\n\n" + intro + "\n\n";
    for (const OwnerInfo &o : languageSchema()) {
      if (o.id.rfind(prefix, 0) != 0)
        continue;
      std::string name = o.id.substr(std::string(prefix).size());
      md += "### " + (name.empty() ? o.id : name) + "\n\n";
      appendTable(md, o);
    }
  };
  section("Sections", "Each section is written `name { settings }`; the "
          "model also holds the layers: in blocks for decoders and encoders, "
          "and in `encoder { ... }` and `decoder { ... }` stacks of blocks "
          "for encoder_decoder models.", "model");
  for (const char *id : {"train", "data", "generate"}) {
    md += std::string("### ") + id + "\n\n";
    appendTable(md, schemaOf(id));
  }
  section("Layers", "Layers live in blocks: `repeat N as i { ... }` stacks N "
          "blocks (i counts from 0, so `if i % 2 == 1 { moe(...) } else { "
          "ffn(...) }` alternates), `block { ... }` adds one. Each layer is a "
          "residual sublayer: `layer(settings)`.",
          "layer ");
  struct CallGroup {
    const char *setting, *prefix;
  };
  md += "## Values that are calls\n\nA setting of type *name or call* takes "
        "one of its names, bare (`capacity = none`) or with settings "
        "(`capacity = switch(factor = 1.25)`); each call's settings are "
        "below.\n\n";
  for (CallGroup g : {CallGroup{"objective (model)", "objective "},
                      CallGroup{"tokenizer (model)", "tokenizer "},
                      CallGroup{"norm (model)", "norm "},
                      CallGroup{"positions (model)", "positions "},
                      CallGroup{"capacity and eval_capacity (moe and mh_moe "
                                "layers)",
                                "capacity "},
                      CallGroup{"router (mh_moe layer)", "router "},
                      CallGroup{"pool (mae and cross_mae layers)", "pool "},
                      CallGroup{"optimizer (train)", "optimizer "},
                      CallGroup{"schedule (train)", "schedule "},
                      CallGroup{"groups (train)", "groups "},
                      CallGroup{"phases (train)", "phases "},
                      CallGroup{"g_steps (coordinate_descent)", "g_steps "},
                      CallGroup{"source (data)", "source "}}) {
    md += std::string("### ") + g.setting + "\n\n";
    for (const OwnerInfo &o : languageSchema()) {
      if (o.id.rfind(g.prefix, 0) != 0)
        continue;
      md += "#### " + o.id.substr(std::string(g.prefix).size()) + "\n\n";
      appendTable(md, o);
    }
  }
  // One trailing newline.
  while (md.size() > 1 && md[md.size() - 1] == '\n' && md[md.size() - 2] == '\n')
    md.pop_back();
  return md;
}

} // namespace moec::frontend
