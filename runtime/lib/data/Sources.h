//===- Sources.h - pieces shared by the data sources -----------*- C++ -*-===//
//
// Internal to the runtime: the per-row random stream, batch assembly, token
// text conversions, and one factory per source kind.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DATA_SOURCES_H
#define MOEC_DATA_SOURCES_H

#include "moec/Data.h"

#include <functional>

namespace moec::data {

/// The random draws of one batch row: draw k of row r is
/// philoxUniform(seed, stream, r * 2^24 + k). Rows thus never share
/// counters, so each row is independent of the batch size it lands in and
/// of every other row.
class RowRandom {
public:
  static constexpr int kDrawBits = 24;

  RowRandom(uint64_t seed, uint64_t stream, uint64_t row);
  /// The next uniform in [0, 1).
  double uniform();
  /// The next integer uniform in [0, n), n >= 1.
  int64_t below(int64_t n);
  /// True with probability p.
  bool chance(double p) { return uniform() < p; }

private:
  uint64_t seed_, stream_, base_;
  uint64_t next_ = 0;
};

/// Writes the seqLen + 1 tokens of global row `row` (= index * B + b) to
/// `out`; the tokens of the row are out[0, seqLen), the targets out[1, ..].
using RowFiller = std::function<void(uint64_t row, int32_t *out)>;

/// Assembles batch `index` of shape [batchSize, seqLen] row by row, after
/// checking the arguments.
Batch makeBatch(int64_t index, int64_t batchSize, int64_t seqLen,
                const RowFiller &fillRow);

/// "train" or "valid".
const char *splitName(Split split);

/// A source whose tokens are bytes (vocab 256): prompts are text.
class ByteSource : public DataSource {
public:
  int64_t vocab() const override { return 256; }
  std::string decode(const std::vector<int32_t> &tokens) const override;
  std::vector<int32_t> encode(const std::string &text) const override;
};

/// A source whose tokens are ids in [0, vocab): prompts are lists of ids.
class IdSource : public DataSource {
public:
  explicit IdSource(int64_t vocab) : vocab_(vocab) {}
  int64_t vocab() const override { return vocab_; }
  std::string decode(const std::vector<int32_t> &tokens) const override;
  std::vector<int32_t> encode(const std::string &text) const override;

protected:
  int64_t vocab_;
};

std::unique_ptr<DataSource> openTextSource(const DataSpec &spec, uint64_t seed,
                                           Split split);
std::unique_ptr<DataSource> openGrammarSource(uint64_t seed, Split split);
std::unique_ptr<DataSource> openMarkovSource(const DataSpec &spec,
                                             int64_t vocab, uint64_t seed,
                                             Split split);
std::unique_ptr<DataSource> openCopySource(int64_t vocab, uint64_t seed,
                                           Split split);

} // namespace moec::data

#endif // MOEC_DATA_SOURCES_H
