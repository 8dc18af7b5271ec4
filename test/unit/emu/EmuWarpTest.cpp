//===- EmuWarpTest.cpp - shuffles, votes and warp reductions in emu -------===//

#include "EmuTestUtil.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace moec::emu;
using namespace moec::emu::test;

namespace {

// The source lane of each shuffle as the CUDA programming guide states it
// (a lane reading outside its range keeps its own value).
int idxSource(int lane, int src, int width) {
  return (lane & ~(width - 1)) + src % width;
}
int upSource(int lane, int delta, int width) {
  return lane % width >= delta ? lane - delta : lane;
}
int downSource(int lane, int delta, int width) {
  return lane % width + delta < width ? lane + delta : lane;
}
int xorSource(int lane, int mask, int width) {
  int src = lane ^ mask;
  // Earlier groups may be read, later ones not.
  return src < (lane & ~(width - 1)) + width ? src : lane;
}

} // namespace

TEST(EmuWarp, ShufflesOfEveryKindAndWidth) {
  const int n = 64, kinds = 11;
  std::vector<int> out(kinds * n, 0);
  std::vector<double> outD(n);
  std::vector<float> outF(n);
  std::vector<unsigned long long> outU(n);
  Launch(1, n)
      .buffer(0, out)
      .buffer(1, outD)
      .buffer(2, outF)
      .buffer(3, outU)
      .run(correctModule(), "shuffles");
  for (int t = 0; t < n; ++t) {
    int lane = t % 32, base = t - lane;
    auto value = [&](int src) { return 100 * (base + src); };
    int expected[kinds] = {
        value(idxSource(lane, (lane * 7 + 3) % 32, 32)),
        value(idxSource(lane, lane + 5, 8)),
        value(idxSource(lane, 2, 16)),
        value(upSource(lane, 3, 32)),
        value(upSource(lane, 3, 16)),
        value(downSource(lane, 5, 32)),
        value(downSource(lane, 5, 8)),
        value(xorSource(lane, 9, 32)),
        value(xorSource(lane, 9, 8)),
        value(xorSource(lane, 1, 4)),
        lane % 2 == 0 ? value(lane ^ 2) : -1,
    };
    for (int k = 0; k < kinds; ++k)
      EXPECT_EQ(out[k * n + t], expected[k]) << "kind " << k << " thread " << t;
    EXPECT_EQ(outD[t], 0.5 * (base + downSource(lane, 1, 32))) << t;
    EXPECT_EQ(outF[t], 0.25f * (base + upSource(lane, 2, 8))) << t;
    EXPECT_EQ(outU[t], (1ull << 40) + base + (31 - lane)) << t;
  }
}

TEST(EmuWarp, VotesWithFullAndPartialMasks) {
  const int n = 64;
  std::vector<unsigned> out(7 * n, 0xdeadbeefu);
  Launch(1, n).buffer(0, out).run(correctModule(), "votes");
  for (int t = 0; t < n; ++t) {
    int lane = t % 32, base = t - lane;
    auto pred = [&](int l) { return ((base + l) * 13) % 5 == 0; };
    unsigned ballot = 0, low = 0, high = 0, thirds = 0;
    for (int l = 0; l < 32; ++l) {
      if (pred(l))
        (l < 16 ? low : high) |= 1u << l;
      if (l % 3 == 0 && l > 10)
        thirds |= 1u << l;
    }
    ballot = low | high;
    EXPECT_EQ(out[0 * n + t], ballot) << t;
    EXPECT_EQ(out[1 * n + t], t >= 32 ? 1u : 0u) << t;
    EXPECT_EQ(out[2 * n + t], 0u) << t;
    EXPECT_EQ(out[3 * n + t], lane < 16 ? low : high) << t;
    EXPECT_EQ(out[4 * n + t], 1u) << t;
    EXPECT_EQ(out[5 * n + t], lane % 3 == 0 ? thirds : 0u) << t;
    EXPECT_EQ(out[6 * n + t], lane < 10 ? 0x3ffu : 0u) << t;
  }
}

TEST(EmuWarp, LaneInTheMaskThatNeverArrivesIsAnError) {
  std::vector<int> out(64);
  std::string error =
      Launch(1, 64).buffer(0, out).error(correctModule(), "missingLane");
  EXPECT_NE(error.find("missingLane: block (0,0,0)"), std::string::npos)
      << error;
  EXPECT_NE(error.find("__shfl_sync with mask 0xffffffff never completes: "
                       "lane 5 (thread (5,0,0)) waits at __syncthreads()"),
            std::string::npos)
      << error;

  error = Launch(1, 64).buffer(0, out).error(correctModule(), "exitedLane");
  EXPECT_NE(error.find("exitedLane"), std::string::npos) << error;
  EXPECT_NE(error.find("lane 5 (thread (5,0,0)) has exited"), std::string::npos)
      << error;
}

TEST(EmuWarp, XorReductionsOfFloatAndDouble) {
  const int blocks = 2, threads = 96, n = blocks * threads;
  std::vector<float> xf(n), outF(2 * n);
  std::vector<double> xd(n), outD(2 * n);
  for (int i = 0; i < n; ++i) {
    xf[i] = std::sin(0.37f * i) * 10.0f;
    xd[i] = std::cos(0.11 * i) * 1e3;
  }
  Launch(blocks, threads)
      .buffer(0, xf)
      .buffer(1, xd)
      .buffer(2, outF)
      .buffer(3, outD)
      .run(correctModule(), "warpReduce");
  for (int w = 0; w < n / 32; ++w) {
    // The butterfly's own order: step o adds lane l ^ o to lane l.
    std::vector<float> s(xf.begin() + 32 * w, xf.begin() + 32 * w + 32);
    std::vector<double> sd(xd.begin() + 32 * w, xd.begin() + 32 * w + 32);
    for (int o = 16; o > 0; o >>= 1) {
      std::vector<float> s2(32);
      std::vector<double> sd2(32);
      for (int l = 0; l < 32; ++l) {
        s2[l] = s[l] + s[l ^ o];
        sd2[l] = sd[l] + sd[l ^ o];
      }
      s = s2;
      sd = sd2;
    }
    float maxF =
        *std::max_element(xf.begin() + 32 * w, xf.begin() + 32 * w + 32);
    double maxD =
        *std::max_element(xd.begin() + 32 * w, xd.begin() + 32 * w + 32);
    for (int l = 0; l < 32; ++l) {
      int g = 32 * w + l;
      EXPECT_EQ(outF[2 * g], s[l]) << g;
      EXPECT_EQ(outF[2 * g + 1], maxF) << g;
      EXPECT_EQ(outD[2 * g], sd[l]) << g;
      EXPECT_EQ(outD[2 * g + 1], maxD) << g;
    }
  }
}
