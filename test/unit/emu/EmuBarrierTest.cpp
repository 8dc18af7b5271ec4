//===- EmuBarrierTest.cpp - __syncthreads and shared memory in emu --------===//

#include "EmuTestUtil.h"

#include <gtest/gtest.h>

using namespace moec::emu;
using namespace moec::emu::test;

TEST(EmuBarrier, SharedMemoryTreeReduction) {
  const int n = 1000;
  std::vector<float> x(n), out(4, -1.0f);
  for (int i = 0; i < n; ++i)
    x[i] = static_cast<float>(i % 17 - 8);
  Launch(4, 256).buffer(0, x).buffer(1, out).scalar(0, n).run(correctModule(),
                                                              "blockReduce");
  for (int b = 0; b < 4; ++b) {
    float expected = 0.0f;
    for (int i = 256 * b; i < std::min(n, 256 * (b + 1)); ++i)
      expected += x[i];
    EXPECT_EQ(out[b], expected) << "block " << b;
  }
}

TEST(EmuBarrier, MultiPhaseKernelNeedsItsBarriers) {
  const int n = 256, blocks = 3;
  std::vector<int> x(n * blocks), y(n * blocks, 0);
  for (int i = 0; i < n * blocks; ++i)
    x[i] = 3 * i + 1;
  Launch(blocks, n).buffer(0, x).buffer(1, y).run(correctModule(),
                                                  "reverseShared");
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < n; ++t)
      ASSERT_EQ(y[b * n + t], 2 * x[b * n + n - 1 - (t + 1) % n])
          << "block " << b << " thread " << t;

  // Without the barriers thread t < 128 reads s[255 - t] before its writer
  // ran, and gets the garbage pattern shared memory starts a block with
  // (all bits set), every time.
  for (int repeat = 0; repeat < 2; ++repeat) {
    std::vector<int> z(n, 0);
    Launch(1, n).buffer(0, x).buffer(1, z).run(correctModule(),
                                               "reverseNoBarrier");
    for (int t = 0; t < n; ++t)
      ASSERT_EQ(z[t], t < n / 2 ? -1 : x[n - 1 - t]) << t;
  }
}

TEST(EmuBarrier, VectorElementsOfSharedArrays) {
  std::vector<float> y(64, 0.0f);
  Launch(1, 64).buffer(0, y).run(correctModule(), "sharedPairs");
  for (int t = 0; t < 64; ++t)
    EXPECT_EQ(y[t], 3.0f * (63 - t)) << t;
}

TEST(EmuBarrier, SharedArrayAsDeviceFunctionParameter) {
  std::vector<float> y(32, 0.0f);
  Launch(1, 32).buffer(0, y).run(correctModule(), "sharedParam");
  for (int t = 0; t < 32; ++t)
    EXPECT_EQ(y[t], t * (t + 1) / 2.0f) << t;
}

TEST(EmuBarrier, DynamicSharedMemory) {
  const int n = 96, blocks = 2;
  std::vector<float> x(n * blocks), y(n * blocks, 0.0f);
  for (int i = 0; i < n * blocks; ++i)
    x[i] = 0.5f * i - 7.0f;
  Launch(blocks, n)
      .buffer(0, x)
      .buffer(1, y)
      .shared(2 * n * sizeof(float))
      .run(correctModule(), "dynamicShared");
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < n; ++t)
      ASSERT_EQ(y[b * n + t],
                x[b * n + n - 1 - t] + 2.0f * x[b * n + n - 1 - (t + 3) % n])
          << "block " << b << " thread " << t;
}

TEST(EmuBarrier, CountAndOrBarriers) {
  std::vector<int> out(3, -1);
  Launch(1, 256).buffer(0, out).run(correctModule(), "barrierVotes");
  EXPECT_EQ(out[0], 86); // t % 3 == 0 for t in [0, 256)
  EXPECT_EQ(out[1], 1);
  EXPECT_EQ(out[2], 1);
}

TEST(EmuBarrier, ThreadLeavingBeforeABarrierIsAnErrorNotAHang) {
  std::string error = Launch(2, 64).error(correctModule(), "earlyExit");
  EXPECT_NE(error.find("earlyExit: block (0,0,0)"), std::string::npos) << error;
  EXPECT_NE(error.find("__syncthreads()"), std::string::npos) << error;
  EXPECT_NE(error.find("thread (0,0,0) has exited"), std::string::npos)
      << error;
}

TEST(EmuBarrier, ThreadsAtDifferentBarriersAreAnError) {
  std::string error = Launch(1, 64).error(correctModule(), "splitBarrier");
  EXPECT_NE(error.find("splitBarrier"), std::string::npos) << error;
  EXPECT_NE(error.find("must reach the same barrier"), std::string::npos)
      << error;
}

TEST(EmuBarrier, LaunchLimits) {
  std::vector<int> out(3);
  std::string error =
      Launch(1, 1025).buffer(0, out).error(correctModule(), "barrierVotes");
  EXPECT_NE(error.find("at most 1024"), std::string::npos) << error;
  error = Launch(1, 64)
              .buffer(0, out)
              .shared(300 * 1024)
              .error(correctModule(), "barrierVotes");
  EXPECT_NE(error.find("dynamic shared memory"), std::string::npos) << error;
  error = Launch(0, 64).buffer(0, out).error(correctModule(), "barrierVotes");
  EXPECT_NE(error.find("must be positive"), std::string::npos) << error;
}
