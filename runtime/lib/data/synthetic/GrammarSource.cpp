//===- GrammarSource.cpp - sentences from a small English-like grammar ----===//
//
// A stochastic grammar of a few dozen words: determiners, adjectives,
// nouns in three classes (animate subjects, things, places), verbs,
// adverbs, prepositions and conjunctions, arranged in a handful of sentence
// templates. It has structure at every scale a small model can learn:
// spelling within words, "a"/"an", agreement of verbs with their subjects
// (across a relative clause too), capitals and punctuation. Its entropy is
// well under 1 nat per byte, far below the ln 256 = 5.5 of uniform bytes.
//
//===----------------------------------------------------------------------===//

#include "data/Sources.h"
#include "Philox.h"

#include <cctype>
#include <fmt/format.h>

namespace moec::data {

namespace {

struct Noun {
  const char *singular, *plural;
};
struct Verb {
  const char *third, *base; // "sees" after "the cat", "see" after "the cats".
};

// Repeated entries are the common words.
const char *const kSingularDets[] = {"the", "the",  "the",   "a",
                                     "a",   "this", "every", "my"};
const char *const kPluralDets[] = {"the",  "the", "the",   "some",
                                   "many", "two", "these", "my"};
const char *const kAdjectives[] = {"small", "big",   "red",    "old",
                                   "happy", "green", "little", "young",
                                   "angry", "dark",  "orange", "quiet"};
const Noun kAnimates[] = {{"cat", "cats"},   {"dog", "dogs"},
                          {"bird", "birds"}, {"child", "children"},
                          {"man", "men"},    {"woman", "women"},
                          {"king", "kings"}, {"owl", "owls"},
                          {"fox", "foxes"},  {"girl", "girls"}};
const Noun kThings[] = {
    {"ball", "balls"}, {"apple", "apples"}, {"egg", "eggs"}, {"book", "books"},
    {"boat", "boats"}, {"cake", "cakes"},   {"hat", "hats"}, {"key", "keys"}};
const char *const kPlaces[] = {"house", "tree",   "river", "garden",
                               "hill",  "bridge", "road",  "park"};
const Verb kTransitives[] = {{"sees", "see"},       {"likes", "like"},
                             {"follows", "follow"}, {"finds", "find"},
                             {"watches", "watch"},  {"carries", "carry"},
                             {"wants", "want"},     {"holds", "hold"}};
const Verb kIntransitives[] = {{"runs", "run"},   {"sleeps", "sleep"},
                               {"sings", "sing"}, {"waits", "wait"},
                               {"jumps", "jump"}, {"smiles", "smile"},
                               {"plays", "play"}};
const char *const kAdverbs[] = {"quickly", "slowly", "quietly",
                                "often",   "again",  "today"};
const char *const kPrepositions[] = {"near", "under", "behind",
                                     "in",   "on",    "by"};
const char *const kConjunctions[] = {"and",     "and",   "but",
                                     "because", "while", "so"};

template <typename T, size_t N>
const T &pick(RowRandom &random, const T (&items)[N]) {
  return items[random.below(static_cast<int64_t>(N))];
}

/// Builds one sentence word by word.
class Sentence {
public:
  explicit Sentence(RowRandom &random) : random_(random) {}

  std::string generate() {
    double form = random_.uniform();
    if (form < 0.40) {
      clause();
      text_ += random_.chance(0.9) ? "." : "!";
    } else if (form < 0.55) {
      clause();
      text_ += ",";
      word(pick(random_, kConjunctions));
      clause();
      text_ += ".";
    } else if (form < 0.70) {
      placePhrase();
      text_ += ",";
      clause();
      text_ += ".";
    } else if (form < 0.85) {
      // Agreement reaches across the relative clause.
      bool plural = random_.chance(0.3);
      nounPhrase(kAnimates, plural);
      word("that");
      verbPhrase(plural, /*base=*/false);
      verbPhrase(plural, /*base=*/false);
      text_ += ".";
    } else {
      bool plural = random_.chance(0.3);
      word(plural ? "do" : "does");
      nounPhrase(kAnimates, plural);
      verbPhrase(plural, /*base=*/true);
      text_ += "?";
    }
    text_[0] = static_cast<char>(std::toupper(text_[0]));
    return text_;
  }

private:
  void word(const std::string &w) {
    if (!text_.empty())
      text_ += ' ';
    // "a" or "an" waits for the word after it.
    if (pendingArticle_) {
      text_ +=
          std::string("aeiou").find(w[0]) != std::string::npos ? "an " : "a ";
      pendingArticle_ = false;
    }
    text_ += w;
  }

  void determiner(bool plural) {
    const char *det =
        plural ? pick(random_, kPluralDets) : pick(random_, kSingularDets);
    if (std::string(det) == "a")
      pendingArticle_ = true;
    else
      word(det);
  }

  void adjectives() {
    if (random_.chance(0.4)) {
      word(pick(random_, kAdjectives));
      if (random_.chance(0.15))
        word(pick(random_, kAdjectives));
    }
  }

  template <size_t N> void nounPhrase(const Noun (&nouns)[N], bool plural) {
    determiner(plural);
    adjectives();
    const Noun &noun = pick(random_, nouns);
    word(plural ? noun.plural : noun.singular);
  }

  void placePhrase() {
    word(pick(random_, kPrepositions));
    determiner(/*plural=*/false);
    adjectives();
    word(pick(random_, kPlaces));
  }

  void verbPhrase(bool plural, bool base) {
    bool useBase = plural || base;
    if (random_.chance(0.55)) {
      const Verb &verb = pick(random_, kTransitives);
      word(useBase ? verb.base : verb.third);
      if (random_.chance(0.6))
        nounPhrase(kThings, random_.chance(0.3));
      else
        nounPhrase(kAnimates, random_.chance(0.3));
    } else {
      const Verb &verb = pick(random_, kIntransitives);
      word(useBase ? verb.base : verb.third);
      if (random_.chance(0.4))
        word(pick(random_, kAdverbs));
    }
  }

  void clause() {
    bool plural = random_.chance(0.3);
    nounPhrase(kAnimates, plural);
    verbPhrase(plural, /*base=*/false);
    if (random_.chance(0.3))
      placePhrase();
  }

  RowRandom &random_;
  std::string text_;
  bool pendingArticle_ = false;
};

class GrammarSource : public ByteSource {
public:
  GrammarSource(uint64_t seed, Split split) : seed_(seed), split_(split) {}

  Batch batch(int64_t index, int64_t batchSize, int64_t seqLen) const override {
    uint64_t stream =
        streamId(fmt::format("data.grammar.{}", splitName(split_)));
    return makeBatch(index, batchSize, seqLen, [&](uint64_t row, int32_t *out) {
      RowRandom random(seed_, stream, row);
      // Start inside the first sentence so rows are not all aligned to
      // sentence starts.
      std::string text = Sentence(random).generate();
      text.erase(0, random.below(static_cast<int64_t>(text.size())));
      while (static_cast<int64_t>(text.size()) < seqLen + 1)
        text += " " + Sentence(random).generate();
      for (int64_t i = 0; i <= seqLen; ++i)
        out[i] = static_cast<unsigned char>(text[i]);
    });
  }

  std::string describe() const override {
    return "synthetic grammar (byte-level, vocab 256)";
  }

private:
  uint64_t seed_;
  Split split_;
};

} // namespace

std::unique_ptr<DataSource> openGrammarSource(uint64_t seed, Split split) {
  return std::make_unique<GrammarSource>(seed, split);
}

} // namespace moec::data
