//===- RouterSlotCheckTest.cpp - router slots up to near-tied ranks -------===//
//
// The kernel check's relaxed comparison of batch-priority slots: a swap of
// near-tied tokens passes, and every other difference still fails.
//
//===----------------------------------------------------------------------===//

#include "RouterSlotCheck.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using moec::detail::nearTiedSlotMismatch;
using ::testing::HasSubstr;

namespace {

constexpr double kTolerance = 1e-4;

/// Five tokens, top-1 over two experts: tokens 1 and 2 tie to 2e-7 on
/// expert 0; the cpu ranks 0, 2, 1, 4 there (4 is dropped at capacity 3)
/// and token 3 alone on expert 1.
struct FiveTokens {
  std::vector<int32_t> expert = {0, 0, 0, 1, 0};
  std::vector<double> key = {0.9, 0.5, 0.5000001, 0.7, 0.3};
  std::vector<int32_t> want = {0, 2, 1, 0, -1};

  std::string check(const std::vector<int32_t> &got) const {
    return nearTiedSlotMismatch(got.data(), want.data(), expert.data(), key,
                                1, 2, kTolerance);
  }
};

TEST(RouterSlotCheck, TheCpusOwnSlotsPass) {
  FiveTokens c;
  EXPECT_EQ(c.check(c.want), "");
}

TEST(RouterSlotCheck, NearTiedTokensMaySwapSlots) {
  FiveTokens c;
  EXPECT_EQ(c.check({0, 1, 2, 0, -1}), "");
}

TEST(RouterSlotCheck, ClearlyOrderedTokensMayNot) {
  FiveTokens c;
  EXPECT_THAT(c.check({1, 0, 2, 0, -1}),
              HasSubstr("expert 0: token 1 (top-1 probability 0.5) takes "
                        "slot 0 ahead of a token whose probability 0.9 is "
                        "clearly higher"));
}

TEST(RouterSlotCheck, TheDroppedTokenMustRankLast) {
  FiveTokens c;
  // Token 4 (0.3) routed and token 1 (0.5) dropped: 0.5 is clearly higher.
  EXPECT_THAT(c.check({0, -1, 1, 0, 2}), HasSubstr("clearly higher"));
  // A near-tie at the capacity's edge may change which one is dropped.
  c.key[4] = 0.49999999;
  EXPECT_EQ(c.check({0, -1, 1, 0, 2}), "");
}

TEST(RouterSlotCheck, OtherSlotsOrCountsFail) {
  FiveTokens c;
  EXPECT_THAT(c.check({0, 3, 1, 0, -1}),
              HasSubstr("expert 0 hands out slots 0, 1, 3; the cpu 0, 1, 2"));
  EXPECT_THAT(c.check({0, 2, 1, 0, 3}),
              HasSubstr("expert 0 hands out slots 0, 1, 2, 3; the cpu 0, 1, "
                        "2"));
  EXPECT_THAT(c.check({0, 2, 1, 1, -1}), HasSubstr("expert 1"));
}

TEST(RouterSlotCheck, SecondChoicesComeAfterFirstChoices) {
  // Two tokens, k = 2, both choose expert 0 then expert 1 with equal keys:
  // first choices take slots 0 and 1 of expert 0, second ones 0 and 1 of
  // expert 1.
  std::vector<int32_t> expert = {0, 1, 0, 1};
  std::vector<double> key = {0.6, 0.6};
  std::vector<int32_t> want = {0, 0, 1, 1};
  std::vector<int32_t> swapped = {1, 1, 0, 0};
  EXPECT_EQ(nearTiedSlotMismatch(swapped.data(), want.data(), expert.data(),
                                 key, 2, 2, kTolerance),
            "");
  // Token 0's second choice on expert 0 before token 1's first choice.
  std::vector<int32_t> mixedExpert = {0, 1, 0, 0};
  std::vector<int32_t> mixedWant = {0, 0, 1, 2};
  std::vector<int32_t> interleaved = {0, 0, 2, 1};
  EXPECT_THAT(nearTiedSlotMismatch(interleaved.data(), mixedWant.data(),
                                   mixedExpert.data(), key, 2, 2, kTolerance),
              HasSubstr("choice 1 of token 1 takes slot 1 before an earlier "
                        "choice's"));
}

TEST(RouterSlotCheck, AnExpertOutOfRangeFails) {
  FiveTokens c;
  c.expert[2] = 7;
  EXPECT_THAT(c.check(c.want), HasSubstr("assignment 2 chose expert 7"));
}

} // namespace
