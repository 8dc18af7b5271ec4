//===- ModelSpec.h - the checked meaning of a .moe file ---------*- C++ -*-===//
//
// Sema turns the evaluated SpecFile into these typed structs, reporting every
// unknown name, wrong type and inconsistent size at its source range.
// MLIRGen only ever sees a valid ModelSpec.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_FRONTEND_MODELSPEC_H
#define MOEC_FRONTEND_MODELSPEC_H

#include "moe/IR/MoeOps.h"
#include "moec/support/PhaseSchedule.h"
#include "llvm/Support/SMLoc.h"
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moec::frontend {

struct NormSpec {
  enum class Kind { LayerNorm, RmsNorm };
  Kind kind = Kind::LayerNorm;
  double eps = 1e-5;
};

/// The gate of a mixture of attentive experts (MAE): expert j is every
/// head but head j; responsibilities g over the h experts come from a
/// pooled summary of the layer's input through BatchNorm, Linear(d,
/// hidden), tanh, dropout, Linear(hidden, h) and a softmax; the layer is
/// one multi-head attention whose head j is scaled by h (1 - g_j) / (h - 1).
struct MaeSpec {
  /// Which positions the gate's summary averages: the whole (real)
  /// sequence, every position's causal prefix, or its last `windowSize`
  /// positions.
  enum class Pool { Sequence, Prefix, Last };
  Pool pool = Pool::Sequence;
  int64_t windowSize = 0;
  /// No gate: one head dropped uniformly at random per sequence in
  /// training, the plain attention in eval (the paper's uniform baseline).
  bool uniform = false;
  int64_t gateHidden = 256;
  double gateDropout = 0.1;
  double bnMomentum = 0.1;
  double bnEps = 1e-5;
};

/// Self-attention, or cross-attention to the encoder's output (`cross`).
struct AttentionSpec {
  int64_t heads = 1;
  int64_t kvHeads = 1;
  int64_t headDim = 0;
  bool causal = true;
  bool cross = false;
  bool bias = false;
  double scale = 0;
  /// With positions = rope (self-attention): the rotated width of a head.
  int64_t rotaryDim = 0;
  /// Set for `mae` and `cross_mae` layers.
  std::optional<MaeSpec> mae;
};

/// Mixture of attention heads: self-attention, or cross-attention (`cross`).
struct MoaSpec {
  int64_t experts = 0;
  int64_t k = 1;
  int64_t headDim = 0;
  bool causal = true;
  bool cross = false;
  mlir::moe::GateWeighting gate = mlir::moe::GateWeighting::Raw;
  int64_t sample = 0;
  /// The layer's auxiliary losses are divided by the number of target
  /// tokens (MoA's code) rather than added to the mean cross-entropy.
  bool auxPerToken = true;
  bool bias = false;
  double scale = 0;
};

struct FfnSpec {
  int64_t hidden = 0;
  mlir::moe::Activation activation = mlir::moe::Activation::GeluTanh;
  bool glu = false;
  bool bias = true;
};

struct MoeLayerSpec {
  int64_t experts = 0;
  int64_t k = 1;
  int64_t hidden = 0;
  mlir::moe::Activation activation = mlir::moe::Activation::GeluTanh;
  bool glu = false;
  bool bias = false;
  bool routerBias = false;
  mlir::moe::GateWeighting gate = mlir::moe::GateWeighting::Raw;
  mlir::moe::Capacity capacity = mlir::moe::Capacity::None;
  double capacityFactor = 1.0;
  int64_t minCapacity = 0;
  mlir::moe::Priority priority = mlir::moe::Priority::TokenOrder;
  mlir::moe::BalanceLoss balance = mlir::moe::BalanceLoss::AllSlots;
  /// The capacity outside training (eval, generation); the training
  /// formula for `moe`, dropless by default for `mh_moe`.
  mlir::moe::Capacity evalCapacity = mlir::moe::Capacity::None;
  double evalCapacityFactor = 1.0;
  int64_t evalMinCapacity = 0;
  /// Whether the router's z-loss joins the objective (MH-MoE has none).
  bool zLoss = true;

  // MH-MoE (`mh_moe`): every token is split into `heads` sub-tokens of
  // width d / heads, each routed on its own; the multi-head layer before
  // and the merge layer after are Linear(d, d) with bias.
  bool multiHead = false;
  int64_t heads = 1;
  bool headProj = false;
  bool mergeProj = false;
  /// The X-MoE router when > 0: logits are the sub-token projected to this
  /// width against L2-normalised expert embeddings.
  int64_t xmoeDim = 0;
};

/// One residual sublayer of a block.
struct SublayerSpec {
  enum class Kind { Attention, Ffn, Moe, Moa };
  Kind kind = Kind::Ffn;
  /// Its name in parameter paths: "attn", "cross_attn", "ffn", "moe", "moa",
  /// "cross_moa", "mae", "cross_mae" (+ index when a block has several of
  /// one kind).
  std::string name;
  AttentionSpec attention;
  FfnSpec ffn;
  MoeLayerSpec moe;
  MoaSpec moa;
  llvm::SMRange range;
};

struct BlockSpec {
  std::vector<SublayerSpec> sublayers;
};

/// The blocks of one stack, and where its parameters live.
struct StackSpec {
  enum class Role { Decoder, Encoder };
  Role role = Role::Decoder;
  /// "layers" for a model with one stack, "encoder.layers" /
  /// "decoder.layers" in an encoder_decoder.
  std::string prefix = "layers";
  std::vector<BlockSpec> blocks;
};

enum class ModelKind { Decoder, Encoder, EncoderDecoder };
enum class Objective { Lm, Mlm, Classify, Translate };
enum class Positions { Learned, Sinusoidal, None, Rope };

/// Rotary position embeddings of self-attention queries and keys.
struct RopeSpec {
  double base = 10000;
  /// The share of each head's features that rotate (rotary_dim =
  /// fraction * head_dim, even).
  double fraction = 1.0;
};

struct MlmSpec {
  double rate = 0.15;
  double maskRate = 0.8;
  double randomRate = 0.1;
  int64_t maxPredictions = 20;
};

struct TokenizerSpec {
  /// "bytes" or "sentencepiece".
  std::string kind = "bytes";
  /// sentencepiece: the model file, resolved against the spec's directory.
  std::string path;
  /// sentencepiece: the SHA-256 of the file (hex), which bundles and
  /// checkpoints record so that a changed tokenizer is refused.
  std::string sha256;
};

struct ModelSpec {
  std::string name;
  llvm::SMRange range;
  ModelKind kind = ModelKind::Decoder;
  Objective objective = Objective::Lm;
  MlmSpec mlm;
  /// classify: the number of classes.
  int64_t classes = 0;
  int64_t vocab = 0;
  TokenizerSpec tokenizer;
  int64_t dModel = 0;
  int64_t maxSeq = 0;
  NormSpec norm;
  bool preNorm = true;
  Positions positions = Positions::Learned;
  RopeSpec rope;
  int64_t segments = 0;
  bool tieEmbeddings = false;
  bool shareEmbeddings = false;
  bool embedScale = false;
  bool embedNorm = false;
  double dropout = 0;
  double initStd = 0.02;
  /// "f32", "f64" or "bf16".
  std::string dtype = "f32";
  /// How f32 models multiply matrices on the cuda and emu devices: "fp32"
  /// (FMA), "tf32" or "tf32x3" (tensor cores; see README "Precision").
  std::string f32Matmul = "fp32";
  /// One stack (decoder or encoder), or the encoder then the decoder.
  std::vector<StackSpec> stacks;

  const StackSpec *encoder() const {
    for (const StackSpec &s : stacks)
      if (s.role == StackSpec::Role::Encoder)
        return &s;
    return nullptr;
  }
  const StackSpec *decoder() const {
    for (const StackSpec &s : stacks)
      if (s.role == StackSpec::Role::Decoder)
        return &s;
    return nullptr;
  }
};

/// An optimizer with its hyper-parameters and learning-rate schedule: the
/// training settings' own, or a parameter group's.
struct OptimizerSpec {
  std::string optimizer = "adamw";
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weightDecay = 0;
  double momentum = 0;
  mlir::moe::LrSchedule schedule = mlir::moe::LrSchedule::Constant;
  int64_t warmup = 0;
  double finalLr = 0;
  /// polynomial: the exponent of the remaining share.
  double power = 1;
};

/// `group("name", params = ["glob", ...], optimizer = ..., schedule = ...)`:
/// the trainable parameters whose names match one of the patterns (`*`
/// matches any run of characters), trained with their own optimizer.
struct ParamGroupSpec : OptimizerSpec {
  std::string name;
  llvm::SMRange range;
  struct Pattern {
    std::string glob;
    llvm::SMRange range;
  };
  std::vector<Pattern> patterns;
};

/// `phases = coordinate_descent(group = "g", g_steps = ...)`: block
/// coordinate descent. A G step trains only `group` (phi) on the `loss_g`
/// objective, an F step every other trainable parameter on `loss`.
struct PhaseSpec {
  std::string group;
  moec::support::PhaseSchedule gSteps;
};

struct TrainSpec : OptimizerSpec {
  double clipNorm = 0;
  int64_t batch = 8;
  int64_t seqLen = 0;
  int64_t steps = 100;
  int64_t seed = 0;
  double balanceLoss = 0.01;
  double zLoss = 0.001;
  double cvLoss = 0;
  double labelSmoothing = 0;
  int64_t logEvery = 10;
  /// Parameter groups with optimizers of their own; every trainable
  /// parameter outside them uses the settings above.
  std::vector<ParamGroupSpec> groups;
  /// Block coordinate descent over one group; without it every group
  /// trains at every step (joint training).
  std::optional<PhaseSpec> phases;
};

struct DataSourceSpec {
  /// synthetic | text | lines | labelled | parallel
  std::string kind = "synthetic";
  std::string task = "grammar"; ///< synthetic task
  /// File sources: resolved against the spec's directory (parallel: one
  /// TSV file, or the source and target files).
  std::vector<std::string> paths;
  /// labelled: the label names in class order (empty: integer labels).
  std::vector<std::string> labels;
  int64_t taskSeed = 0;
  int64_t branching = 2;
  double validFraction = 0.1;
};

struct GenerateSpec {
  int64_t beam = 4;
  double lengthPenalty = 0.6;
  double maxLenA = 1.2;
  int64_t maxLenB = 10;
};

struct Spec {
  ModelSpec model;
  TrainSpec train;
  DataSourceSpec data;
  GenerateSpec generate;
};

} // namespace moec::frontend

#endif // MOEC_FRONTEND_MODELSPEC_H
