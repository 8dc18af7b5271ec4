//===- TranslateSource.cpp - translating into a made-up language ----------===//
//
// Source sentences come from a small English-like grammar:
//   sentence = NP verb NP [preposition NP],  NP = det [adjective] noun
// and their translations follow fixed rules a model has to learn: every
// word has its own target word (a lexicon drawn from the task seed), the
// verb goes last (subject-object-verb), adjectives and determiners follow
// their noun, and prepositions follow their phrase. Sentences are held out
// by a hash of their words, so validation measures generalisation to new
// combinations, not memory. Perfect translations exist, so BLEU can reach
// 100.
//
//===----------------------------------------------------------------------===//

#include "data/Sources.h"
#include "Philox.h"
#include "moec/Error.h"

#include <fmt/format.h>
#include <set>

namespace moec::data {

namespace {

const std::vector<std::string> kDeterminers = {"the", "a"};
const std::vector<std::string> kAdjectives = {
    "big", "small", "red", "old", "young", "happy", "quiet", "bright",
    "cold", "green"};
const std::vector<std::string> kNouns = {
    "cat",  "dog",  "bird", "man",  "woman", "child", "house",  "tree",
    "river", "book", "car", "ship", "king",  "horse", "garden", "city"};
const std::vector<std::string> kVerbs = {"sees",    "likes",  "finds",
                                         "takes",   "follows", "builds",
                                         "carries", "watches"};
const std::vector<std::string> kPrepositions = {"near", "under", "behind",
                                                "with"};

/// Word ids of the vocabulary: specials (0-3), the source words in the
/// order above, then their target words in the same order.
constexpr int32_t kFirstWord = 4;

struct Lexicon {
  std::vector<std::string> words;
  int32_t det, adj, noun, verb, prep, sourceCount;
  int32_t target(int32_t sourceId) const { return sourceId + sourceCount; }
};

Lexicon makeLexicon(uint64_t taskSeed) {
  Lexicon l;
  auto append = [&](const std::vector<std::string> &group) {
    auto first = static_cast<int32_t>(l.words.size()) + kFirstWord;
    l.words.insert(l.words.end(), group.begin(), group.end());
    return first;
  };
  l.det = append(kDeterminers);
  l.adj = append(kAdjectives);
  l.noun = append(kNouns);
  l.verb = append(kVerbs);
  l.prep = append(kPrepositions);
  l.sourceCount = static_cast<int32_t>(l.words.size());
  // Made-up target words of two or three consonant-vowel syllables, all
  // distinct and none an English word of the source side.
  std::set<std::string> taken(l.words.begin(), l.words.end());
  const char *consonants = "bdfgklmnprstvz", *vowels = "aeiou";
  uint64_t stream = streamId("data.translate.lexicon"), draw = 0;
  auto below = [&](int n) {
    return static_cast<int>(philoxUniform(taskSeed, stream, draw++) * n);
  };
  for (int32_t i = 0; i < l.sourceCount; ++i) {
    std::string word;
    do {
      word.clear();
      for (int s = 0, n = 2 + below(2); s < n; ++s) {
        word += consonants[below(14)];
        word += vowels[below(5)];
      }
    } while (!taken.insert(word).second);
    l.words.push_back(word);
  }
  return l;
}

class TranslateSource : public DataSource {
public:
  TranslateSource(const DataSpec &spec, uint64_t seed, Split split)
      : lexicon_(makeLexicon(spec.taskSeed)),
        tokenizer_(translateTokenizer(spec)), seed_(seed), split_(split),
        validFraction_(spec.validFraction) {
    if (!(validFraction_ > 0 && validFraction_ < 1))
      throw Error(fmt::format("data: synthetic translate holds out a share "
                              "of its sentences; the valid fraction must be "
                              "in (0, 1), not {}",
                              validFraction_));
  }

  int64_t vocab() const override { return tokenizer_->size(); }
  std::string decode(const std::vector<int32_t> &tokens) const override {
    return tokenizer_->decode(tokens);
  }
  std::vector<int32_t> encode(const std::string &text) const override {
    return tokenizer_->encode(text);
  }

  Batch batch(int64_t index, int64_t batchSize, int64_t seqLen) const override {
    if (seqLen < 2)
      throw Error("translation batches need sequences of at least 2 tokens");
    checkBatchRequest(index, batchSize, seqLen);
    std::vector<TranslationPair> rows;
    for (int64_t b = 0; b < batchSize; ++b)
      rows.push_back(example(static_cast<uint64_t>(index * batchSize + b)));
    return makeTranslationBatch(rows, seqLen, tokenizer_->specials());
  }

  std::vector<TranslationPair> pairs() const override {
    std::vector<TranslationPair> list;
    for (uint64_t row = 0; row < kValidPairs; ++row)
      list.push_back(example(row));
    return list;
  }

  std::string describe() const override {
    return fmt::format("synthetic translate ({} words; {} split: sentences "
                       "whose hash falls {} {})",
                       tokenizer_->size(), splitName(split_),
                       split_ == Split::Train ? "above" : "below",
                       validFraction_);
  }

private:
  /// Held-out sentences a validation pass (and BLEU) reads.
  static constexpr uint64_t kValidPairs = 512;

  struct Phrase {
    int32_t det, noun, adj; // adj < 0: none
  };

  /// The sentence of `row`: drawn until it lands in this split.
  TranslationPair example(uint64_t row) const {
    uint64_t stream = streamId(split_ == Split::Train
                                   ? "data.translate.train"
                                   : "data.translate.valid");
    RowRandom random(seed_, stream, row);
    for (int attempt = 0; attempt < 10000; ++attempt) {
      TranslationPair p = draw(random);
      if (heldOut(p.source) == (split_ == Split::Valid))
        return p;
    }
    throw Error("synthetic translate: no sentence of this split found");
  }

  bool heldOut(const std::vector<int32_t> &words) const {
    uint64_t h = 1469598103934665603ull; // FNV-1a
    for (int32_t w : words)
      h = (h ^ static_cast<uint64_t>(w)) * 1099511628211ull;
    h ^= h >> 29;
    return static_cast<double>(h >> 11) * 0x1.0p-53 < validFraction_;
  }

  Phrase phrase(RowRandom &random) const {
    const Lexicon &l = lexicon_;
    Phrase p;
    p.det = l.det + static_cast<int32_t>(random.below(kDeterminers.size()));
    p.adj = random.chance(0.5) ? l.adj + static_cast<int32_t>(random.below(
                                             kAdjectives.size()))
                               : -1;
    p.noun = l.noun + static_cast<int32_t>(random.below(kNouns.size()));
    return p;
  }

  TranslationPair draw(RowRandom &random) const {
    const Lexicon &l = lexicon_;
    Phrase subject = phrase(random);
    int32_t verb = l.verb + static_cast<int32_t>(random.below(kVerbs.size()));
    Phrase object = phrase(random);
    bool adjunct = random.chance(0.5);
    int32_t prep = -1;
    Phrase place{};
    if (adjunct) {
      prep = l.prep + static_cast<int32_t>(random.below(kPrepositions.size()));
      place = phrase(random);
    }
    TranslationPair p;
    auto english = [&](const Phrase &ph) {
      p.source.push_back(ph.det);
      if (ph.adj >= 0)
        p.source.push_back(ph.adj);
      p.source.push_back(ph.noun);
    };
    auto target = [&](const Phrase &ph) {
      p.target.push_back(l.target(ph.noun));
      if (ph.adj >= 0)
        p.target.push_back(l.target(ph.adj));
      p.target.push_back(l.target(ph.det));
    };
    english(subject);
    p.source.push_back(verb);
    english(object);
    if (adjunct) {
      p.source.push_back(prep);
      english(place);
    }
    target(subject);
    target(object);
    if (adjunct) {
      target(place);
      p.target.push_back(l.target(prep));
    }
    p.target.push_back(l.target(verb));
    return p;
  }

  Lexicon lexicon_;
  std::unique_ptr<Tokenizer> tokenizer_;
  uint64_t seed_;
  Split split_;
  double validFraction_;
};

} // namespace

std::unique_ptr<Tokenizer> translateTokenizer(const DataSpec &spec) {
  return wordTokenizer(makeLexicon(spec.taskSeed).words,
                       fmt::format("synthetic:translate:{}", spec.taskSeed));
}

std::unique_ptr<DataSource> openTranslateSource(const DataSpec &spec,
                                                const DataTarget &target,
                                                uint64_t seed, Split split) {
  auto source = std::make_unique<TranslateSource>(spec, seed, split);
  if (source->vocab() > target.vocab)
    throw Error(fmt::format("data: synthetic translate has {} words (with "
                            "pad, bos, eos and unk) but the model's vocab is "
                            "{}; raise vocab to at least {}",
                            source->vocab(), target.vocab, source->vocab()));
  return source;
}

} // namespace moec::data
