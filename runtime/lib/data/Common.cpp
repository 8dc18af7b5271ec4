//===- Common.cpp - row streams, batches and token text -------------------===//

#include "data/Sources.h"
#include "moec/Error.h"
#include "Philox.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
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

void checkBatchRequest(int64_t index, int64_t batchSize, int64_t seqLen) {
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
}

Batch makeBatch(int64_t index, int64_t batchSize, int64_t seqLen,
                const RowFiller &fillRow) {
  checkBatchRequest(index, batchSize, seqLen);
  Batch batch{Tensor(DType::I32, {batchSize, seqLen}),
              Tensor(DType::I32, {batchSize, seqLen}),
              {}};
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

std::string readDataFile(const std::string &path, const char *what) {
  // Non-blocking, so that a FIFO is refused as not a regular file
  // instead of waiting for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    throw Error(fmt::format("cannot open {} data '{}': {}", what,
                            path, std::strerror(errno)));
  std::string bytes, failure;
  struct stat st;
  bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (regular) {
    bytes.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        failure = n < 0 ? std::strerror(errno) : "it shrank while being read";
        break;
      }
      done += static_cast<size_t>(n);
    }
  }
  ::close(fd);
  if (!regular)
    throw Error(fmt::format("{} data '{}' is not a regular file", what, path));
  if (!failure.empty())
    throw Error(
        fmt::format("cannot read {} data '{}': {}", what, path, failure));
  if (bytes.empty())
    throw Error(fmt::format("{} data '{}' is empty", what, path));
  return bytes;
}


std::vector<Line> readDataLines(const std::string &path, const char *what) {
  std::string bytes = readDataFile(path, what);
  std::vector<Line> lines;
  size_t start = 0;
  for (int64_t number = 1; start < bytes.size(); ++number) {
    size_t end = bytes.find('\n', start);
    if (end == std::string::npos)
      end = bytes.size();
    size_t stop = end > start && bytes[end - 1] == '\r' ? end - 1 : end;
    if (stop > start)
      lines.push_back({bytes.substr(start, stop - start), number});
    start = end + 1;
  }
  if (lines.empty())
    throw Error(fmt::format("{} data '{}' has no non-empty line", what, path));
  return lines;
}

std::pair<size_t, size_t> splitItems(size_t count, double validFraction,
                                     Split split, const std::string &origin) {
  if (!(validFraction >= 0.0 && validFraction <= 1.0))
    throw Error(fmt::format("data: valid fraction {} for {} is outside [0, 1]",
                            validFraction, origin));
  auto held = static_cast<size_t>(
      std::ceil(static_cast<double>(count) * validFraction));
  held = std::min(held, count);
  std::pair<size_t, size_t> items = split == Split::Train
                                        ? std::pair{size_t(0), count - held}
                                        : std::pair{count - held, count};
  if (items.first == items.second)
    throw Error(fmt::format(
        "data {}: its {} split is empty ({} examples, valid fraction {}); "
        "use more data or a different valid fraction",
        origin, splitName(split), count, validFraction));
  return items;
}

size_t itemOfRow(uint64_t row, std::pair<size_t, size_t> items, Split split,
                 RowRandom &random) {
  size_t count = items.second - items.first;
  if (split == Split::Valid)
    return items.first + static_cast<size_t>(row % count);
  return items.first +
         static_cast<size_t>(random.below(static_cast<int64_t>(count)));
}

int64_t TokenizedSource::vocab() const { return tokenizer_.size(); }

std::string TokenizedSource::decode(const std::vector<int32_t> &tokens) const {
  return tokenizer_.decode(tokens);
}

std::vector<int32_t> TokenizedSource::encode(const std::string &text) const {
  return tokenizer_.encode(text);
}

} // namespace moec::data
