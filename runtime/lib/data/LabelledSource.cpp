//===- LabelledSource.cpp - sentence (pair) classification rows -----------===//
//
// A tab-separated file: `label<TAB>text` or `label<TAB>text<TAB>text`. Rows
// are [CLS] a [SEP] (b [SEP]), the longer text cut first when they do not
// fit; segments are 0 up to the first [SEP] and 1 after it; the target is
// the class at position 0 and -1 elsewhere.
//
//===----------------------------------------------------------------------===//

#include "data/Sources.h"
#include "Philox.h"
#include "moec/Error.h"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace moec::data {

namespace {

struct Example {
  int32_t label;
  std::vector<int32_t> a, b;
  bool pair;
};

std::vector<std::string> splitTabs(const std::string &line) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (true) {
    size_t tab = line.find('\t', start);
    fields.push_back(line.substr(start, tab - start));
    if (tab == std::string::npos)
      return fields;
    start = tab + 1;
  }
}

class LabelledSource : public TokenizedSource {
public:
  LabelledSource(const DataSpec &spec, const DataTarget &target,
                 uint64_t seed, Split split)
      : TokenizedSource(*target.tokenizer), path_(spec.paths.at(0)),
        seed_(seed), split_(split), segments_(target.segments > 0) {
    const SpecialTokens &sp = tokenizer_.specials();
    if (sp.cls < 0 || sp.sep < 0 || sp.pad < 0)
      throw Error(fmt::format(
          "data '{}': classification needs a tokenizer with pad, cls and sep "
          "tokens, and {} lacks some",
          path_, tokenizer_.describe()));
    for (const Line &line : readDataLines(path_, "labelled"))
      examples_.push_back(parse(line, spec.labels, target.classes));
    items_ = splitItems(examples_.size(), spec.validFraction, split, path_);
  }

  Batch batch(int64_t index, int64_t batchSize, int64_t seqLen) const override {
    Batch batch = makeBatch(index, batchSize, seqLen,
                            [](uint64_t, int32_t *) {});
    Tensor mask(DType::I32, {batchSize, seqLen});
    Tensor segments(DType::I32, {batchSize, seqLen});
    const SpecialTokens &sp = tokenizer_.specials();
    uint64_t stream = streamId(split_ == Split::Train ? "data.labelled.train"
                                                      : "data.labelled.valid");
    for (int64_t r = 0; r < batchSize; ++r) {
      uint64_t row = static_cast<uint64_t>(index * batchSize + r);
      RowRandom random(seed_, stream, row);
      const Example &e = examples_[itemOfRow(row, items_, split_, random)];
      int64_t room = seqLen - (e.pair ? 3 : 2);
      if (room < (e.pair ? 2 : 1))
        throw Error(fmt::format("data '{}': sequences of {} tokens cannot "
                                "hold [CLS], the text{} and [SEP]",
                                path_, seqLen, e.pair ? "s" : ""));
      // Cut the longer text one token at a time, as BERT does.
      size_t a = e.a.size(), b = e.b.size();
      while (static_cast<int64_t>(a + b) > room)
        (a >= b ? a : b) -= 1;
      std::vector<int32_t> tokens{sp.cls};
      tokens.insert(tokens.end(), e.a.begin(), e.a.begin() + a);
      tokens.push_back(sp.sep);
      size_t firstB = tokens.size();
      if (e.pair) {
        tokens.insert(tokens.end(), e.b.begin(), e.b.begin() + b);
        tokens.push_back(sp.sep);
      }
      int32_t *t = batch.tokens.data<int32_t>() + r * seqLen;
      int32_t *y = batch.targets.data<int32_t>() + r * seqLen;
      int32_t *m = mask.data<int32_t>() + r * seqLen;
      int32_t *s = segments.data<int32_t>() + r * seqLen;
      for (int64_t i = 0; i < seqLen; ++i) {
        bool real = i < static_cast<int64_t>(tokens.size());
        t[i] = real ? tokens[i] : sp.pad;
        y[i] = i == 0 ? e.label : -1;
        m[i] = real ? 1 : 0;
        s[i] = real && i >= static_cast<int64_t>(firstB) ? 1 : 0;
      }
    }
    batch.inputs["mask"] = std::move(mask);
    if (segments_)
      batch.inputs["segments"] = std::move(segments);
    return batch;
  }

  int64_t examples() const override {
    return static_cast<int64_t>(items_.second - items_.first);
  }

  std::string describe() const override {
    return fmt::format("labelled '{}' ({}; {} split: {} examples)", path_,
                       tokenizer_.describe(), splitName(split_),
                       items_.second - items_.first);
  }

private:
  Example parse(const Line &line, const std::vector<std::string> &labels,
                int64_t classes) const {
    std::vector<std::string> fields = splitTabs(line.text);
    auto fail = [&](const std::string &why) {
      throw Error(fmt::format("{}:{}: {}", path_, line.number, why));
    };
    if (fields.size() < 2 || fields.size() > 3)
      fail(fmt::format("expected 'label<TAB>text' or "
                       "'label<TAB>text<TAB>text', found {} tab-separated "
                       "field{}",
                       fields.size(), fields.size() == 1 ? "" : "s"));
    Example e;
    e.pair = fields.size() == 3;
    const std::string &label = fields[0];
    if (!labels.empty()) {
      auto it = std::find(labels.begin(), labels.end(), label);
      if (it == labels.end())
        fail(fmt::format("unknown label '{}' (the data names: {})", label,
                         fmt::join(labels, ", ")));
      e.label = static_cast<int32_t>(it - labels.begin());
    } else {
      bool digits = !label.empty() && label.size() <= 9 &&
                    std::all_of(label.begin(), label.end(), [](char c) {
                      return c >= '0' && c <= '9';
                    });
      if (!digits || std::stoll(label) >= classes)
        fail(fmt::format("the label '{}' is not a class number in [0, {}) "
                         "(name the labels with labelled(..., labels = "
                         "[...]) to use words)",
                         label, classes));
      e.label = static_cast<int32_t>(std::stoll(label));
    }
    e.a = tokenizer_.encode(fields[1]);
    if (e.pair)
      e.b = tokenizer_.encode(fields[2]);
    if (e.a.empty() || (e.pair && e.b.empty()))
      fail("a text field is empty");
    return e;
  }

  std::string path_;
  uint64_t seed_;
  Split split_;
  bool segments_;
  std::vector<Example> examples_;
  std::pair<size_t, size_t> items_;
};

} // namespace

std::unique_ptr<DataSource> openLabelledSource(const DataSpec &spec,
                                               const DataTarget &target,
                                               uint64_t seed, Split split) {
  if (spec.paths.size() != 1)
    throw Error("data: kind 'labelled' needs the path of one tab-separated "
                "file");
  if (target.classes < 2)
    throw Error("data: labelled data feeds a classify model");
  return std::make_unique<LabelledSource>(spec, target, seed, split);
}

} // namespace moec::data
