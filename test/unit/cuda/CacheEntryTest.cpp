//===- CacheEntryTest.cpp - the on-disk kernel cache format ---------------===//

#include "cuda/CacheEntry.h"

#include <gtest/gtest.h>

using namespace moec::detail::cuda;

namespace {

CacheEntry sample() {
  return {"key text\n",
          std::string("\x7f"
                      "ELF\0\1\2",
                      7),
          ".target sm_90\n", "ptxas info    : Used 8 registers\n", ""};
}

TEST(CacheEntry, RoundTrips) {
  std::string bytes = encodeCacheEntry(sample());
  std::string why;
  std::optional<CacheEntry> back = decodeCacheEntry(bytes, why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(back->key, sample().key);
  EXPECT_EQ(back->cubin, sample().cubin);
  EXPECT_EQ(back->ptx, sample().ptx);
  EXPECT_EQ(back->log, sample().log);
}

TEST(CacheEntry, AModuleReferenceRoundTrips) {
  CacheEntry entry = sample();
  entry.cubin.clear();
  entry.module = std::string(64, 'a');
  std::string why;
  std::optional<CacheEntry> back =
      decodeCacheEntry(encodeCacheEntry(entry), why);
  ASSERT_TRUE(back) << why;
  EXPECT_TRUE(back->cubin.empty());
  EXPECT_EQ(back->module, entry.module);
  EXPECT_EQ(back->log, entry.log);
}

TEST(CacheEntry, EmptySectionsRoundTrip) {
  std::string why;
  std::optional<CacheEntry> back =
      decodeCacheEntry(encodeCacheEntry({"k", "c", "", "", ""}), why);
  ASSERT_TRUE(back) << why;
  EXPECT_TRUE(back->ptx.empty());
}

TEST(CacheEntry, EveryTruncationIsRejected) {
  std::string bytes = encodeCacheEntry(sample());
  for (size_t size = 0; size < bytes.size(); ++size) {
    std::string why;
    EXPECT_FALSE(decodeCacheEntry(bytes.substr(0, size), why)) << size;
    EXPECT_FALSE(why.empty());
  }
}

TEST(CacheEntry, EveryBitFlipIsRejected) {
  std::string bytes = encodeCacheEntry(sample());
  for (size_t at = 0; at < bytes.size(); ++at)
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = bytes;
      damaged[at] ^= static_cast<char>(1 << bit);
      std::string why;
      EXPECT_FALSE(decodeCacheEntry(damaged, why)) << at << ":" << bit;
    }
}

TEST(CacheEntry, TrailingBytesAreRejected) {
  std::string why;
  EXPECT_FALSE(decodeCacheEntry(encodeCacheEntry(sample()) + "x", why));
}

TEST(CacheEntry, ReasonsNameTheProblem) {
  std::string bytes = encodeCacheEntry(sample());
  std::string why;
  std::string magic = bytes;
  magic[0] = 'X';
  decodeCacheEntry(magic, why);
  EXPECT_NE(why.find("magic"), std::string::npos) << why;
  std::string version = bytes;
  version[8] = 99;
  decodeCacheEntry(version, why);
  EXPECT_NE(why.find("format version 99"), std::string::npos) << why;
  std::string payload = bytes;
  payload.back() ^= 1;
  decodeCacheEntry(payload, why);
  EXPECT_NE(why.find("checksum"), std::string::npos) << why;
  decodeCacheEntry(bytes.substr(0, 40), why);
  EXPECT_NE(why.find("truncated"), std::string::npos) << why;
}

} // namespace
