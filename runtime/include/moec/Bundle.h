//===- Bundle.h - a compiled model ------------------------------*- C++ -*-===//
//
// A bundle is what `moec compile` produces and the runtime executes: one JSON
// document with the model's parameter and state tables, its training and
// data settings, and one execution plan per entry point (train_step, loss,
// backward, forward, decode, ...). It is versioned and validated completely
// when loaded; nothing in it is trusted. Bundles are immutable and cheap to
// copy (shared).
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_BUNDLE_H
#define MOEC_BUNDLE_H

#include "moec/Data.h"
#include "moec/Tensor.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace moec {

namespace detail {
struct BundleData;
} // namespace detail

/// The bundle format version this runtime reads.
inline constexpr int64_t kBundleFormatVersion = 2;

struct ParamInfo {
  std::string name;
  DType dtype;
  Shape shape;
  /// zeros, ones, normal, uniform, xavier_uniform, sinusoidal, orthogonal.
  std::string init;
  double scale;
  bool frozen;
  /// > 0: train_step rescales each row to this L2 norm before the step
  /// (moe.param's row_norm; the plan does it, this only describes it).
  double rowNorm = 0;
  /// The parameter group whose optimizer trains it; empty: the main one.
  std::string group;
};

/// Block coordinate descent (`phases = coordinate_descent(...)`): G steps
/// run train_step_g, which trains only `group`; F steps run train_step,
/// which trains every other parameter.
struct PhaseConfig {
  std::string group;
  /// "every": step n (from 1) is a G step when (n - 1 - offset) mod period
  /// >= period - length. "first": steps 1 to `first` are.
  std::string gSteps = "every";
  int64_t period = 1, length = 1, offset = 0, first = 0;

  /// Whether the step with 0-based index `index` is a G step.
  bool isGStep(int64_t index) const;
  /// A G step is followed by an F step on the same batch.
  bool thenF = false;
  /// The G steps among the first `steps`.
  int64_t gStepsIn(int64_t steps) const;
  /// The F updates among the first `steps` steps.
  int64_t fStepsIn(int64_t steps) const;
};

struct TrainingConfig {
  std::string optimizer;
  std::string schedule;
  double lr = 0;
  int64_t batch = 0;
  int64_t seqLen = 0;
  int64_t steps = 0;
  uint64_t seed = 0;
  int64_t logEvery = 10;
  /// The parameter groups with optimizers (and update counters) of their
  /// own, in the spec's order.
  std::vector<std::string> groups;
  /// Set under block coordinate descent.
  std::optional<PhaseConfig> phases;
};

/// The tokenizer a model was compiled with.
struct TokenizerInfo {
  /// "bytes" or "sentencepiece".
  std::string kind = "bytes";
  /// sentencepiece: the model file as the spec named it (resolved).
  std::string path;
  /// sentencepiece: the SHA-256 of that file, hex.
  std::string sha256;
};

struct ModelInfo {
  std::string name;
  /// "decoder", "encoder" or "encoder_decoder".
  std::string kind;
  /// "lm", "mlm", "classify" or "translate".
  std::string objective;
  int64_t vocab = 0;
  int64_t dModel = 0;
  int64_t maxSeq = 0;
  std::string dtype;
  /// f32 models: how the cuda and emu devices multiply matrices, "fp32"
  /// (FMA; also when the bundle does not say), "tf32" or "tf32x3" (3xTF32)
  /// on the tensor cores. The cpu device always computes in fp32.
  std::string f32Matmul = "fp32";
  /// Segment (token type) embeddings; 0 when the model has none.
  int64_t segments = 0;
  /// classify: the number of classes.
  int64_t classes = 0;
  MlmConfig mlm;
  TokenizerInfo tokenizer;
  /// Parameter-path prefixes of the MoE layers, in model order.
  std::vector<std::string> moeLayers;
};

/// Beam search settings of an encoder-decoder model (the .moe `generate`
/// section).
struct GenerateConfig {
  int64_t beam = 4;
  /// GNMT length penalty exponent: scores are divided by ((5 + len) / 6)^a.
  double lengthPenalty = 0.6;
  /// Output length limit: maxLenA * source length + maxLenB tokens.
  double maxLenA = 1.2;
  int64_t maxLenB = 10;
};

class Bundle {
public:
  /// Reads and validates a bundle file. Throws moec::Error naming the file
  /// and the field at fault.
  static Bundle load(const std::string &path);
  /// Parses and validates bundle JSON text; `origin` names it in errors.
  static Bundle parse(const std::string &text,
                      const std::string &origin = "<bundle>");

  /// Writes the bundle atomically (temporary file + rename).
  void save(const std::string &path) const;
  /// The bundle as JSON text (pretty-printed).
  std::string json() const;

  const ModelInfo &model() const;
  const TrainingConfig &training() const;
  const DataSpec &data() const;
  /// Beam search settings (encoder-decoder models; defaults otherwise).
  const GenerateConfig &generate() const;
  const std::vector<ParamInfo> &params() const;
  /// Entry points, sorted.
  std::vector<std::string> programs() const;
  bool hasProgram(const std::string &name) const;
  /// The input names of a program, e.g. {"tokens", "targets"}; throws
  /// moec::Error for an unknown program.
  std::vector<std::string> programInputs(const std::string &name) const;
  /// The output names of a program.
  std::vector<std::string> programOutputs(const std::string &name) const;

  /// The validated contents, for the runtime's own use.
  const detail::BundleData &internals() const { return *impl; }

private:
  explicit Bundle(std::shared_ptr<const detail::BundleData> impl)
      : impl(std::move(impl)) {}
  std::shared_ptr<const detail::BundleData> impl;
};

} // namespace moec

#endif // MOEC_BUNDLE_H
