//===- Session.h - a model's parameters and state on a device ---*- C++ -*-===//
//
// A Session holds one model's parameters, optimizer state and statistics on
// one device and runs the bundle's programs over them: training steps,
// evaluation, logits, generation with a KV cache. A session is
// thread-compatible: use it from one thread at a time. Bundles are shared;
// several sessions may use one bundle.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_SESSION_H
#define MOEC_SESSION_H

#include "moec/Bundle.h"
#include "moec/Data.h"
#include "moec/Tensor.h"
#include "moec/Tokenizer.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace moec {

struct SessionOptions {
  /// "cpu" (the default), "cuda" or "emu".
  std::string device = "cpu";
  /// Overrides the bundle's training seed (initialisation, dropout, data).
  std::optional<uint64_t> seed;
  /// Worker threads of the cpu device; 0 keeps the library default.
  int threads = 0;
};

/// What one training step reports.
struct StepResult {
  /// The step just taken (1-based).
  int64_t step = 0;
  /// Under block coordinate descent, "F" (train_step: every parameter
  /// outside the phases' group) or "G" (train_step_g: only the group;
  /// with then_f, then train_step on the same batch); empty otherwise.
  std::string phase;
  /// Scalar outputs by name: loss, ce, balance_loss, z_loss, lr (and
  /// "lr:<group>" per parameter group the step trains), grad_norm; after a
  /// G and an F update, the F update's, and the G update's loss as
  /// "g_loss".
  std::map<std::string, double> scalars;
  /// Gate statistics by layer path, from the outputs "gate:<layer>": the
  /// mean responsibility of each of the layer's H experts, then the mean
  /// gate entropy in nats (H + 1 values).
  std::map<std::string, std::vector<double>> gates;
  /// Time the host spent waiting for the device to finish the step's
  /// kernels (cuda; 0 on devices that run synchronously). The rest of the
  /// step's wall time is host work: planning, launches, transfers.
  double deviceWaitSeconds = 0;
};

/// Tokens routed to each expert of one MoE layer, accumulated over the
/// calls since the last resetStats().
struct ExpertLoad {
  std::string layer;
  /// Kept assignments per expert.
  std::vector<double> tokens;
  /// The share of each expert: tokens[e] / sum(tokens).
  std::vector<double> fractions() const;

  /// Routing statistics of moe and mh_moe layers (all 0 for MoA), summed
  /// over the runs: assignments made and kept; rows (MH-MoE's sub-tokens,
  /// else tokens) and those with a kept assignment; tokens times experts,
  /// and the distinct experts each token's kept assignments reached.
  double assignments = 0, keptAssignments = 0;
  double rows = 0, activeRows = 0;
  double expertSlots = 0, reachedExperts = 0;
  /// The share of assignments capacity dropped.
  double droppedFraction() const;
  /// MH-MoE's sub-token activation: the share of sub-tokens that reached
  /// at least one expert.
  double rowActivation() const;
  /// MH-MoE's expert activation: the share of the experts that a token's
  /// sub-tokens reached, averaged over tokens.
  double expertActivation() const;
};

struct GenerateOptions {
  int64_t maxNewTokens = 64;
  /// 0 picks the most likely token (greedy); otherwise samples from
  /// softmax(logits / temperature).
  double temperature = 0;
  /// With temperature > 0: sample among the k most likely tokens (0 = all).
  int64_t topK = 0;
  /// Seeds the sampling stream (Philox), so generation is reproducible.
  uint64_t seed = 0;
};

/// Where generate() spent its time: the first decode step reads the whole
/// prompt (prefill), each later one a single token. The decode program is
/// prepared (its kernels compiled or loaded) before the clock starts; the
/// first step still makes its first allocations.
struct GenerateTimes {
  int64_t promptTokens = 0;
  double promptSeconds = 0;
  /// Each decode step after the first, one generated token each.
  std::vector<double> tokenSeconds;
};

/// Decoding settings of translate(); unset fields take the bundle's
/// `generate` section.
struct TranslateOptions {
  /// Hypotheses kept per sentence (1: greedy search).
  std::optional<int64_t> beam;
  /// GNMT length penalty alpha.
  std::optional<double> lengthPenalty;
  /// Sentences decoded together.
  int64_t batch = 32;
};

class Session {
public:
  explicit Session(Bundle bundle, SessionOptions options = {});
  ~Session();
  Session(Session &&) noexcept;
  Session &operator=(Session &&) noexcept;

  const Bundle &bundle() const;
  std::string deviceName() const;
  /// The seed in effect (the option, or the bundle's training seed).
  uint64_t seed() const;
  /// Optimizer steps taken so far (restored from checkpoints).
  int64_t step() const;
  /// The updates each optimizer has made so far, by the name of the
  /// program input that counts them: "step" for the main optimizer,
  /// "step:<group>" for a parameter group's (restored from checkpoints).
  /// Learning-rate schedules and Adam's bias correction run on them.
  std::map<std::string, int64_t> updates() const;
  /// "F" or "G": the phase the next training step runs under block
  /// coordinate descent; empty without phases.
  std::string nextPhase() const;

  /// One optimizer step on `batch` (tokens and targets, i32 [B, S]).
  StepResult trainStep(const Batch &batch);
  /// The objective's outputs on `batch` without updating anything.
  std::map<std::string, double> evaluate(const Batch &batch);
  /// The program evaluate() runs: `eval_loss` where the bundle has one
  /// (training draws random numbers or routes differently), else `loss`.
  std::string evaluationProgram() const;
  /// The `forward` program's logits on `batch` (its tokens and the inputs
  /// the model family takes): [B, S, vocab], or [B, S, classes] for
  /// classifiers.
  Tensor logits(const Batch &batch);
  /// Runs any program of the bundle. `inputs` are bound by name; outputs
  /// are returned by name. Parameters and state are read and updated in
  /// place as the program says.
  std::map<std::string, Tensor> run(const std::string &program,
                                    const std::map<std::string, Tensor> &inputs);

  /// Continues `prompt` (token ids) with up to maxNewTokens tokens, using
  /// the `decode` program and its KV cache. Stops early at the model's
  /// max_seq. Returns only the new tokens; `times`, when given, receives
  /// the wall-clock time of the prompt and of the later steps.
  std::vector<int32_t> generate(const std::vector<int32_t> &prompt,
                                const GenerateOptions &options,
                                GenerateTimes *times = nullptr);

  /// Translates each source (ids without eos) with an encoder-decoder
  /// model's `encode` and `decode` programs: beam search ranked by
  /// length-normalised log-probability, at most max_len_a * |source| +
  /// max_len_b tokens (and max_seq - 1). Returns the outputs without bos
  /// and eos. `specials` are the tokenizer's (bos, eos and pad are needed).
  std::vector<std::vector<int32_t>>
  translate(const std::vector<std::vector<int32_t>> &sources,
            const SpecialTokens &specials, const TranslateOptions &options = {});

  /// Parameters, optimizer moments and the step, as safetensors, atomically;
  /// with parameter groups also each optimizer's update count ("updates",
  /// "updates:<group>").
  void saveCheckpoint(const std::string &path) const;
  /// Restores parameters (all of them, checked by name, dtype and shape),
  /// and the optimizer state and step when the checkpoint has them. Update
  /// counts the checkpoint lacks follow from its step and the phase
  /// schedule.
  void loadCheckpoint(const std::string &path);

  /// A copy of a parameter's current value.
  Tensor param(const std::string &name) const;
  void setParam(const std::string &name, const Tensor &value);

  std::vector<ExpertLoad> expertLoad() const;
  void resetStats();

  /// Per-op timing of every program run from now on (off by default).
  void setProfiling(bool on);
  struct OpTime {
    std::string op;
    int64_t calls;
    double seconds;
  };
  /// The time spent per op since profiling started, most expensive first.
  std::vector<OpTime> profile() const;
  struct LayerTime {
    std::string loc; ///< source location of the steps ("" when unknown)
    bool backward;   ///< from the program's first gradient op on
    int64_t calls;
    double seconds;
  };
  /// The same time by source location (a layer's statement) and pass,
  /// sorted by location. The cuda and emu devices count each fused group's
  /// launches at its first located step, as `moec compile --report` does.
  std::vector<LayerTime> layerProfile() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace moec

#endif // MOEC_SESSION_H
