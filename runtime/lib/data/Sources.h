//===- Sources.h - pieces shared by the data sources -----------*- C++ -*-===//
//
// Internal to the runtime: the per-row random stream, batch assembly, token
// text conversions, and one factory per source kind.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DATA_SOURCES_H
#define MOEC_DATA_SOURCES_H

#include "moec/Data.h"
#include "moec/Tokenizer.h"

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

/// Throws for a negative index, empty shape or an index past the rows a
/// stream holds.
void checkBatchRequest(int64_t index, int64_t batchSize, int64_t seqLen);

/// Assembles batch `index` of shape [batchSize, seqLen] row by row, after
/// checking the arguments.
Batch makeBatch(int64_t index, int64_t batchSize, int64_t seqLen,
                const RowFiller &fillRow);

/// "train" or "valid".
const char *splitName(Split split);

/// A whole data file; `what` names the source kind in errors ("text",
/// "lines", ...). Throws moec::Error for a missing, unreadable or empty file.
std::string readDataFile(const std::string &path, const char *what);

/// A line of a data file and its 1-based number, for errors.
struct Line {
  std::string text;
  int64_t number;
};
/// The non-empty lines of a file, without their "\n" or "\r\n".
std::vector<Line> readDataLines(const std::string &path, const char *what);

/// The items [begin, end) of `split` among `count`: the last validFraction
/// of them are held out. Throws when the split would be empty.
std::pair<size_t, size_t> splitItems(size_t count, double validFraction,
                                     Split split, const std::string &origin);

/// The item row `row` reads: uniformly drawn while training, in order (row
/// mod count) while validating, so a pass over the held-out split sees
/// every item once.
size_t itemOfRow(uint64_t row, std::pair<size_t, size_t> items, Split split,
                 RowRandom &random);

/// A source whose text goes through a tokenizer (which it does not own).
class TokenizedSource : public DataSource {
public:
  explicit TokenizedSource(const Tokenizer &tokenizer)
      : tokenizer_(tokenizer) {}
  int64_t vocab() const override;
  std::string decode(const std::vector<int32_t> &tokens) const override;
  std::vector<int32_t> encode(const std::string &text) const override;

protected:
  const Tokenizer &tokenizer_;
};

/// Rows of a translation batch: source and target ids, without bos or eos.
/// source = ids + eos, decoder tokens = bos + target, targets = target +
/// eos; each cut to seqLen and padded (targets with -1, masks with 0).
Batch makeTranslationBatch(const std::vector<TranslationPair> &rows,
                           int64_t seqLen, const SpecialTokens &specials);

/// The word vocabulary of synthetic("translate") with this task seed.
std::unique_ptr<Tokenizer> translateTokenizer(const DataSpec &spec);

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
std::unique_ptr<DataSource> openMlmSource(const DataSpec &spec,
                                          const DataTarget &target,
                                          uint64_t seed, Split split);
std::unique_ptr<DataSource> openLabelledSource(const DataSpec &spec,
                                               const DataTarget &target,
                                               uint64_t seed, Split split);
std::unique_ptr<DataSource> openParallelSource(const DataSpec &spec,
                                               const DataTarget &target,
                                               uint64_t seed, Split split);
std::unique_ptr<DataSource> openTranslateSource(const DataSpec &spec,
                                                const DataTarget &target,
                                                uint64_t seed, Split split);

} // namespace moec::data

#endif // MOEC_DATA_SOURCES_H
