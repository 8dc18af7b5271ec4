//===- Common.cpp - row streams, batches and token text -------------------===//

#include "data/Sources.h"
#include "moec/Error.h"
#include "Philox.h"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>

namespace moec::data {

RowRandom::RowRandom(uint64_t seed, uint64_t stream, uint64_t row)
    : seed_(seed), stream_(stream), base_(row << kDrawBits) {}

double RowRandom::uniform() {
  // Past 2^24 draws the counters would run into the next row's.
  if (next_ >> kDrawBits)
    throw Error("a data row needed more than 2^24 random draws; use a "
                "shorter sequence length");
  return philoxUniform(seed_, stream_, base_ + next_++);
}

int64_t RowRandom::below(int64_t n) {
  // One draw has 24 bits; larger ranges combine two to stay near uniform.
  double u = uniform();
  if (n > (int64_t(1) << 24))
    u += uniform() * (1.0 / 16777216.0);
  return std::min<int64_t>(n - 1, static_cast<int64_t>(u * n));
}

Batch makeBatch(int64_t index, int64_t batchSize, int64_t seqLen,
                const RowFiller &fillRow) {
  if (index < 0 || batchSize < 1 || seqLen < 1)
    throw Error(fmt::format("invalid data batch request: index {}, batch size "
                            "{}, sequence length {} (expected index >= 0 and "
                            "sizes >= 1)",
                            index, batchSize, seqLen));
  constexpr uint64_t kMaxRows = uint64_t(1) << (64 - RowRandom::kDrawBits);
  if (static_cast<uint64_t>(index) >= kMaxRows / batchSize)
    throw Error(fmt::format("data batch index {} with batch size {} is past "
                            "the 2^{} rows a data stream holds",
                            index, batchSize, 64 - RowRandom::kDrawBits));
  Batch batch{Tensor(DType::I32, {batchSize, seqLen}),
              Tensor(DType::I32, {batchSize, seqLen})};
  std::vector<int32_t> row(seqLen + 1);
  for (int64_t b = 0; b < batchSize; ++b) {
    fillRow(static_cast<uint64_t>(index * batchSize + b), row.data());
    std::copy(row.begin(), row.end() - 1,
              batch.tokens.data<int32_t>() + b * seqLen);
    std::copy(row.begin() + 1, row.end(),
              batch.targets.data<int32_t>() + b * seqLen);
  }
  return batch;
}

const char *splitName(Split split) {
  return split == Split::Train ? "train" : "valid";
}

std::string ByteSource::decode(const std::vector<int32_t> &tokens) const {
  std::string text;
  for (int32_t t : tokens) {
    if (t < 0 || t > 255)
      text += fmt::format("<{}>", t);
    else if ((t >= 0x20 && t < 0x7f) || t == '\n' || t == '\t')
      text += static_cast<char>(t);
    else
      text += fmt::format("\\x{:02x}", t);
  }
  return text;
}

std::vector<int32_t> ByteSource::encode(const std::string &text) const {
  std::vector<int32_t> tokens;
  for (unsigned char c : text)
    tokens.push_back(c);
  return tokens;
}

std::string IdSource::decode(const std::vector<int32_t> &tokens) const {
  return fmt::format("{}", fmt::join(tokens, " "));
}

std::vector<int32_t> IdSource::encode(const std::string &text) const {
  const int64_t vocab = vocab_;
  std::vector<int32_t> tokens;
  size_t i = 0;
  while (true) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])))
      ++i;
    if (i == text.size())
      return tokens;
    size_t start = i;
    while (i < text.size() &&
           !std::isspace(static_cast<unsigned char>(text[i])))
      ++i;
    std::string word = text.substr(start, i - start);
    bool digits = word.size() <= 18 &&
                  std::all_of(word.begin(), word.end(),
                              [](unsigned char c) { return std::isdigit(c); });
    if (!digits || std::stoll(word) >= vocab)
      throw Error(fmt::format("cannot read '{}' as a token: this data source "
                              "takes space-separated token ids in [0, {})",
                              word, vocab));
    tokens.push_back(static_cast<int32_t>(std::stoll(word)));
  }
}

} // namespace moec::data
