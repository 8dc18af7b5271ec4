//===- TranslationTest.cpp - BLEU and beam search -------------------------===//

#include "BeamSearch.h"
#include "moec/Bleu.h"
#include "moec/Error.h"

#include <cmath>
#include <gtest/gtest.h>
#include <map>

using namespace moec;

namespace {

TEST(Bleu, Tokenizes13aAsMteval) {
  EXPECT_EQ(tokenize13a("Hello, world! It's 3.5-4 km."),
            "Hello , world ! It's 3.5 - 4 km .");
  EXPECT_EQ(tokenize13a("&quot;Quoted&quot; (a/b) 1,000 x,y"),
            "\" Quoted \" ( a / b ) 1,000 x , y");
  EXPECT_EQ(tokenize13a("  spaced   out  "), "spaced out");
}

TEST(Bleu, HandComputedSentence) {
  // Precisions 5/6, 3/5, 1/4 and 0/3, the last smoothed to 1/(2*3); equal
  // lengths: BLEU = (5/6 * 3/5 * 1/4 * 1/6)^(1/4).
  BleuScore b =
      corpusBleu({"the cat sat on the mat"}, {"the cat is on the mat"});
  EXPECT_NEAR(b.precisions[0], 100.0 * 5 / 6, 1e-9);
  EXPECT_NEAR(b.precisions[1], 60.0, 1e-9);
  EXPECT_NEAR(b.precisions[2], 25.0, 1e-9);
  EXPECT_NEAR(b.precisions[3], 100.0 / 6, 1e-9);
  EXPECT_DOUBLE_EQ(b.brevityPenalty, 1.0);
  EXPECT_NEAR(b.score, 100 * std::pow(5.0 / 6 * 0.6 * 0.25 / 6, 0.25), 1e-9);
  EXPECT_NEAR(b.score, 37.99, 0.01);
}

TEST(Bleu, CountsTheCorpusNotTheSentences) {
  // Sentence 1 matches fully (4 words); sentence 2 is short and shares one
  // unigram: n-gram counts and lengths are summed before any ratio.
  BleuScore b = corpusBleu({"a b c d", "x y"}, {"a b c d", "x z w"});
  EXPECT_EQ(b.hypothesisLength, 6);
  EXPECT_EQ(b.referenceLength, 7);
  EXPECT_NEAR(b.precisions[0], 100.0 * 5 / 6, 1e-9);
  EXPECT_NEAR(b.precisions[1], 100.0 * 3 / 4, 1e-9);
  EXPECT_NEAR(b.precisions[2], 100.0 * 2 / 2, 1e-9);
  EXPECT_NEAR(b.precisions[3], 100.0 * 1 / 1, 1e-9);
  double bp = std::exp(1.0 - 7.0 / 6.0);
  EXPECT_NEAR(b.brevityPenalty, bp, 1e-12);
  EXPECT_NEAR(b.score, 100 * bp * std::pow(5.0 / 6 * 0.75, 0.25), 1e-9);
}

TEST(Bleu, PerfectIsHundredAndNothingIsZero) {
  EXPECT_NEAR(corpusBleu({"one two three four five"},
                         {"one two three four five"})
                  .score,
              100.0, 1e-9);
  EXPECT_EQ(corpusBleu({"p q r s t"}, {"a b c d e"}).score, 0.0);
  // Too short for 3-grams: no 3-gram or 4-gram can be counted.
  EXPECT_EQ(corpusBleu({"the cat"}, {"the cat sat on the mat"}).score, 0.0);
  EXPECT_THROW(corpusBleu({"a"}, {}), Error);
}

// A fake decoder over ids 0 pad, 1 bos, 2 eos, 3 "A", 4 "B" whose next-token
// distribution depends on the prefix, which it tracks per row through the
// parents it is given (as the session's caches are).
struct FakeDecoder {
  std::map<std::vector<int32_t>, std::vector<double>> next = {
      {{}, {0, 0, 0.0, 0.6, 0.4}},
      {{3}, {0, 0, 0.30, 0.36, 0.34}},
      {{4}, {0, 0, 0.95, 0.03, 0.02}},
  };
  std::vector<std::vector<int32_t>> prefixes;
  int calls = 0;

  std::vector<std::vector<double>>
  operator()(const std::vector<int32_t> &last,
             const std::vector<int64_t> &parents) {
    std::vector<std::vector<int32_t>> moved(last.size());
    for (size_t r = 0; r < last.size(); ++r) {
      if (calls > 0) {
        moved[r] = prefixes[parents[r]];
        moved[r].push_back(last[r]);
      }
    }
    prefixes = moved;
    ++calls;
    std::vector<std::vector<double>> logits;
    for (const std::vector<int32_t> &p : prefixes) {
      auto it = next.find(p);
      std::vector<double> probs =
          it != next.end() ? it->second : std::vector<double>{0, 0, 1, 0, 0};
      std::vector<double> row;
      for (double q : probs)
        row.push_back(q > 0 ? std::log(q) : -INFINITY);
      logits.push_back(row);
    }
    return logits;
  }
};

/// The fake decoder's specials, with no length penalty.
detail::BeamSettings fakeSettings(int64_t beam) {
  detail::BeamSettings s;
  s.beam = beam;
  s.bos = 1;
  s.eos = 2;
  s.banned = {0, 1};
  s.lengthPenalty = 0;
  return s;
}

TEST(BeamSearch, FindsWhatGreedySearchMisses) {
  // Greedy: A (0.6), then A (0.36), then eos: p = 0.216.
  detail::BeamSettings s = fakeSettings(1);
  FakeDecoder greedy;
  EXPECT_EQ(detail::beamSearch({5}, s, std::ref(greedy))[0],
            (std::vector<int32_t>{3, 3}));
  // Beam 2 keeps B: B eos has p = 0.38.
  s.beam = 2;
  FakeDecoder beam;
  EXPECT_EQ(detail::beamSearch({5}, s, std::ref(beam))[0],
            (std::vector<int32_t>{4}));
}

TEST(BeamSearch, SearchesSentencesSideBySideAndStopsAtTheirLimits) {
  detail::BeamSettings s = fakeSettings(2);
  FakeDecoder decoder;
  // Sentence 0 may not emit a token before its eos; sentence 1 may.
  std::vector<std::vector<int32_t>> out =
      detail::beamSearch({0, 5}, s, std::ref(decoder));
  EXPECT_TRUE(out[0].empty());
  EXPECT_EQ(out[1], (std::vector<int32_t>{4}));
  // With a length limit of 1, A A is out of reach: A eos (0.18) against
  // B eos (0.38).
  FakeDecoder limited;
  EXPECT_EQ(detail::beamSearch({1}, s, std::ref(limited))[0],
            (std::vector<int32_t>{4}));
}

TEST(BeamSearch, TheLengthPenaltyFavoursLongerOutputs) {
  // Two finished candidates: [B] with p = 0.38 (length 2 with eos) and
  // [A, A] with p = 0.216 (length 3). GNMT's penalty with a large alpha
  // divides the (negative) log-probabilities by ((5 + len) / 6)^alpha.
  detail::BeamSettings s = fakeSettings(3);
  FakeDecoder plain;
  EXPECT_EQ(detail::beamSearch({5}, s, std::ref(plain))[0],
            (std::vector<int32_t>{4}));
  s.lengthPenalty = 10;
  double shortScore = std::log(0.38) / std::pow(7.0 / 6, 10);
  double longScore = std::log(0.6 * 0.36) / std::pow(8.0 / 6, 10);
  ASSERT_GT(longScore, shortScore);
  FakeDecoder penalised;
  EXPECT_EQ(detail::beamSearch({5}, s, std::ref(penalised))[0],
            (std::vector<int32_t>{3, 3}));
}

} // namespace
