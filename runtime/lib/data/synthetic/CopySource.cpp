//===- CopySource.cpp - the copy task -------------------------------------===//
//
// Rows repeat the unit [x_1 .. x_m] SEP [x_1 .. x_m] SEP with fresh random
// x per unit and SEP = vocab - 1. The second copy is fully predictable only
// by attending back m + 1 positions, which tests that attention works: the
// optimal loss is about ln(vocab - 1) on the first half of each unit and 0
// on the rest.
//
//===----------------------------------------------------------------------===//

#include "data/Sources.h"
#include "moec/Error.h"
#include "Philox.h"

#include <algorithm>
#include <fmt/format.h>

namespace moec::data {

namespace {

class CopySource : public IdSource {
public:
  CopySource(int64_t vocab, uint64_t seed, Split split)
      : IdSource(vocab), seed_(seed), split_(split) {}

  Batch batch(int64_t index, int64_t batchSize, int64_t seqLen) const override {
    uint64_t stream = streamId(fmt::format("data.copy.{}", splitName(split_)));
    int64_t m = std::max<int64_t>(1, seqLen / 4);
    int32_t separator = static_cast<int32_t>(vocab_ - 1);
    return makeBatch(index, batchSize, seqLen, [&](uint64_t row, int32_t *out) {
      RowRandom random(seed_, stream, row);
      int64_t n = seqLen + 1;
      for (int64_t start = 0; start < n; start += 2 * (m + 1)) {
        for (int64_t i = 0; i < m && start + i < n; ++i)
          out[start + i] = static_cast<int32_t>(random.below(vocab_ - 1));
        for (int64_t i = m; i < 2 * (m + 1) && start + i < n; ++i)
          out[start + i] =
              i == m || i == 2 * m + 1 ? separator : out[start + i - (m + 1)];
      }
    });
  }

  std::string describe() const override {
    return fmt::format("synthetic copy (vocab {}, separator {})", vocab_,
                       vocab_ - 1);
  }

private:
  uint64_t seed_;
  Split split_;
};

} // namespace

std::unique_ptr<DataSource> openCopySource(int64_t vocab, uint64_t seed,
                                           Split split) {
  if (vocab < 4 || vocab > INT32_MAX)
    throw Error(fmt::format("data: the copy task needs a vocabulary of at "
                            "least 4 tokens (one is the separator), but the "
                            "model's is {}",
                            vocab));
  return std::make_unique<CopySource>(vocab, seed, split);
}

} // namespace moec::data
