//===- ModuleEmitter.h - ModelSpec -> moe dialect module --------*- C++ -*-===//
//
// The module of one checked spec: its parameters and caches
// (Declarations.cpp), its settings as module attributes (Settings.cpp), the
// entry functions of its family (Functions.cpp) and the layers they are
// made of (Layers.cpp). Every entry function is emitted by walking the same
// spec, so training, evaluation, inference and decoding cannot drift apart.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_FRONTEND_MLIRGEN_MODULEEMITTER_H
#define MOEC_FRONTEND_MLIRGEN_MODULEEMITTER_H

#include "moec/Frontend/ModelSpec.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/SourceMgr.h"
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace moec::frontend {

/// The entry functions: the training objective, the same objective without
/// dropout for evaluation, logits, logits with a KV cache (decoders and
/// encoder_decoder models), the encoder pass that fills the decoder's
/// cross-attention caches (encoder_decoder models), and, under block
/// coordinate descent, the objective of G steps ("loss_g"; `loss` is that of
/// F steps).
enum class Mode { Loss, EvalLoss, Forward, Decode, Encode, GateLoss };

struct ParamDecl {
  std::string name;
  mlir::RankedTensorType type;
  mlir::moe::Init init;
  double scale;
  bool frozen;
  /// > 0: moe.param's row_norm (train_step rescales each row to it).
  double rowNorm = 0;
  /// The parameter group whose optimizer trains it (empty: the main one).
  std::string group;
};

/// A cache (persistent state) the decode program reads: self-attention K/V
/// ([B, max_seq, w]) or cross-attention K/V of the encoder's output ([B, T,
/// w], filled by the encode program).
struct CacheDecl {
  std::string name;
  mlir::RankedTensorType type;
  bool cross;
};

/// The state of the function being emitted.
struct Function {
  Mode mode;
  std::map<std::string, mlir::Value> paramArgs;
  std::map<std::string, mlir::Value> cacheArgs;
  /// Inputs by name: tokens, targets, mask, segments, source, source_mask.
  std::map<std::string, mlir::Value> inputs;
  mlir::Value rng, past;
  /// Parameters cast to the storage type, once per function.
  std::map<std::string, mlir::Value> storageParams;
  llvm::SmallVector<std::pair<std::string, mlir::Value>> outputs;
  llvm::SmallVector<std::pair<std::string, mlir::Value>> updates;
  /// The auxiliary losses: each layer's unweighted terms for the
  /// statistics, and the terms of the objective with their weights, added
  /// to the mean cross-entropy or divided by the number of target tokens
  /// first (weighted at the end, so that the layers stay contiguous for
  /// fusion).
  llvm::SmallVector<mlir::Value> balanceLosses, zLosses, cvLosses;
  struct AuxTerm {
    mlir::Value term;
    double weight;
  };
  llvm::SmallVector<AuxTerm> auxMean, auxPerToken;
  int64_t dropoutStream = 0;

  mlir::Value input(const std::string &name) const {
    auto it = inputs.find(name);
    return it == inputs.end() ? mlir::Value() : it->second;
  }
  bool training() const { return mode == Mode::Loss || mode == Mode::GateLoss; }
  bool objective() const {
    return mode == Mode::Loss || mode == Mode::EvalLoss ||
           mode == Mode::GateLoss;
  }
};

/// Where a stack runs: the padding mask of its tokens (null when there is
/// none) and, in a decoder of an encoder_decoder model, the encoder's output
/// and its padding mask.
struct StackContext {
  const StackSpec *stack;
  mlir::Value mask;
  mlir::Value memory, memoryMask;
};

class ModuleEmitter {
public:
  ModuleEmitter(const Spec &spec, mlir::MLIRContext *ctx,
                llvm::SourceMgr &sm);
  mlir::OwningOpRef<mlir::ModuleOp> run();

  //===--- Declarations.cpp ---------------------------------------------===//

  void declareParameters();
  void declareCaches(mlir::Location loc);
  /// The parameter path of a sublayer: "<stack prefix>.<block>.<name>".
  static std::string prefix(const StackSpec &stack, size_t block,
                            const SublayerSpec &sub);
  /// Whether the model reads token embeddings of its own for each stack.
  std::string tokenTable(const StackSpec &stack) const;
  std::string positionTable(const StackSpec &stack) const;
  std::string stackName(const StackSpec &stack) const;

  //===--- Settings.cpp -------------------------------------------------===//

  void setModuleAttributes(mlir::ModuleOp module);
  /// Puts every trainable parameter in the group whose pattern matches its
  /// name; reports a pattern that matches none and a parameter that two
  /// groups claim, at the pattern. False after an error.
  bool assignGroups();

  //===--- Functions.cpp ------------------------------------------------===//

  void emitFunction(Mode mode);
  /// The objective: cross-entropy plus the auxiliary losses, then the
  /// statistics and expert loads.
  void emitObjective(Function &fn, mlir::Value logits, mlir::Location loc);
  /// Whether training draws random numbers (dropout, sampled MoA heads):
  /// then the loss takes an rng and an eval_loss program exists.
  bool randomInTraining() const;
  /// Whether an expert layer's capacity outside training differs from its
  /// training one: then an eval_loss program routes as evaluation does.
  bool routesDifferentlyInEval() const;
  /// Whether training alternates F and G steps (train's `phases`).
  bool coordinateDescent() const;

  //===--- Layers.cpp ---------------------------------------------------===//

  /// Token (and position, segment) embeddings of one stack, normed and
  /// dropped out as the model says.
  mlir::Value embed(Function &fn, const StackSpec &stack, mlir::Value ids,
                    mlir::Value segments, mlir::Location loc);
  /// The blocks of one stack and, pre-norm, its final norm.
  mlir::Value runStack(Function &fn, const StackContext &sc, mlir::Value x);
  mlir::Value sublayer(Function &fn, const StackContext &sc,
                       const SublayerSpec &sub, const std::string &p,
                       mlir::Value h, mlir::Location loc);
  mlir::Value attention(Function &fn, const StackContext &sc,
                        const AttentionSpec &a, const std::string &p,
                        mlir::Value h, mlir::Location loc);
  /// MAE: the attention's context [B, S, h * dh] with head j scaled by
  /// h (1 - g_j) / (h - 1); g from the gate, a sampled expert (F steps of
  /// coordinate descent, the uniform baseline) or 1/h (uniform, eval).
  mlir::Value maeMixture(Function &fn, const StackContext &sc,
                         const MaeSpec &mae, int64_t heads,
                         const std::string &p, mlir::Value h,
                         mlir::Value context, mlir::Location loc);
  /// The gate's responsibilities [B, 1 or S, h] (master type).
  mlir::Value maeGate(Function &fn, const StackContext &sc, const MaeSpec &mae,
                      int64_t heads, const std::string &p, mlir::Value h,
                      mlir::Location loc);
  /// Whether `fn` trains the MAE gates (joint training, G steps): their
  /// BatchNorm then uses batch statistics and updates its running ones.
  bool trainsGates(const Function &fn) const;
  mlir::Value moa(Function &fn, const StackContext &sc, const MoaSpec &a,
                  const std::string &p, mlir::Value h, mlir::Location loc);
  /// K and V of an attention sublayer: projected from the stack (self) or
  /// the encoder's output (cross); with a KV cache in decode programs.
  std::pair<mlir::Value, mlir::Value>
  keysAndValues(Function &fn, const StackContext &sc, bool cross,
                const std::string &p, mlir::Value h, mlir::Location loc);
  /// keysAndValues in two steps, so that keys can rotate in between: the
  /// projections (the cross-attention caches when decoding), then the
  /// self-attention KV cache writes of decode programs.
  std::pair<mlir::Value, mlir::Value>
  projectKeysAndValues(Function &fn, const StackContext &sc, bool cross,
                       const std::string &p, mlir::Value h, mlir::Location loc);
  std::pair<mlir::Value, mlir::Value>
  cacheKeysAndValues(Function &fn, bool cross, const std::string &p,
                     mlir::Value k, mlir::Value v, mlir::Location loc);
  /// moe.rope of queries or keys (`heads` heads) of a self-attention layer.
  mlir::Value rope(mlir::Value x, mlir::Value start, int64_t heads,
                   const AttentionSpec &a, mlir::Location loc);
  /// The position of the program's first token: the cache length when
  /// decoding, else 0.
  mlir::Value firstPosition(Function &fn, mlir::Location loc);
  mlir::Value ffn(Function &fn, const FfnSpec &f, const std::string &p,
                  mlir::Value h, mlir::Location loc);
  mlir::Value xmoeLogits(Function &fn, const std::string &prefix,
                         mlir::Value x, mlir::Location loc);
  mlir::Value moeLayer(Function &fn, const MoeLayerSpec &e,
                       const std::string &p, mlir::Value h,
                       mlir::Location loc);
  mlir::Value norm(Function &fn, mlir::Value x, const std::string &name,
                   mlir::Location loc);
  mlir::Value dropout(Function &fn, mlir::Value x, mlir::Location loc);
  mlir::Value linear(Function &fn, mlir::Value x, const std::string &w,
                     const std::string &bias, mlir::Location loc);
  mlir::Value activation(mlir::Value x, mlir::moe::Activation kind,
                         mlir::Location loc);
  /// The output layer: token logits (tied or "head"), or the classifier on
  /// the pooled first position.
  mlir::Value head(Function &fn, mlir::Value x, mlir::Location loc);

  //===--- Shared helpers -----------------------------------------------===//

  mlir::Location locationOf(llvm::SMRange range);
  mlir::RankedTensorType tensor(llvm::ArrayRef<int64_t> shape);
  void addParam(std::string name, llvm::ArrayRef<int64_t> shape,
                mlir::moe::Init init, double scale = 1.0, bool frozen = false,
                double rowNorm = 0);
  void addNorm(const std::string &name);
  void declareMultiHeadMoe(const std::string &prefix, const MoeLayerSpec &e);
  void declareMaeGate(const std::string &prefix, const MaeSpec &mae,
                      int64_t heads);
  /// Whether an MAE layer's gate reads earlier positions (a causal window
  /// with a learned gate): decoding then keeps the layer's inputs.
  static bool maePoolsHistory(const MaeSpec &mae) {
    return !mae.uniform && mae.pool != MaeSpec::Pool::Sequence;
  }
  /// Activations (the storage type).
  mlir::Type unranked();
  /// Router values, attention statistics and losses (the master type).
  mlir::Type unrankedMaster();
  mlir::Type unrankedIndex();
  mlir::Type scalar();
  mlir::Value scalarConstant(mlir::Location loc, double v);
  /// `v` with element type `element` (a moe.cast unless it has it).
  mlir::Value convert(mlir::Value v, mlir::Type element, mlir::Location loc);
  /// A parameter as the master weights (f32 under bf16).
  mlir::Value masterParam(Function &fn, const std::string &name);
  /// A parameter in the storage type, cast once per function.
  mlir::Value param(Function &fn, const std::string &name);
  mlir::Value optionalParam(Function &fn, const std::string &name);
  mlir::Value optionalMasterParam(Function &fn, const std::string &name);
  mlir::Value sum(llvm::ArrayRef<mlir::Value> values, mlir::Location loc);

  const Spec &spec;
  const ModelSpec &model;
  mlir::MLIRContext *ctx;
  llvm::SourceMgr &sourceMgr;
  mlir::OpBuilder b;
  mlir::Type floatType, masterType;
  std::vector<ParamDecl> params;
  std::vector<CacheDecl> caches;
  /// Where the parameters being declared come from (the model, or a layer),
  /// and the first parameter too large for a tensor, reported there.
  llvm::SMRange paramSource;
  std::optional<std::pair<std::string, llvm::SMRange>> oversizedParam;
};

} // namespace moec::frontend

#endif // MOEC_FRONTEND_MLIRGEN_MODULEEMITTER_H
