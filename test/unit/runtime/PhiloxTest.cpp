//===- PhiloxTest.cpp - Philox known answers and stream properties --------===//

#include "Philox.h"

#include <cmath>
#include <gtest/gtest.h>
#include <vector>

using namespace moec;

// Known-answer vectors of Philox-4x32-10 from the Random123 distribution
// (kat_vectors): zero, all-ones and pi-digit counters and keys.
TEST(Philox, KnownAnswers) {
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, {0, 0}),
            (PhiloxBlock{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                       {0xffffffffu, 0xffffffffu}),
            (PhiloxBlock{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                       {0xa4093822u, 0x299f31d0u}),
            (PhiloxBlock{0xd16cfe09u, 0x94fdcceBu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, BlocksInBulkAreTheBlocksOneByOne) {
  // Counts around the sixteen lanes of a group; the first block crosses
  // into the counter's high word; seed and stream use all 64 bits.
  const uint64_t seed = 0x0123456789abcdefull, stream = 0xfedcba9876543210ull;
  const uint64_t first = (uint64_t(1) << 32) - 5;
  for (int64_t count : {0, 1, 15, 16, 17, 37}) {
    std::vector<uint32_t> words(4 * count + 4, 0xdeadbeefu);
    philoxBlocks(seed, stream, first, count, words.data());
    for (int64_t b = 0; b < count; ++b) {
      PhiloxBlock one = philoxBlock(seed, stream, first + b);
      for (int w = 0; w < 4; ++w)
        ASSERT_EQ(words[4 * b + w], one[w]) << count << " " << b << " " << w;
    }
    // Nothing written past the count.
    for (int w = 0; w < 4; ++w)
      EXPECT_EQ(words[4 * count + w], 0xdeadbeefu) << count;
  }
}

TEST(Philox, UniformIsAPureFunctionOfItsCounter) {
  EXPECT_EQ(philoxUniform(7, 3, 12345), philoxUniform(7, 3, 12345));
  EXPECT_NE(philoxUniform(7, 3, 12345), philoxUniform(7, 4, 12345));
  EXPECT_NE(philoxUniform(7, 3, 12345), philoxUniform(8, 3, 12345));
}

TEST(Philox, UniformMomentsMatch) {
  const int n = 200000;
  double sum = 0, sumSq = 0;
  for (int i = 0; i < n; ++i) {
    double u = philoxUniform(42, 1, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sumSq += u * u;
  }
  double mean = sum / n, var = sumSq / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 0.005);
  EXPECT_NEAR(var, 1.0 / 12, 0.002);
}

TEST(Philox, NormalMomentsMatch) {
  const int n = 200000;
  double sum = 0, sumSq = 0, sumQuart = 0;
  for (int i = 0; i < n; ++i) {
    double z = philoxNormal(5, 9, i);
    ASSERT_TRUE(std::isfinite(z));
    sum += z;
    sumSq += z * z;
    sumQuart += z * z * z * z;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sumSq / n, 1.0, 0.015);
  EXPECT_NEAR(sumQuart / n, 3.0, 0.1);
}

TEST(Philox, StreamIdsDifferByName) {
  EXPECT_NE(streamId("layers.0.attn.wq"), streamId("layers.0.attn.wk"));
  EXPECT_EQ(streamId("abc"), streamId("abc"));
}
