//===- DataTest.cpp - training data sources -------------------------------===//

#include "moec/Data.h"
#include "ErrorOf.h"
#include "moec/Error.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <set>
#include <unistd.h>

using namespace moec;
using moec::test::errorOf;
namespace fs = std::filesystem;

namespace {

DataSpec synthetic(const std::string &task) {
  DataSpec spec;
  spec.kind = "synthetic";
  spec.task = task;
  return spec;
}

std::vector<int32_t> row(const Tensor &t, int64_t b) {
  const int32_t *p = t.data<int32_t>() + b * t.shape()[1];
  return std::vector<int32_t>(p, p + t.shape()[1]);
}

std::vector<int32_t> all(const Tensor &t) {
  return std::vector<int32_t>(t.data<int32_t>(), t.data<int32_t>() + t.numel());
}

/// Checks what every source promises of every batch.
void expectWellFormed(const DataSource &source, const Batch &batch, int64_t b,
                      int64_t s) {
  ASSERT_EQ(batch.tokens.dtype(), DType::I32);
  ASSERT_EQ(batch.targets.dtype(), DType::I32);
  ASSERT_EQ(batch.tokens.shape(), (Shape{b, s}));
  ASSERT_EQ(batch.targets.shape(), (Shape{b, s}));
  for (int32_t t : all(batch.tokens)) {
    ASSERT_GE(t, 0);
    ASSERT_LT(t, source.vocab());
  }
  for (int32_t t : all(batch.targets)) {
    ASSERT_GE(t, 0);
    ASSERT_LT(t, source.vocab());
  }
  // Targets are the tokens shifted by one.
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j + 1 < s; ++j)
      ASSERT_EQ(batch.targets.data<int32_t>()[i * s + j],
                batch.tokens.data<int32_t>()[i * s + j + 1]);
}

/// A temporary file, removed afterwards.
class TempFile {
public:
  explicit TempFile(const std::string &contents) {
    std::string pattern = fs::temp_directory_path() / "moec-data-XXXXXX";
    int fd = ::mkstemp(pattern.data());
    EXPECT_GE(fd, 0);
    ::close(fd);
    path = pattern;
    std::ofstream(path, std::ios::binary) << contents;
  }
  ~TempFile() { fs::remove(path); }
  std::string path;
};

/// Varied bytes, so that different windows differ.
std::string randomText(size_t n) {
  std::string text;
  uint32_t state = 12345;
  for (size_t i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    text += static_cast<char>(' ' + (state >> 24) % 95);
  }
  return text;
}

} // namespace

//===----------------------------------------------------------------------===//
// Properties every source has
//===----------------------------------------------------------------------===//

class EverySource : public ::testing::TestWithParam<std::string> {
protected:
  std::unique_ptr<DataSource> open(uint64_t seed, Split split) {
    if (GetParam() == "text") {
      DataSpec spec;
      spec.kind = "text";
      spec.paths = {text.path};
      return openDataSource(spec, 300, seed, split);
    }
    return openDataSource(synthetic(GetParam()), 300, seed, split);
  }
  TempFile text{randomText(5000)};
};

TEST_P(EverySource, BatchesAreWellFormed) {
  auto source = open(1, Split::Train);
  for (int64_t i = 0; i < 5; ++i)
    expectWellFormed(*source, source->batch(i, 4, 33), 4, 33);
  expectWellFormed(*source, source->batch(0, 1, 1), 1, 1);
}

TEST_P(EverySource, SameIndexSameBatch) {
  auto a = open(7, Split::Train), b = open(7, Split::Train);
  EXPECT_EQ(all(a->batch(3, 4, 16).tokens), all(b->batch(3, 4, 16).tokens));
  EXPECT_EQ(all(a->batch(3, 4, 16).targets), all(a->batch(3, 4, 16).targets));
}

TEST_P(EverySource, DifferentIndexSeedOrSplitDiffers) {
  auto train = open(7, Split::Train);
  auto batch = all(train->batch(3, 4, 16).tokens);
  EXPECT_NE(batch, all(train->batch(4, 4, 16).tokens));
  EXPECT_NE(batch, all(open(8, Split::Train)->batch(3, 4, 16).tokens));
  EXPECT_NE(batch, all(open(7, Split::Valid)->batch(3, 4, 16).tokens));
}

TEST_P(EverySource, RowsDependOnlyOnTheirPositionInTheStream) {
  // Row b of batch i is stream row i * B + b whatever B is.
  auto source = open(5, Split::Train);
  Batch wide = source->batch(1, 4, 16);
  Batch narrow = source->batch(3, 2, 16);
  EXPECT_EQ(row(wide.tokens, 2), row(narrow.tokens, 0));
  EXPECT_EQ(row(wide.tokens, 3), row(narrow.tokens, 1));
}

TEST_P(EverySource, RejectsBadBatchRequests) {
  auto source = open(1, Split::Train);
  EXPECT_THROW(source->batch(-1, 2, 8), Error);
  EXPECT_THROW(source->batch(0, 0, 8), Error);
  EXPECT_THROW(source->batch(0, 2, 0), Error);
}

INSTANTIATE_TEST_SUITE_P(Data, EverySource,
                         ::testing::Values("text", "grammar", "markov",
                                           "copy"));

//===----------------------------------------------------------------------===//
// Markov
//===----------------------------------------------------------------------===//

TEST(MarkovData, SuccessorsRespectTheBranching) {
  DataSpec spec = synthetic("markov");
  spec.branching = 3;
  auto source = openDataSource(spec, 50, 1);
  EXPECT_EQ(source->vocab(), 50);
  std::map<int32_t, std::set<int32_t>> successors;
  for (int64_t i = 0; i < 20; ++i) {
    Batch batch = source->batch(i, 8, 64);
    for (int64_t k = 0; k < batch.tokens.numel(); ++k)
      successors[batch.tokens.data<int32_t>()[k]].insert(
          batch.targets.data<int32_t>()[k]);
  }
  EXPECT_GT(successors.size(), 40u);
  size_t full = 0;
  for (const auto &[token, next] : successors) {
    EXPECT_LE(next.size(), 3u) << "token " << token;
    full += next.size() == 3;
  }
  EXPECT_GT(full, 30u) << "most tokens should show all their successors";
}

TEST(MarkovData, TheTaskSeedFixesTheChain) {
  DataSpec spec = synthetic("markov");
  spec.branching = 1; // A deterministic walk: the chain alone decides it.
  auto collect = [](const DataSource &s, uint64_t) {
    std::map<int32_t, int32_t> next;
    Batch batch = s.batch(0, 16, 64);
    for (int64_t k = 0; k < batch.tokens.numel(); ++k)
      next[batch.tokens.data<int32_t>()[k]] = batch.targets.data<int32_t>()[k];
    return next;
  };
  auto a = collect(*openDataSource(spec, 64, 1), 1);
  auto b = collect(*openDataSource(spec, 64, 2), 2);
  for (const auto &[token, next] : a)
    if (b.count(token)) {
      EXPECT_EQ(b[token], next) << "the sampling seed changed the chain";
    }
  spec.taskSeed = 9;
  auto c = collect(*openDataSource(spec, 64, 1), 1);
  int differ = 0;
  for (const auto &[token, next] : a)
    differ += c.count(token) && c[token] != next;
  EXPECT_GT(differ, 0) << "the task seed did not change the chain";
}

TEST(MarkovData, RejectsBadBranching) {
  DataSpec spec = synthetic("markov");
  spec.branching = 0;
  EXPECT_THROW(openDataSource(spec, 10, 1), Error);
  spec.branching = 11;
  EXPECT_EQ(errorOf([&] { openDataSource(spec, 10, 1); }),
            "data: markov branching 11 must be between 1 and the vocabulary "
            "size 10");
}

//===----------------------------------------------------------------------===//
// Copy
//===----------------------------------------------------------------------===//

TEST(CopyData, RowsCopyTheirRandomHalf) {
  auto source = openDataSource(synthetic("copy"), 20, 3);
  const int32_t sep = 19;
  const int64_t seqLen = 63, m = seqLen / 4;
  Batch batch = source->batch(0, 4, seqLen);
  for (int64_t b = 0; b < 4; ++b) {
    // The full row: tokens plus the last target.
    std::vector<int32_t> r = row(batch.tokens, b);
    r.push_back(batch.targets.data<int32_t>()[b * seqLen + seqLen - 1]);
    for (int64_t unit = 0; unit < static_cast<int64_t>(r.size());
         unit += 2 * (m + 1)) {
      for (int64_t i = 0; i < m && unit + i < 64; ++i) {
        EXPECT_LT(r[unit + i], sep);
        if (unit + m + 1 + i < 64) {
          EXPECT_EQ(r[unit + m + 1 + i], r[unit + i]);
        }
      }
      if (unit + m < 64) {
        EXPECT_EQ(r[unit + m], sep);
      }
      if (unit + 2 * m + 1 < 64) {
        EXPECT_EQ(r[unit + 2 * m + 1], sep);
      }
    }
  }
}

TEST(CopyData, NeedsFourTokens) {
  EXPECT_EQ(errorOf([] { openDataSource(synthetic("copy"), 3, 1); }),
            "data: the copy task needs a vocabulary of at least 4 tokens (one "
            "is the separator), but the model's is 3");
}

//===----------------------------------------------------------------------===//
// Text
//===----------------------------------------------------------------------===//

TEST(TextData, WindowsComeFromTheirSplit) {
  std::string contents = randomText(1000);
  TempFile file(contents);
  DataSpec spec;
  spec.kind = "text";
  spec.paths = {file.path};
  spec.validFraction = 0.2;
  auto train = openDataSource(spec, 256, 1, Split::Train);
  auto valid = openDataSource(spec, 256, 1, Split::Valid);
  for (auto [source, begin, end] :
       {std::tuple{train.get(), 0, 800}, std::tuple{valid.get(), 800, 1000}}) {
    std::set<size_t> offsets;
    for (int64_t i = 0; i < 10; ++i) {
      Batch batch = source->batch(i, 4, 16);
      for (int64_t b = 0; b < 4; ++b) {
        std::vector<int32_t> r = row(batch.tokens, b);
        r.push_back(batch.targets.data<int32_t>()[b * 16 + 15]);
        std::string window(r.begin(), r.end());
        // Random 17-byte windows are unique, so find() locates them.
        size_t at = contents.find(window);
        ASSERT_NE(at, std::string::npos) << window;
        EXPECT_GE(at, static_cast<size_t>(begin));
        EXPECT_LE(at + 17, static_cast<size_t>(end));
        offsets.insert(at);
      }
    }
    EXPECT_GT(offsets.size(), 20u);
  }
  EXPECT_NE(train->describe().find("train split: bytes [0, 800) of 1000"),
            std::string::npos)
      << train->describe();
}

TEST(TextData, Errors) {
  DataSpec spec;
  spec.kind = "text";
  spec.paths = {"/nonexistent/moec/data.txt"};
  EXPECT_EQ(errorOf([&] { openDataSource(spec, 256, 1); }),
            "cannot open text data '/nonexistent/moec/data.txt': No such file "
            "or directory");

  TempFile empty("");
  spec.paths = {empty.path};
  EXPECT_EQ(errorOf([&] { openDataSource(spec, 256, 1); }),
            "text data '" + empty.path + "' is empty");

  TempFile shortFile(std::string(100, 'z'));
  spec.paths = {shortFile.path};
  auto valid = openDataSource(spec, 256, 1, Split::Valid);
  EXPECT_NO_THROW(valid->batch(0, 1, 9));
  EXPECT_EQ(errorOf([&] { valid->batch(0, 1, 10); }),
            "text data '" + shortFile.path +
                "': the valid split holds 10 of the file's 100 bytes, but a "
                "sequence of length 10 needs 11; use a longer file, a shorter "
                "sequence or a different valid fraction");

  EXPECT_EQ(errorOf([&] { openDataSource(spec, 255, 1); }),
            "data text '" + shortFile.path +
                "' is byte-level and needs a model vocabulary of at least 256, "
                "but the model's is 255; raise the model's vocab or use a "
                "synthetic markov or copy task");
  spec.validFraction = 1.5;
  EXPECT_THROW(openDataSource(spec, 256, 1), Error);
}

//===----------------------------------------------------------------------===//
// Grammar
//===----------------------------------------------------------------------===//

TEST(GrammarData, IsPrintableAndFarFromUniform) {
  auto source = openDataSource(synthetic("grammar"), 256, 11);
  EXPECT_EQ(source->vocab(), 256);
  EXPECT_EQ(source->describe(), "synthetic grammar (byte-level, vocab 256)");
  // Empirical H(next byte | byte) over ~100k bytes.
  std::map<std::pair<int32_t, int32_t>, double> pairs;
  std::map<int32_t, double> firsts;
  double n = 0;
  for (int64_t i = 0; i < 25; ++i) {
    Batch batch = source->batch(i, 16, 256);
    for (int64_t k = 0; k < batch.tokens.numel(); ++k) {
      int32_t a = batch.tokens.data<int32_t>()[k];
      int32_t b = batch.targets.data<int32_t>()[k];
      ASSERT_TRUE(a >= 0x20 && a < 0x7f) << "byte " << a;
      ++pairs[{a, b}];
      ++firsts[a];
      ++n;
    }
  }
  double entropy = 0;
  for (const auto &[pair, count] : pairs)
    entropy -= count / n * std::log(count / firsts[pair.first]);
  EXPECT_LT(entropy, 2.5) << "bigram conditional entropy in nats";
  EXPECT_GT(entropy, 0.5) << "the grammar should not be trivial";
}

TEST(GrammarData, ReadsLikeSentences) {
  auto source = openDataSource(synthetic("grammar"), 256, 2);
  Batch batch = source->batch(0, 1, 400);
  std::string text = source->decode(row(batch.tokens, 0));
  EXPECT_NE(text.find(". "), std::string::npos) << text;
  EXPECT_NE(text.find(" the "), std::string::npos) << text;
  EXPECT_EQ(text.find("  "), std::string::npos) << text;
}

TEST(GrammarData, RowsStartAtDifferentPlaces) {
  auto source = openDataSource(synthetic("grammar"), 256, 2);
  Batch batch = source->batch(0, 32, 8);
  int capitals = 0;
  for (int64_t b = 0; b < 32; ++b)
    capitals += std::isupper(batch.tokens.data<int32_t>()[b * 8]) != 0;
  EXPECT_LT(capitals, 16);
}

TEST(GrammarData, NeedsAByteVocabulary) {
  EXPECT_EQ(errorOf([] { openDataSource(synthetic("grammar"), 100, 1); }),
            "data synthetic grammar is byte-level and needs a model vocabulary "
            "of at least 256, but the model's is 100; raise the model's vocab "
            "or use a synthetic markov or copy task");
}

//===----------------------------------------------------------------------===//
// Text conversions and specs
//===----------------------------------------------------------------------===//

TEST(DataText, BytesRoundTrip) {
  auto source = openDataSource(synthetic("grammar"), 256, 1);
  std::string text = "Hello, world! \\ {x}\n\tend";
  std::vector<int32_t> tokens = source->encode(text);
  ASSERT_EQ(tokens.size(), text.size());
  EXPECT_EQ(tokens[0], 'H');
  EXPECT_EQ(source->decode(tokens), text);
  EXPECT_EQ(source->encode("\xff")[0], 255);
  EXPECT_EQ(source->decode({7, 'a', 255, 0, 300}), "\\x07a\\xff\\x00<300>");
}

TEST(DataText, IdsRoundTrip) {
  auto source = openDataSource(synthetic("copy"), 100, 1);
  EXPECT_EQ(source->encode(" 1 22\t99\n0 "),
            (std::vector<int32_t>{1, 22, 99, 0}));
  EXPECT_EQ(source->decode({1, 22, 99, 0}), "1 22 99 0");
  EXPECT_EQ(source->encode(source->decode({5, 6, 7})),
            (std::vector<int32_t>{5, 6, 7}));
  EXPECT_TRUE(source->encode("").empty());
  EXPECT_EQ(errorOf([&] { source->encode("1 100"); }),
            "cannot read '100' as a token: this data source takes "
            "space-separated token ids in [0, 100)");
  EXPECT_THROW(source->encode("1 x"), Error);
  EXPECT_THROW(source->encode("-1"), Error);
  EXPECT_THROW(source->encode("1.5"), Error);
}

TEST(DataText, Describes) {
  DataSpec spec = synthetic("markov");
  spec.branching = 4;
  spec.taskSeed = 3;
  EXPECT_EQ(openDataSource(spec, 64, 1)->describe(),
            "synthetic markov (vocab 64, 4 successors per token, task seed 3; "
            "optimal loss ln 4 = 1.386)");
  EXPECT_EQ(openDataSource(synthetic("copy"), 64, 1)->describe(),
            "synthetic copy (vocab 64, separator 63)");
}

TEST(DataSpecs, UnknownKindOrTask) {
  DataSpec spec;
  spec.kind = "video";
  EXPECT_EQ(errorOf([&] { openDataSource(spec, 256, 1); }),
            "data: unknown kind 'video' (expected 'synthetic' or 'text')");
  EXPECT_EQ(errorOf([] { openDataSource(synthetic("sort"), 256, 1); }),
            "data: unknown synthetic task 'sort' (expected 'grammar', "
            "'markov' or 'copy')");
}
