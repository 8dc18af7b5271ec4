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

struct AttentionSpec {
  int64_t heads = 1;
  int64_t kvHeads = 1;
  int64_t headDim = 0;
  bool causal = true;
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
};

/// One residual sublayer of a block.
struct SublayerSpec {
  enum class Kind { Attention, Ffn, Moe };
  Kind kind = Kind::Ffn;
  /// Its name in parameter paths: "attn", "ffn", "moe" (+ index when a block
  /// has several of one kind).
  std::string name;
  AttentionSpec attention;
  FfnSpec ffn;
  MoeLayerSpec moe;
  llvm::SMRange range;
};

struct BlockSpec {
  std::vector<SublayerSpec> sublayers;
};

struct ModelSpec {
  std::string name;
  llvm::SMRange range;
  int64_t vocab = 0;
  int64_t dModel = 0;
  int64_t maxSeq = 0;
  NormSpec norm;
  bool preNorm = true;
  bool learnedPositions = true;
  bool tieEmbeddings = false;
  double dropout = 0;
  double initStd = 0.02;
  /// "f32" or "f64".
  std::string dtype = "f32";
  std::vector<BlockSpec> blocks;
};

struct TrainSpec {
  std::string optimizer = "adamw";
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weightDecay = 0;
  double momentum = 0;
  mlir::moe::LrSchedule schedule = mlir::moe::LrSchedule::Constant;
  int64_t warmup = 0;
  double finalLr = 0;
  double clipNorm = 0;
  int64_t batch = 8;
  int64_t seqLen = 0;
  int64_t steps = 100;
  int64_t seed = 0;
  double balanceLoss = 0.01;
  double zLoss = 0.001;
  double labelSmoothing = 0;
  int64_t logEvery = 10;
};

struct DataSourceSpec {
  std::string kind = "synthetic"; ///< synthetic | text
  std::string task = "grammar";   ///< synthetic task
  std::string path;               ///< text: resolved against the spec's directory
  int64_t taskSeed = 0;
  int64_t branching = 2;
  double validFraction = 0.1;
};

struct Spec {
  ModelSpec model;
  TrainSpec train;
  DataSourceSpec data;
};

} // namespace moec::frontend

#endif // MOEC_FRONTEND_MODELSPEC_H
