//===- TaskDataTest.cpp - data sources of encoders and translation --------===//
//
// MLM lines, labelled examples, parallel text and the synthetic translation
// task: the layout of their batches, their corruption rates, their
// held-out splits, and errors that name the file and line.
//
//===----------------------------------------------------------------------===//

#include "ErrorOf.h"
#include "moec/Data.h"
#include "moec/Error.h"
#include "moec/Tokenizer.h"

#include <filesystem>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <set>
#include <unistd.h>

using namespace moec;
using moec::test::errorOf;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

class TempFile {
public:
  explicit TempFile(const std::string &contents) {
    static int counter = 0;
    path = (fs::temp_directory_path() /
            ("moec-task-" + std::to_string(::getpid()) + "-" +
             std::to_string(counter++) + ".txt"))
               .string();
    std::ofstream(path) << contents;
  }
  ~TempFile() { fs::remove(path); }
  std::string path;
};

std::vector<int32_t> row(const Tensor &t, int64_t b) {
  const int32_t *p = t.data<int32_t>() + b * t.shape()[1];
  return std::vector<int32_t>(p, p + t.shape()[1]);
}

std::vector<int32_t> bytes(const std::string &s) {
  return std::vector<int32_t>(s.begin(), s.end());
}

DataSpec fileSpec(const std::string &kind, std::vector<std::string> paths) {
  DataSpec spec;
  spec.kind = kind;
  spec.paths = std::move(paths);
  spec.validFraction = 0.25;
  return spec;
}

DataTarget targetFor(const std::string &kind, const std::string &objective,
                     const Tokenizer &tokenizer) {
  DataTarget t;
  t.vocab = 262;
  t.kind = kind;
  t.objective = objective;
  t.tokenizer = &tokenizer;
  return t;
}

// Byte ids; 256-261 are pad, bos, eos, mask, cls, sep.
constexpr int32_t kPad = 256, kBos = 257, kEos = 258, kMask = 259, kCls = 260,
                  kSep = 261;

TEST(ParallelData, LaysOutSourceDecoderInputsAndTargets) {
  TempFile file("ab\txyz\ncd\tuv\nef\tw\ngh\tst\n");
  auto tokenizer = byteTokenizer(262);
  auto target = targetFor("encoder_decoder", "translate", *tokenizer);
  // Valid rows read the held-out pairs in order: here the last one.
  auto valid = openDataSource(fileSpec("parallel", {file.path}), target, 7,
                              Split::Valid);
  Batch batch = valid->batch(0, 1, 6);
  EXPECT_EQ(row(batch.inputs.at("source"), 0),
            (std::vector<int32_t>{'g', 'h', kEos, kPad, kPad, kPad}));
  EXPECT_EQ(row(batch.inputs.at("source_mask"), 0),
            (std::vector<int32_t>{1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(row(batch.tokens, 0),
            (std::vector<int32_t>{kBos, 's', 't', kPad, kPad, kPad}));
  EXPECT_EQ(row(batch.targets, 0),
            (std::vector<int32_t>{'s', 't', kEos, -1, -1, -1}));
  EXPECT_EQ(row(batch.inputs.at("mask"), 0),
            (std::vector<int32_t>{1, 1, 1, 0, 0, 0}));
  ASSERT_EQ(valid->pairs().size(), 1u);
  EXPECT_EQ(valid->pairs()[0].source, bytes("gh"));
  // Training rows never see the held-out pair.
  auto train = openDataSource(fileSpec("parallel", {file.path}), target, 7,
                              Split::Train);
  for (int64_t i = 0; i < 20; ++i)
    EXPECT_NE(row(train->batch(i, 1, 6).inputs.at("source"), 0)[0], 'g');
}

TEST(ParallelData, CutsLongPairsKeepingEos) {
  TempFile file("abcdefgh\tijklmnop\nx\ty\n");
  auto tokenizer = byteTokenizer(262);
  auto target = targetFor("encoder_decoder", "translate", *tokenizer);
  DataSpec spec = fileSpec("parallel", {file.path});
  spec.validFraction = 0.5;
  auto train = openDataSource(spec, target, 1, Split::Train);
  Batch batch = train->batch(0, 1, 4);
  EXPECT_EQ(row(batch.inputs.at("source"), 0),
            (std::vector<int32_t>{'a', 'b', 'c', kEos}));
  EXPECT_EQ(row(batch.targets, 0), (std::vector<int32_t>{'i', 'j', 'k', kEos}));
}

TEST(ParallelData, ReadsTwoAlignedFiles) {
  TempFile src("one\ntwo\nthree\nfour\n"), tgt("un\ndeux\ntrois\nquatre\n");
  auto tokenizer = byteTokenizer(262);
  auto target = targetFor("encoder_decoder", "translate", *tokenizer);
  auto valid = openDataSource(fileSpec("parallel", {src.path, tgt.path}),
                              target, 1, Split::Valid);
  ASSERT_EQ(valid->pairs().size(), 1u);
  EXPECT_EQ(valid->pairs()[0].source, bytes("four"));
  EXPECT_EQ(valid->pairs()[0].target, bytes("quatre"));
}

TEST(ParallelData, NamesTheFileAndLineOfMalformedInput) {
  auto tokenizer = byteTokenizer(262);
  auto target = targetFor("encoder_decoder", "translate", *tokenizer);
  TempFile noTab("a\tb\nno tab here\n");
  EXPECT_THAT(errorOf([&] {
                openDataSource(fileSpec("parallel", {noTab.path}), target, 1);
              }),
              HasSubstr(noTab.path + ":2: expected 'source<TAB>target'"));
  TempFile empty("a\t\n");
  EXPECT_THAT(errorOf([&] {
                openDataSource(fileSpec("parallel", {empty.path}), target, 1);
              }),
              HasSubstr(empty.path + ":1: the source or the target is empty"));
  TempFile three("a\nb\nc\n"), two("a\nb\n");
  EXPECT_THAT(errorOf([&] {
                openDataSource(fileSpec("parallel", {three.path, two.path}),
                               target, 1);
              }),
              HasSubstr("has 3 non-empty lines but"));
  EXPECT_THAT(errorOf([&] {
                openDataSource(fileSpec("parallel", {"/nonexistent/x.tsv"}),
                               target, 1);
              }),
              HasSubstr("cannot open parallel data '/nonexistent/x.tsv'"));
}

TEST(LabelledData, PairsGetSegmentsAndTheLabelSitsAtTheFirstPosition) {
  TempFile file("pos\tab\tcde\nneg\tx\ny\tz\nneg\tfg\thi\n");
  auto tokenizer = byteTokenizer(262);
  DataTarget target = targetFor("encoder", "classify", *tokenizer);
  target.classes = 3;
  target.segments = 2;
  DataSpec spec = fileSpec("labelled", {file.path});
  spec.labels = {"neg", "pos", "y"};
  auto train = openDataSource(spec, target, 3, Split::Train);
  // Find the row of the first line among the training draws.
  bool seen = false;
  for (int64_t i = 0; i < 40 && !seen; ++i) {
    Batch batch = train->batch(i, 1, 9);
    if (row(batch.tokens, 0)[1] != 'a')
      continue;
    seen = true;
    EXPECT_EQ(row(batch.tokens, 0),
              (std::vector<int32_t>{kCls, 'a', 'b', kSep, 'c', 'd', 'e', kSep,
                                    kPad}));
    EXPECT_EQ(row(batch.inputs.at("segments"), 0),
              (std::vector<int32_t>{0, 0, 0, 0, 1, 1, 1, 1, 0}));
    EXPECT_EQ(row(batch.inputs.at("mask"), 0),
              (std::vector<int32_t>{1, 1, 1, 1, 1, 1, 1, 1, 0}));
    EXPECT_EQ(row(batch.targets, 0),
              (std::vector<int32_t>{1, -1, -1, -1, -1, -1, -1, -1, -1}));
  }
  EXPECT_TRUE(seen);
  // Too long for 6 positions: the longer text is cut first.
  auto valid = openDataSource(spec, target, 3, Split::Valid);
  Batch cut = valid->batch(0, 1, 6);
  EXPECT_EQ(row(cut.tokens, 0),
            (std::vector<int32_t>{kCls, 'f', kSep, 'h', 'i', kSep}));
  EXPECT_EQ(row(cut.targets, 0)[0], 0);
}

TEST(LabelledData, NamesTheFileAndLineOfBadLabels) {
  auto tokenizer = byteTokenizer(262);
  DataTarget target = targetFor("encoder", "classify", *tokenizer);
  target.classes = 2;
  TempFile file("0\tgood\n2\tbad\n");
  EXPECT_THAT(
      errorOf([&] { openDataSource(fileSpec("labelled", {file.path}), target, 1); }),
      HasSubstr(file.path + ":2: the label '2' is not a class number in [0, 2)"));
  DataSpec named = fileSpec("labelled", {file.path});
  named.labels = {"neg", "pos"};
  EXPECT_THAT(errorOf([&] { openDataSource(named, target, 1); }),
              HasSubstr(file.path + ":1: unknown label '0' (the data names: "
                                    "neg, pos)"));
  TempFile fields("0\ta\tb\tc\n");
  EXPECT_THAT(errorOf([&] {
                openDataSource(fileSpec("labelled", {fields.path}), target, 1);
              }),
              HasSubstr(fields.path + ":1: expected 'label<TAB>text'"));
}

TEST(MlmData, MasksBertsSharesOfOrdinaryTokens) {
  std::string text;
  for (int i = 0; i < 200; ++i)
    text += "the quick brown fox jumps over the lazy dog " +
            std::to_string(i) + "\n";
  TempFile file(text);
  auto tokenizer = byteTokenizer(262);
  DataTarget target = targetFor("encoder", "mlm", *tokenizer);
  target.mlm.maxPredictions = 100;
  auto train = openDataSource(fileSpec("lines", {file.path}), target, 5,
                              Split::Train);
  int64_t predicted = 0, ordinary = 0, masked = 0, kept = 0;
  for (int64_t i = 0; i < 50; ++i) {
    Batch batch = train->batch(i, 4, 64);
    for (int64_t b = 0; b < 4; ++b) {
      std::vector<int32_t> tokens = row(batch.tokens, b);
      std::vector<int32_t> targets = row(batch.targets, b);
      std::vector<int32_t> mask = row(batch.inputs.at("mask"), b);
      ASSERT_EQ(tokens[0], kCls);
      int64_t length = 0;
      while (length < 64 && mask[length])
        ++length;
      ASSERT_EQ(tokens[length - 1], kSep);
      for (int64_t j = length; j < 64; ++j)
        ASSERT_EQ(tokens[j], kPad);
      ordinary += length - 2;
      for (int64_t j = 0; j < 64; ++j) {
        if (targets[j] < 0)
          continue;
        ++predicted;
        ASSERT_TRUE(j > 0 && j < length - 1) << "only real text is predicted";
        masked += tokens[j] == kMask;
        kept += tokens[j] == targets[j];
      }
    }
  }
  double rate = double(predicted) / double(ordinary);
  EXPECT_NEAR(rate, 0.15, 0.01);
  EXPECT_NEAR(double(masked) / double(predicted), 0.8, 0.04);
  // Kept: the 10% left as they are plus random draws that hit the original.
  EXPECT_NEAR(double(kept) / double(predicted), 0.1, 0.04);
  // The same index gives the same batch.
  EXPECT_EQ(row(train->batch(3, 4, 64).tokens, 2),
            row(train->batch(3, 4, 64).tokens, 2));
}

TEST(MlmData, RefusesATokenizerWithoutAMaskToken) {
  TempFile file("some text\n");
  auto tokenizer = byteTokenizer(256);
  DataTarget target = targetFor("encoder", "mlm", *tokenizer);
  EXPECT_THAT(errorOf([&] {
                openDataSource(fileSpec("lines", {file.path}), target, 1);
              }),
              HasSubstr("needs a tokenizer with pad, mask, cls and sep"));
}

TEST(SyntheticTranslate, FollowsItsRulesAndHoldsOutWholeSentences) {
  DataSpec spec;
  spec.kind = "synthetic";
  spec.task = "translate";
  DataTarget target;
  target.vocab = 100;
  target.kind = "encoder_decoder";
  target.objective = "translate";
  auto train = openDataSource(spec, target, 9, Split::Train);
  auto valid = openDataSource(spec, target, 9, Split::Valid);
  std::vector<TranslationPair> held = valid->pairs();
  ASSERT_EQ(held.size(), 512u);
  std::set<std::vector<int32_t>> heldSources;
  for (const TranslationPair &p : held)
    heldSources.insert(p.source);
  EXPECT_GT(heldSources.size(), 400u) << "held-out sentences are varied";
  // 64 x 32 training rows: none is a held-out sentence.
  for (int64_t i = 0; i < 64; ++i) {
    Batch batch = train->batch(i, 32, 16);
    for (int64_t b = 0; b < 32; ++b) {
      std::vector<int32_t> src = row(batch.inputs.at("source"), b);
      std::vector<int32_t> words;
      for (int32_t t : src)
        if (t > 3)
          words.push_back(t);
      EXPECT_FALSE(heldSources.count(words));
    }
  }
  // The rules, restated: ids 4-5 determiners, 6-15 adjectives, 16-31
  // nouns, 32-39 verbs, 40-43 prepositions; each translates to its id + 40;
  // phrases become noun [adjective] determiner, the verb goes last and a
  // preposition follows its phrase.
  auto translate = [](const std::vector<int32_t> &source) {
    std::vector<std::vector<int32_t>> phrases;
    int32_t verb = -1, prep = -1;
    for (size_t i = 0; i < source.size();) {
      int32_t w = source[i];
      if (w >= 32 && w <= 39) {
        verb = w;
        ++i;
      } else if (w >= 40 && w <= 43) {
        prep = w;
        ++i;
      } else {
        int32_t det = source[i++];
        int32_t adj = source[i] < 16 ? source[i++] : -1;
        int32_t noun = source[i++];
        std::vector<int32_t> p{noun + 40};
        if (adj >= 0)
          p.push_back(adj + 40);
        p.push_back(det + 40);
        phrases.push_back(p);
      }
    }
    std::vector<int32_t> out;
    for (const auto &p : phrases)
      out.insert(out.end(), p.begin(), p.end());
    if (prep >= 0)
      out.push_back(prep + 40);
    out.push_back(verb + 40);
    return out;
  };
  for (const TranslationPair &p : held)
    ASSERT_EQ(p.target, translate(p.source)) << train->decode(p.source);
  EXPECT_EQ(train->decode({4, 7, 16, 32, 5, 17}), "the small cat sees a dog");
}

TEST(SyntheticTranslate, NeedsTheVocabulary) {
  DataSpec spec;
  spec.kind = "synthetic";
  spec.task = "translate";
  DataTarget target;
  target.vocab = 50;
  target.kind = "encoder_decoder";
  target.objective = "translate";
  EXPECT_THAT(errorOf([&] { openDataSource(spec, target, 1); }),
              HasSubstr("synthetic translate has 84 words (with pad, bos, eos "
                        "and unk) but the model's vocab is 50"));
}

} // namespace
