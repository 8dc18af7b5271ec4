//===- EmuPerfTest.cpp - scheduler throughput -----------------------------===//
//
// Prints how fast the fiber scheduler runs barriers, shuffles and plain
// threads; the bounds are loose, only to catch a pathological slowdown.
//
//===----------------------------------------------------------------------===//

#include "EmuTestUtil.h"

#include <chrono>
#include <cstdio>
#include <gtest/gtest.h>

using namespace moec::emu;
using namespace moec::emu::test;

namespace {

/// Seconds per launch, best of `repeats` after one warm-up launch.
double timeLaunch(const Launch &launch, const char *kernel, int repeats) {
  launch.run(correctModule(), kernel);
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    auto start = std::chrono::steady_clock::now();
    launch.run(correctModule(), kernel);
    best = std::min(best, std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start)
                              .count());
  }
  return best;
}

} // namespace

TEST(EmuPerf, BarrierBlockOf1024Threads) {
  const int n = 1024, blocks = 4;
  std::vector<int> y(n * blocks, 0);
  Launch one(1, n);
  one.buffer(0, y);
  double perBlock = timeLaunch(one, "barrierLoop", 5);
  for (int t = 0; t < n; ++t)
    ASSERT_EQ(y[t], (t + 5) % n + 5) << t;
  Launch four(blocks, n);
  four.buffer(0, y);
  double fourBlocks = timeLaunch(four, "barrierLoop", 3);
  // Each thread: start, ten barriers, exit; two switches each.
  double switches = 2.0 * n * 11;
  std::printf("[ emu      ] 1024 threads x 10 barriers: %.3f ms per block "
              "(%.1f M fiber switches/s); 4 blocks %.3f ms\n",
              perBlock * 1e3, switches / perBlock / 1e6, fourBlocks * 1e3);
  EXPECT_LT(perBlock, 0.5);
}

TEST(EmuPerf, ShufflesAndPlainThreads) {
  const int n = 256, blocks = 16;
  std::vector<float> x(n * blocks, 1.0f), y(n * blocks, 0.0f);
  Launch shuffles(blocks, n);
  shuffles.buffer(0, y);
  double shuffleTime = timeLaunch(shuffles, "shuffleLoop", 3);
  double perShuffle = shuffleTime / (blocks * n / 32 * 64.0);
  Launch copy(blocks, n);
  copy.buffer(0, x).buffer(1, y);
  double copyTime = timeLaunch(copy, "plainCopy", 5);
  std::printf("[ emu      ] warp shuffle: %.2f us per warp-wide shuffle; "
              "plain thread: %.3f us per thread\n",
              perShuffle * 1e6, copyTime / (blocks * n) * 1e6);
  EXPECT_LT(perShuffle, 1e-3);
}
