//===- MlmSource.cpp - masked language modelling rows ---------------------===//
//
// Each row is [CLS] tokens [SEP], padded: one line of a lines(...) file, or
// a window of a tokenized text(...) file. Of the ordinary tokens a share is
// predicted (targets hold their ids, -1 elsewhere) and corrupted the way
// BERT does: most become [MASK], some a random ordinary token, the rest
// stay as they are.
//
//===----------------------------------------------------------------------===//

#include "data/Sources.h"
#include "Philox.h"
#include "moec/Error.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace moec::data {

namespace {

class MlmSource : public TokenizedSource {
public:
  MlmSource(const DataSpec &spec, const DataTarget &target, uint64_t seed,
            Split split)
      : TokenizedSource(*target.tokenizer), path_(spec.paths.at(0)),
        lines_(spec.kind == "lines"), mlm_(target.mlm),
        segments_(target.segments > 0), seed_(seed), split_(split) {
    const SpecialTokens &sp = tokenizer_.specials();
    if (sp.mask < 0 || sp.cls < 0 || sp.sep < 0 || sp.pad < 0)
      throw Error(fmt::format(
          "data '{}': masked language modelling needs a tokenizer with pad, "
          "mask, cls and sep tokens, and {} lacks some (train SentencePiece "
          "models with `moec tokenizer train`; byte models need vocab >= 262)",
          path_, tokenizer_.describe()));
    for (int32_t id = 0; id < tokenizer_.size(); ++id)
      if (tokenizer_.ordinary(id))
        ordinaryIds_.push_back(id);
    if (lines_) {
      for (const Line &line : readDataLines(path_, "lines"))
        rows_.push_back(tokenizer_.encode(line.text));
      items_ = splitItems(rows_.size(), spec.validFraction, split, path_);
    } else {
      stream_ = tokenizer_.encode(readDataFile(path_, "text"));
      items_ = splitItems(stream_.size(), spec.validFraction, split, path_);
    }
  }

  Batch batch(int64_t index, int64_t batchSize, int64_t seqLen) const override {
    if (seqLen < 3)
      throw Error(fmt::format("data '{}': masked language modelling needs "
                              "sequences of at least 3 tokens ([CLS], one "
                              "token, [SEP]), not {}",
                              path_, seqLen));
    Batch batch = makeBatch(index, batchSize, seqLen,
                            [](uint64_t, int32_t *) {});
    Tensor mask(DType::I32, {batchSize, seqLen});
    uint64_t stream = streamId(split_ == Split::Train ? "data.mlm.train"
                                                      : "data.mlm.valid");
    for (int64_t b = 0; b < batchSize; ++b) {
      uint64_t row = static_cast<uint64_t>(index * batchSize + b);
      RowRandom random(seed_, stream, row);
      std::vector<int32_t> body = rowTokens(row, seqLen - 2, random);
      int32_t *tokens = batch.tokens.data<int32_t>() + b * seqLen;
      int32_t *targets = batch.targets.data<int32_t>() + b * seqLen;
      int32_t *real = mask.data<int32_t>() + b * seqLen;
      const SpecialTokens &sp = tokenizer_.specials();
      std::fill(tokens, tokens + seqLen, sp.pad);
      std::fill(targets, targets + seqLen, -1);
      std::fill(real, real + seqLen, 0);
      tokens[0] = sp.cls;
      std::copy(body.begin(), body.end(), tokens + 1);
      tokens[body.size() + 1] = sp.sep;
      std::fill(real, real + body.size() + 2, 1);
      corrupt(tokens, targets, static_cast<int64_t>(body.size()) + 2, random);
    }
    batch.inputs["mask"] = std::move(mask);
    if (segments_) {
      Tensor zeros(DType::I32, {batchSize, seqLen});
      std::fill(zeros.data<int32_t>(), zeros.data<int32_t>() + zeros.numel(),
                0);
      batch.inputs["segments"] = std::move(zeros);
    }
    return batch;
  }

  int64_t examples() const override {
    return lines_ ? static_cast<int64_t>(items_.second - items_.first) : 0;
  }

  std::string describe() const override {
    return fmt::format("{} '{}' for masked language modelling ({}; {} split: "
                       "{} {})",
                       lines_ ? "lines" : "text", path_,
                       tokenizer_.describe(), splitName(split_),
                       items_.second - items_.first,
                       lines_ ? "lines" : "tokens");
  }

private:
  /// Up to `width` tokens: a line (cut to fit), or a window of the stream.
  std::vector<int32_t> rowTokens(uint64_t row, int64_t width,
                                 RowRandom &random) const {
    if (lines_) {
      const std::vector<int32_t> &line =
          rows_[itemOfRow(row, items_, split_, random)];
      return {line.begin(),
              line.begin() + std::min<int64_t>(width, line.size())};
    }
    auto available = static_cast<int64_t>(items_.second - items_.first);
    int64_t take = std::min(width, available);
    int64_t starts = available - take + 1;
    int64_t start = split_ == Split::Train
                        ? random.below(starts)
                        : static_cast<int64_t>((row * take) % starts);
    auto first = stream_.begin() + items_.first + start;
    return {first, first + take};
  }

  /// Picks the predicted positions among the ordinary tokens of
  /// tokens[0, length) and corrupts them.
  void corrupt(int32_t *tokens, int32_t *targets, int64_t length,
               RowRandom &random) const {
    std::vector<int64_t> candidates;
    for (int64_t i = 0; i < length; ++i)
      if (tokenizer_.ordinary(tokens[i]))
        candidates.push_back(i);
    if (candidates.empty())
      return;
    auto wanted = static_cast<int64_t>(std::lround(
        mlm_.rate * static_cast<double>(candidates.size())));
    int64_t count = std::clamp<int64_t>(wanted, 1, mlm_.maxPredictions);
    count = std::min<int64_t>(count, candidates.size());
    for (int64_t i = 0; i < count; ++i) {
      // A partial Fisher-Yates shuffle: the first `count` are the sample.
      int64_t j = i + random.below(static_cast<int64_t>(candidates.size()) - i);
      std::swap(candidates[i], candidates[j]);
      int64_t at = candidates[i];
      targets[at] = tokens[at];
      double u = random.uniform();
      if (u < mlm_.mask)
        tokens[at] = tokenizer_.specials().mask;
      else if (u < mlm_.mask + mlm_.random && !ordinaryIds_.empty())
        tokens[at] = ordinaryIds_[random.below(
            static_cast<int64_t>(ordinaryIds_.size()))];
    }
  }

  std::string path_;
  bool lines_;
  MlmConfig mlm_;
  bool segments_;
  uint64_t seed_;
  Split split_;
  std::vector<std::vector<int32_t>> rows_;
  std::vector<int32_t> stream_;
  std::vector<int32_t> ordinaryIds_;
  std::pair<size_t, size_t> items_;
};

} // namespace

std::unique_ptr<DataSource> openMlmSource(const DataSpec &spec,
                                          const DataTarget &target,
                                          uint64_t seed, Split split) {
  if (spec.paths.size() != 1)
    throw Error(fmt::format("data: kind '{}' needs the path of one file",
                            spec.kind));
  return std::make_unique<MlmSource>(spec, target, seed, split);
}

} // namespace moec::data
