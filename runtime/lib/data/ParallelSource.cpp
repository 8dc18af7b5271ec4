//===- ParallelSource.cpp - translation pairs from files ------------------===//
//
// One tab-separated file (`source<TAB>target` per line) or two line-aligned
// files. The last valid_fraction of the pairs are held out.
//
//===----------------------------------------------------------------------===//

#include "data/Sources.h"
#include "Philox.h"
#include "moec/Error.h"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace moec::data {

Batch makeTranslationBatch(const std::vector<TranslationPair> &rows,
                           int64_t seqLen, const SpecialTokens &sp) {
  auto batchSize = static_cast<int64_t>(rows.size());
  Batch batch{Tensor(DType::I32, {batchSize, seqLen}),
              Tensor(DType::I32, {batchSize, seqLen}),
              {}};
  Tensor source(DType::I32, {batchSize, seqLen});
  Tensor sourceMask(DType::I32, {batchSize, seqLen});
  Tensor mask(DType::I32, {batchSize, seqLen});
  for (int64_t r = 0; r < batchSize; ++r) {
    const TranslationPair &p = rows[r];
    // Each side keeps room for its eos (or bos).
    auto srcLen = std::min<int64_t>(p.source.size(), seqLen - 1);
    auto tgtLen = std::min<int64_t>(p.target.size(), seqLen - 1);
    int32_t *s = source.data<int32_t>() + r * seqLen;
    int32_t *sm = sourceMask.data<int32_t>() + r * seqLen;
    int32_t *t = batch.tokens.data<int32_t>() + r * seqLen;
    int32_t *y = batch.targets.data<int32_t>() + r * seqLen;
    int32_t *m = mask.data<int32_t>() + r * seqLen;
    for (int64_t i = 0; i < seqLen; ++i) {
      s[i] = i < srcLen ? p.source[i] : i == srcLen ? sp.eos : sp.pad;
      sm[i] = i <= srcLen ? 1 : 0;
      t[i] = i == 0 ? sp.bos : i <= tgtLen ? p.target[i - 1] : sp.pad;
      y[i] = i < tgtLen ? p.target[i] : i == tgtLen ? sp.eos : -1;
      m[i] = i <= tgtLen ? 1 : 0;
    }
  }
  batch.inputs["source"] = std::move(source);
  batch.inputs["source_mask"] = std::move(sourceMask);
  batch.inputs["mask"] = std::move(mask);
  return batch;
}

namespace {

class ParallelSource : public TokenizedSource {
public:
  ParallelSource(const DataSpec &spec, const DataTarget &target, uint64_t seed,
                 Split split)
      : TokenizedSource(*target.tokenizer), seed_(seed), split_(split) {
    const SpecialTokens &sp = tokenizer_.specials();
    if (sp.bos < 0 || sp.eos < 0 || sp.pad < 0)
      throw Error(fmt::format("data '{}': translation needs a tokenizer with "
                              "pad, bos and eos tokens, and {} lacks some",
                              spec.paths.at(0), tokenizer_.describe()));
    origin_ = fmt::format("{}", fmt::join(spec.paths, " + "));
    if (spec.paths.size() == 1) {
      for (const Line &line : readDataLines(spec.paths[0], "parallel")) {
        size_t tab = line.text.find('\t');
        if (tab == std::string::npos ||
            line.text.find('\t', tab + 1) != std::string::npos)
          throw Error(fmt::format("{}:{}: expected 'source<TAB>target'",
                                  spec.paths[0], line.number));
        add(line.text.substr(0, tab), line.text.substr(tab + 1),
            spec.paths[0], line.number);
      }
    } else {
      std::vector<Line> sources = readDataLines(spec.paths[0], "parallel");
      std::vector<Line> targets = readDataLines(spec.paths[1], "parallel");
      if (sources.size() != targets.size())
        throw Error(fmt::format("data: '{}' has {} non-empty lines but '{}' "
                                "has {}; parallel files must be line-aligned",
                                spec.paths[0], sources.size(), spec.paths[1],
                                targets.size()));
      for (size_t i = 0; i < sources.size(); ++i) {
        if (sources[i].number != targets[i].number)
          throw Error(fmt::format("{}:{}: the line is empty on one side only "
                                  "(parallel files must be line-aligned)",
                                  spec.paths[0],
                                  std::min(sources[i].number,
                                           targets[i].number)));
        add(sources[i].text, targets[i].text, spec.paths[0],
            sources[i].number);
      }
    }
    items_ = splitItems(pairs_.size(), spec.validFraction, split, origin_);
  }

  Batch batch(int64_t index, int64_t batchSize, int64_t seqLen) const override {
    if (seqLen < 2)
      throw Error("translation batches need sequences of at least 2 tokens");
    checkBatchRequest(index, batchSize, seqLen);
    uint64_t stream = streamId(split_ == Split::Train ? "data.parallel.train"
                                                      : "data.parallel.valid");
    std::vector<TranslationPair> rows;
    for (int64_t b = 0; b < batchSize; ++b) {
      uint64_t row = static_cast<uint64_t>(index * batchSize + b);
      RowRandom random(seed_, stream, row);
      rows.push_back(pairs_[itemOfRow(row, items_, split_, random)]);
    }
    return makeTranslationBatch(rows, seqLen, tokenizer_.specials());
  }

  std::vector<TranslationPair> pairs() const override {
    return {pairs_.begin() + items_.first, pairs_.begin() + items_.second};
  }

  int64_t examples() const override {
    return static_cast<int64_t>(items_.second - items_.first);
  }

  std::string describe() const override {
    return fmt::format("parallel '{}' ({}; {} split: {} pairs)", origin_,
                       tokenizer_.describe(), splitName(split_),
                       items_.second - items_.first);
  }

private:
  void add(const std::string &source, const std::string &target,
           const std::string &path, int64_t number) {
    TranslationPair p{tokenizer_.encode(source), tokenizer_.encode(target)};
    if (p.source.empty() || p.target.empty())
      throw Error(fmt::format("{}:{}: the source or the target is empty",
                              path, number));
    pairs_.push_back(std::move(p));
  }

  uint64_t seed_;
  Split split_;
  std::string origin_;
  std::vector<TranslationPair> pairs_;
  std::pair<size_t, size_t> items_;
};

} // namespace

std::unique_ptr<DataSource> openParallelSource(const DataSpec &spec,
                                               const DataTarget &target,
                                               uint64_t seed, Split split) {
  if (spec.paths.empty() || spec.paths.size() > 2)
    throw Error("data: kind 'parallel' needs one tab-separated file or two "
                "line-aligned files");
  return std::make_unique<ParallelSource>(spec, target, seed, split);
}

} // namespace moec::data
