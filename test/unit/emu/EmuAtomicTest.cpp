//===- EmuAtomicTest.cpp - atomics and host-thread independence -----------===//

#include "EmuTestUtil.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace moec::emu;
using namespace moec::emu::test;

TEST(EmuAtomic, CountersAreExactWithParallelBlocks) {
  const int blocks = 64, threads = 256, total = blocks * threads;
  std::vector<int> ci(2, 0), mm = {0, 0, 0, 0};
  std::vector<uint64_t> cu(1, 0);
  std::vector<float> cf(1, 0.0f);
  std::vector<unsigned> cas(2, 0);
  std::vector<unsigned long long> cull(1, 0);
  std::vector<double> cd(1, 0.0);
  Launch(blocks, threads)
      .buffer(0, ci)
      .buffer(1, cu)
      .buffer(2, cf)
      .buffer(3, mm)
      .buffer(4, cas)
      .buffer(5, cull)
      .buffer(6, cd)
      .hostThreads(4)
      .run(correctModule(), "atomics");
  EXPECT_EQ(ci[0], total);
  EXPECT_EQ(ci[1], total * (total - 1) / 2);
  EXPECT_EQ(cu[0], uint64_t(total) << 33);
  EXPECT_EQ(cull[0], 3ull * total);
  EXPECT_EQ(cf[0], static_cast<float>(total));
  EXPECT_EQ(cd[0], 0.5 * total);
  EXPECT_EQ(mm[0], total - 1);
  EXPECT_EQ(mm[1], -(total - 1));
  EXPECT_EQ(mm[2], -2 * total);
  EXPECT_EQ(mm[3], 7);
  EXPECT_EQ(cas[0], 3u * total);
  EXPECT_EQ(cas[1], static_cast<unsigned>(total)); // shared-memory atomics
}

namespace {

/// lastBlockSum's result computed in its own order.
float lastBlockReference(const std::vector<float> &x, int blocks) {
  const int threads = 128, n = static_cast<int>(x.size());
  float total = 0.0f;
  for (int b = 0; b < blocks; ++b) {
    std::vector<float> s(threads, 0.0f);
    for (int t = 0; t < threads; ++t)
      for (int i = b * threads + t; i < n; i += threads * blocks)
        s[t] += x[i];
    for (int w = 64; w > 0; w >>= 1)
      for (int t = 0; t < w; ++t)
        s[t] += s[t + w];
    total += s[0];
  }
  return total;
}

} // namespace

TEST(EmuAtomic, LastBlockTicketReducesInAFixedOrder) {
  const int n = 50000, blocks = 13;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i)
    x[i] = std::sin(1.3f * i) + 0.001f * i;
  const float expected = lastBlockReference(x, blocks);
  for (unsigned hostThreads : {1u, 2u, 4u}) {
    for (int repeat = 0; repeat < 2; ++repeat) {
      std::vector<float> partials(blocks), out(1, 0.0f);
      std::vector<unsigned> ticket(1, 0);
      Launch(blocks, 128)
          .buffer(0, x)
          .buffer(1, partials)
          .buffer(2, ticket)
          .buffer(3, out)
          .scalar(0, n)
          .hostThreads(hostThreads)
          .run(correctModule(), "lastBlockSum");
      EXPECT_EQ(out[0], expected) << hostThreads << " host threads";
      EXPECT_EQ(ticket[0], 0u) << "the last block resets the ticket";
    }
  }
}

TEST(EmuAtomic, ResultsDoNotDependOnHostThreads) {
  const int n = 256, blocks = 9;
  std::vector<int> x(n * blocks);
  for (int i = 0; i < n * blocks; ++i)
    x[i] = (i * 7919) % 1000 - 500;
  std::vector<float> xf(n * blocks);
  for (int i = 0; i < n * blocks; ++i)
    xf[i] = std::cos(0.01f * i);
  std::vector<int> y1(n * blocks), y3(n * blocks);
  std::vector<float> s1(blocks), s3(blocks);
  Launch(blocks, n).buffer(0, x).buffer(1, y1).run(correctModule(),
                                                   "reverseShared");
  Launch(blocks, n).buffer(0, x).buffer(1, y3).hostThreads(3).run(
      correctModule(), "reverseShared");
  EXPECT_EQ(y1, y3);
  Launch(blocks, 256)
      .buffer(0, xf)
      .buffer(1, s1)
      .scalar(0, n * blocks)
      .run(correctModule(), "blockReduce");
  Launch(blocks, 256)
      .buffer(0, xf)
      .buffer(1, s3)
      .scalar(0, n * blocks)
      .hostThreads(3)
      .run(correctModule(), "blockReduce");
  EXPECT_EQ(s1, s3);
}

TEST(EmuAtomic, ErrorsDoNotDependOnHostThreads) {
  // Every block fails; the lowest one reports, as in a sequential run.
  std::string sequential = Launch(8, 64).error(correctModule(), "earlyExit");
  std::string parallel =
      Launch(8, 64).hostThreads(4).error(correctModule(), "earlyExit");
  EXPECT_FALSE(sequential.empty());
  EXPECT_EQ(sequential, parallel);
}
