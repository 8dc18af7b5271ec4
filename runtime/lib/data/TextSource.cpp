//===- TextSource.cpp - byte-level windows of a text file -----------------===//
//
// The file is split once: the first (1 - validFraction) of its bytes train,
// the rest validate, so no validation window ever overlaps a training one.
// Each row is a window at a uniformly drawn offset within its split.
//
//===----------------------------------------------------------------------===//

#include "data/Sources.h"
#include "moec/Error.h"
#include "Philox.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace moec::data {

namespace {

class TextSource : public ByteSource {
public:
  TextSource(const DataSpec &spec, uint64_t seed, Split split)
      : path_(spec.paths.at(0)), bytes_(readDataFile(spec.paths.at(0), "text")), seed_(seed),
        split_(split) {
    auto trainBytes = static_cast<size_t>(std::floor(
        static_cast<double>(bytes_.size()) * (1.0 - spec.validFraction)));
    trainBytes = std::min(trainBytes, bytes_.size());
    begin_ = split == Split::Train ? 0 : trainBytes;
    end_ = split == Split::Train ? trainBytes : bytes_.size();
  }

  Batch batch(int64_t index, int64_t batchSize, int64_t seqLen) const override {
    size_t available = end_ - begin_;
    if (seqLen >= 1 && available < static_cast<uint64_t>(seqLen) + 1)
      throw Error(fmt::format(
          "text data '{}': the {} split holds {} of the file's {} bytes, but a "
          "sequence of length {} needs {}; use a longer file, a shorter "
          "sequence or a different valid fraction",
          path_, splitName(split_), available, bytes_.size(), seqLen,
          seqLen + 1));
    uint64_t stream = streamId(split_ == Split::Train ? "data.text.train"
                                                      : "data.text.valid");
    return makeBatch(index, batchSize, seqLen, [&](uint64_t row, int32_t *out) {
      // RowRandom combines draws for ranges past 2^24, so every start of a
      // large file is reachable.
      uint64_t starts = available - static_cast<uint64_t>(seqLen);
      RowRandom random(seed_, stream, row);
      auto offset = static_cast<uint64_t>(
          random.below(static_cast<int64_t>(starts)));
      const char *window = bytes_.data() + begin_ + offset;
      for (int64_t i = 0; i <= seqLen; ++i)
        out[i] = static_cast<unsigned char>(window[i]);
    });
  }

  std::string describe() const override {
    return fmt::format("text '{}' (byte-level, vocab 256; {} split: bytes "
                       "[{}, {}) of {})",
                       path_, splitName(split_), begin_, end_, bytes_.size());
  }

private:
  std::string path_;
  std::string bytes_;
  uint64_t seed_;
  Split split_;
  size_t begin_ = 0, end_ = 0;
};

} // namespace

std::unique_ptr<DataSource> openTextSource(const DataSpec &spec, uint64_t seed,
                                           Split split) {
  if (spec.paths.size() != 1)
    throw Error("data: kind 'text' needs the path of one text file");
  if (!(spec.validFraction >= 0.0 && spec.validFraction <= 1.0))
    throw Error(fmt::format("data: valid fraction {} for text '{}' is outside "
                            "[0, 1]",
                            spec.validFraction, spec.paths[0]));
  return std::make_unique<TextSource>(spec, seed, split);
}

} // namespace moec::data
