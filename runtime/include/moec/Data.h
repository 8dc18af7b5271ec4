//===- Data.h - training data sources --------------------------*- C++ -*-===//
//
// Batches for training and evaluation: token streams (a byte-level text
// file; synthetic tasks that need no download and whose achievable loss is
// known), masked-LM rows of lines or text, labelled sentence (pair)
// classification examples, and translation pairs (parallel text or a
// synthetic translation task). Every batch is a pure function of (spec,
// seed, split, index, shape), so a run resumed from a checkpoint at step n
// sees exactly the batches it would have seen.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DATA_H
#define MOEC_DATA_H

#include "moec/Tensor.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace moec {

class Tokenizer;

/// One batch: tokens and targets, both i32 [B, S], and the other inputs the
/// model family takes. Language models: targets[b][s] is the token that
/// follows tokens[b][s]. Other objectives: targets < 0 are not predicted.
struct Batch {
  Tensor tokens;
  Tensor targets;
  /// By input name, all i32: "mask" and "segments" [B, S] (encoders and
  /// decoders of translation models), "source" and "source_mask" [B, T]
  /// (encoder-decoder models). Masks are 1 at real tokens, 0 at padding.
  std::map<std::string, Tensor> inputs;
};

/// Masked language modelling: which tokens are predicted and how they are
/// corrupted (BERT's recipe).
struct MlmConfig {
  /// Share of the ordinary tokens of a row that are predicted.
  double rate = 0.15;
  /// Of those, the share replaced by the mask token ...
  double mask = 0.8;
  /// ... and the share replaced by a random ordinary token (the rest stay).
  double random = 0.1;
  /// At most this many predictions per row.
  int64_t maxPredictions = 20;
};

/// What the .moe `data` section asks for.
struct DataSpec {
  /// "synthetic", "text", "lines", "labelled" or "parallel".
  std::string kind;
  /// synthetic: "grammar", "markov", "copy" or "translate".
  std::string task;
  /// The files: text and lines one, labelled one (tab-separated), parallel
  /// one (tab-separated source and target) or two (line-aligned).
  std::vector<std::string> paths;
  /// labelled: the label names in class order (empty: labels are 0, 1, ...).
  std::vector<std::string> labels;
  /// Fixes the synthetic task itself (the Markov chain), independently of
  /// the sampling seed.
  int64_t taskSeed = 0;
  /// markov: successors per token.
  int64_t branching = 2;
  /// File sources: the tail fraction held out for validation.
  double validFraction = 0.1;

  /// Whether the spec asks for a Valid split: generated data always has
  /// one; files only when validFraction > 0.
  bool holdsOut() const { return kind == "synthetic" || validFraction > 0; }
};

/// What a data source needs to know of the model it feeds.
struct DataTarget {
  int64_t vocab = 0;
  /// "decoder", "encoder" or "encoder_decoder".
  std::string kind = "decoder";
  /// "lm", "mlm", "classify" or "translate".
  std::string objective = "lm";
  int64_t classes = 0;
  int64_t segments = 0;
  MlmConfig mlm;
  /// Turns file text into ids (file sources other than byte-level LM text);
  /// must outlive the source.
  const Tokenizer *tokenizer = nullptr;
};

/// One translation example as ids, without bos or eos.
struct TranslationPair {
  std::vector<int32_t> source, target;
};

/// A stream of token batches over a fixed vocabulary, for one split.
class DataSource {
public:
  virtual ~DataSource();
  /// Batch `index` (0-based) of the stream: the same index always gives the
  /// same batch.
  virtual Batch batch(int64_t index, int64_t batchSize,
                      int64_t seqLen) const = 0;
  /// Tokens range over [0, vocab()).
  virtual int64_t vocab() const = 0;
  /// Tokens to text for display. Byte-level sources give the bytes, with
  /// bytes other than printable ASCII, newline and tab escaped as \xNN (and
  /// ids outside [0, 256) as <id>); id sources give space-separated ids.
  virtual std::string decode(const std::vector<int32_t> &tokens) const = 0;
  /// Text to tokens for prompts. Byte-level sources take the bytes as they
  /// are; id sources parse whitespace-separated ids, throwing moec::Error on
  /// anything else or an id outside [0, vocab()).
  virtual std::vector<int32_t> encode(const std::string &text) const = 0;
  /// One line for logs, e.g. "synthetic grammar (byte-level, vocab 256)".
  virtual std::string describe() const = 0;
  /// Translation sources: the examples of the split, in the order the rows
  /// of a validation pass read them (what BLEU is measured on). Others have
  /// none.
  virtual std::vector<TranslationPair> pairs() const { return {}; }
  /// File sources of whole examples (lines, labelled, parallel): how many
  /// the split holds; rows past that wrap around. 0 for streams and
  /// generated data, which do not run out.
  virtual int64_t examples() const { return 0; }
};

enum class Split { Train, Valid };

/// Opens the source `spec` describes. `modelVocab` is the model's vocabulary
/// size: synthetic markov and copy use it as their vocabulary, byte-level
/// sources (text, grammar) need it to be at least 256. Throws moec::Error for
/// an invalid spec.
std::unique_ptr<DataSource> openDataSource(const DataSpec &spec,
                                           int64_t modelVocab, uint64_t seed,
                                           Split split = Split::Train);

/// Opens the source for any model family and objective. Throws moec::Error
/// naming the file (and line) at fault.
std::unique_ptr<DataSource> openDataSource(const DataSpec &spec,
                                           const DataTarget &target,
                                           uint64_t seed,
                                           Split split = Split::Train);

} // namespace moec

#endif // MOEC_DATA_H
