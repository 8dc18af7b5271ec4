//===- Data.h - training data sources --------------------------*- C++ -*-===//
//
// Token streams for training and evaluation: a byte-level text file, or a
// synthetic task (an English-like grammar, a sparse Markov chain, copying)
// that needs no download and whose achievable loss is known. Every batch is
// a pure function of (spec, seed, split, index, shape), so a run resumed from
// a checkpoint at step n sees exactly the batches it would have seen.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DATA_H
#define MOEC_DATA_H

#include "moec/Tensor.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace moec {

/// One batch: tokens and next-token targets, both i32 [B, S];
/// targets[b][s] is the token that follows tokens[b][s] in the stream.
struct Batch {
  Tensor tokens;
  Tensor targets;
};

/// What the .moe `data` section asks for.
struct DataSpec {
  /// "synthetic" or "text".
  std::string kind;
  /// synthetic: "grammar", "markov" or "copy".
  std::string task;
  /// text: a file read as bytes.
  std::string path;
  /// Fixes the synthetic task itself (the Markov chain), independently of
  /// the sampling seed.
  int64_t taskSeed = 0;
  /// markov: successors per token.
  int64_t branching = 2;
  /// text: the tail fraction of the file held out for validation.
  double validFraction = 0.1;
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
};

enum class Split { Train, Valid };

/// Opens the source `spec` describes. `modelVocab` is the model's vocabulary
/// size: synthetic markov and copy use it as their vocabulary, byte-level
/// sources (text, grammar) need it to be at least 256. Throws moec::Error for
/// an invalid spec.
std::unique_ptr<DataSource> openDataSource(const DataSpec &spec,
                                           int64_t modelVocab, uint64_t seed,
                                           Split split = Split::Train);

} // namespace moec

#endif // MOEC_DATA_H
