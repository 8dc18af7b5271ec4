//===- SupportTest.cpp - suggestions, GPU architecture names, the clock ---===//

#include "moec/support/GpuArch.h"
#include "moec/support/Stopwatch.h"
#include "moec/support/Suggest.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace moec;
using ::testing::HasSubstr;

namespace {

TEST(Stopwatch, SecondsSinceAPointInThePast) {
  auto now = std::chrono::steady_clock::now();
  double seconds = support::secondsSince(now - std::chrono::milliseconds(2500));
  EXPECT_GE(seconds, 2.5);
  EXPECT_LT(seconds, 3.5);
  EXPECT_LT(support::secondsSince(std::chrono::steady_clock::now()), 0.5);
}

TEST(Suggest, NearestNameCountsASwapAsOneEditAndCaseAsNone) {
  std::vector<std::string> names{"steps", "seed", "adam", "adamw", "sgd",
                                 "repeat", "experts"};
  EXPECT_EQ(support::nearestName("stpes", names), "steps");
  EXPECT_EQ(support::nearestName("adamW", names), "adamw");
  EXPECT_EQ(support::nearestName("reapet", names), "repeat");
  EXPECT_EQ(support::nearestName("num_experts", names), "experts");
  EXPECT_EQ(support::nearestName("steps", names), "");
  EXPECT_EQ(support::nearestName("qqqqqq", names), "");
  // Short names: one edit, but the same first letter.
  EXPECT_EQ(support::nearestName("sdg", names), "sgd");
  EXPECT_EQ(support::nearestName("gpu", {"cpu", "cuda", "emu"}), "");
  EXPECT_EQ(support::nearestName("dd", {"d", "e"}), "d");
  // Two swaps are too many for a six-letter name.
  EXPECT_EQ(support::nearestName("hdiedn", {"hidden"}), "");
  EXPECT_EQ(support::typoDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(support::typoDistance("ab", "ba"), 1u);
  EXPECT_EQ(support::typoDistance("", "abc"), 3u);
}

TEST(GpuArch, OneRuleForNamesAndTileFamilies) {
  EXPECT_EQ(support::archNumber("sm_90a"), 90);
  EXPECT_EQ(support::archNumber("sm_120"), 120);
  EXPECT_FALSE(support::archNumber("sm_"));
  EXPECT_FALSE(support::archNumber("sm_90ab"));
  EXPECT_FALSE(support::archNumber("hopper"));
  EXPECT_FALSE(support::archNumber("sm_99999"));
  EXPECT_EQ(support::tileFamily("sm_86"), "sm_80");
  EXPECT_EQ(support::tileFamily("sm_90a"), "sm_90");
  EXPECT_EQ(support::tileFamily("sm_100"), "sm_90");
  EXPECT_FALSE(support::tileFamily("sm_75"));
  EXPECT_THAT(support::unsupportedArchMessage("sm_75"),
              HasSubstr("sm_80 (Ampere) and newer"));
}

} // namespace
