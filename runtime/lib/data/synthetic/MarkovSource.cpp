//===- MarkovSource.cpp - walks on a random sparse Markov chain -----------===//
//
// Each token has `branching` distinct successors, each equally likely, so a
// model that has learned the chain reaches the optimal loss ln(branching):
// a known target for checking that training works.
//
//===----------------------------------------------------------------------===//

#include "data/Sources.h"
#include "moec/Error.h"
#include "Philox.h"

#include <cmath>
#include <fmt/format.h>

namespace moec::data {

namespace {

/// Bounds the successor table (4 bytes an entry) to 256 MB.
constexpr int64_t kMaxTableEntries = int64_t(1) << 26;

class MarkovSource : public IdSource {
public:
  MarkovSource(int64_t vocab, int64_t branching, uint64_t taskSeed,
               uint64_t seed, Split split)
      : IdSource(vocab), branching_(branching), taskSeed_(taskSeed), seed_(seed),
        split_(split), successors_(vocab * branching) {
    // Floyd's algorithm: `branching` distinct successors in exactly that
    // many draws, from the task seed alone.
    std::vector<char> taken(vocab, 0);
    uint64_t stream = streamId("data.markov.chain");
    for (int64_t t = 0; t < vocab; ++t) {
      RowRandom random(taskSeed, stream, static_cast<uint64_t>(t));
      int32_t *next = successors_.data() + t * branching;
      for (int64_t j = vocab - branching, k = 0; j < vocab; ++j, ++k) {
        int64_t pick = random.below(j + 1);
        if (taken[pick])
          pick = j;
        taken[pick] = 1;
        next[k] = static_cast<int32_t>(pick);
      }
      for (int64_t k = 0; k < branching; ++k)
        taken[next[k]] = 0;
    }
  }

  Batch batch(int64_t index, int64_t batchSize, int64_t seqLen) const override {
    uint64_t stream =
        streamId(fmt::format("data.markov.{}", splitName(split_)));
    return makeBatch(index, batchSize, seqLen, [&](uint64_t row, int32_t *out) {
      RowRandom random(seed_, stream, row);
      int64_t token = random.below(vocab_);
      for (int64_t i = 0; i <= seqLen; ++i) {
        out[i] = static_cast<int32_t>(token);
        token = successors_[token * branching_ + random.below(branching_)];
      }
    });
  }

  std::string describe() const override {
    return fmt::format("synthetic markov (vocab {}, {} successors per token, "
                       "task seed {}; optimal loss ln {} = {:.3f})",
                       vocab_, branching_, taskSeed_, branching_,
                       std::log(static_cast<double>(branching_)));
  }

private:
  int64_t branching_;
  uint64_t taskSeed_, seed_;
  Split split_;
  /// successors_[t * branching + k] is the k-th successor of token t.
  std::vector<int32_t> successors_;
};

} // namespace

std::unique_ptr<DataSource> openMarkovSource(const DataSpec &spec,
                                             int64_t vocab, uint64_t seed,
                                             Split split) {
  if (spec.branching < 1 || spec.branching > vocab)
    throw Error(fmt::format("data: markov branching {} must be between 1 and "
                            "the vocabulary size {}",
                            spec.branching, vocab));
  if (vocab > INT32_MAX || vocab * spec.branching > kMaxTableEntries)
    throw Error(fmt::format("data: a markov chain over {} tokens with {} "
                            "successors each is too large (at most 2^26 "
                            "successors in all)",
                            vocab, spec.branching));
  return std::make_unique<MarkovSource>(
      vocab, spec.branching, static_cast<uint64_t>(spec.taskSeed), seed, split);
}

} // namespace moec::data
