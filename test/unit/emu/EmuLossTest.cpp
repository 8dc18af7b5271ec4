//===- EmuLossTest.cpp - losses.cuh's cross-entropy in emu ----------------===//
//
// crossEntropyForward over rows of logits, one block a row, through the
// 16-byte path (V a multiple of 4) and the scalar one: the mean loss, the
// counted targets and the targets at the first index of the row's largest
// logit, against a double-precision reference of the same logits. Ties
// are placed where the thread holding the lower index is not the lower
// thread, one row has masked (-inf) logits, and the kernels run in
// checking mode.
//
//===----------------------------------------------------------------------===//

#include "EmuTestUtil.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <gtest/gtest.h>
#include <limits>
#include <mutex>
#include <random>

using namespace moec::emu;
using namespace moec::emu::test;

namespace {

// Buffers: logits, targets, rowLoss, rowHit, loss, count, correct, ticket;
// scalar: rows.
const char *const kLossKernels = R"cuda(
template <int V, int THREADS> __device__ void forwardCase(const moec::KernelParams p) {
  using moec::bufferArg;
  moec::crossEntropyForward<V, THREADS>(
      moec::scalarArg(p, 0), 0.0f, bufferArg<const float>(p, 0),
      bufferArg<const int32_t>(p, 1), bufferArg<float>(p, 2),
      bufferArg<float>(p, 3), bufferArg<float>(p, 4), bufferArg<float>(p, 5),
      bufferArg<float>(p, 6), bufferArg<unsigned>(p, 7));
}

#define CROSS_ENTROPY_KERNEL(V, THREADS, NAME)                                 \
  extern "C" __global__ void NAME(const moec::KernelParams p) {                \
    forwardCase<V, THREADS>(p);                                                \
  }                                                                            \
  MOEC_EMU_EXPORT_KERNEL(NAME)

CROSS_ENTROPY_KERNEL(1024, 64, ce_vector)
CROSS_ENTROPY_KERNEL(250, 64, ce_scalar)
)cuda";

const EmuModule &lossModule() {
  static std::once_flag once;
  static std::unique_ptr<EmuModule> module;
  std::call_once(once, [] {
    module = std::make_unique<EmuModule>(
        EmuModule::load(deviceHeaders() + deviceFile("reduce.cuh") +
                            deviceFile("losses.cuh") + kLossKernels,
                        "emu-loss-test", testOptions(true)));
  });
  return *module;
}

/// The first index of the largest value above -3e38, else 0.
int firstLargest(const float *row, int vocab) {
  int first = 0;
  float largest = -3.0e38f;
  for (int v = 0; v < vocab; ++v)
    if (row[v] > largest) {
      largest = row[v];
      first = v;
    }
  return first;
}

/// Runs `kernel` on random rows of `vocab` logits with ties at `low` and
/// `high` in every row but the last two (the row's largest value, so the
/// first index is `low`), in row 2 also at `later` (which `low`'s thread
/// reads after `low`), and an all -inf last row; checks loss, count and
/// correct.
void expectCrossEntropy(const char *kernel, int vocab, int threads, int low,
                        int high, int later) {
  SCOPED_TRACE(kernel);
  const int rows = 9;
  std::mt19937 rng(static_cast<unsigned>(vocab));
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> logits(static_cast<size_t>(rows) * vocab);
  for (float &x : logits)
    x = dist(rng);
  for (int r = 0; r < rows - 2; ++r) {
    logits[r * vocab + low] = 40.0f;
    logits[r * vocab + high] = 40.0f;
  }
  logits[2 * vocab + later] = 40.0f;
  // Row 7 has no tie: its largest value is random, and every fifth logit
  // is masked (-inf), which leaves its loss finite. Row 8 is all -inf.
  for (int v = 1; v < vocab; v += 5)
    logits[7 * vocab + v] = -std::numeric_limits<float>::infinity();
  for (int v = 0; v < vocab; ++v)
    logits[(rows - 1) * vocab + v] = -std::numeric_limits<float>::infinity();
  // Hits at the lower tie, misses at the upper one, an ignored row, the
  // untied row's own first largest index, and index 0 of the -inf row.
  std::vector<int32_t> targets{low, high, low, -1, low, high, low, 0, 0};
  targets[7] = firstLargest(&logits[7 * vocab], vocab);
  std::vector<float> rowLoss(rows, 99.0f), rowHit(rows, 99.0f);
  std::vector<float> loss{99.0f}, count{99.0f}, correct{99.0f};
  std::vector<unsigned> ticket{0};
  Launch launch(rows, static_cast<unsigned>(threads));
  launch.buffer(0, logits)
      .buffer(1, targets)
      .buffer(2, rowLoss)
      .buffer(3, rowHit)
      .buffer(4, loss)
      .buffer(5, count)
      .buffer(6, correct)
      .buffer(7, ticket)
      .scalar(0, rows);
  launch.run(lossModule(), kernel);

  int64_t counted = 0, hits = 0;
  for (int r = 0; r < rows; ++r) {
    if (targets[r] < 0)
      continue;
    ++counted;
    hits += firstLargest(&logits[r * vocab], vocab) == targets[r];
  }
  EXPECT_EQ(counted, 8);
  EXPECT_EQ(hits, 6); // rows 0, 2, 4, 6, 7 and 8
  EXPECT_EQ(count[0], static_cast<float>(counted));
  EXPECT_EQ(correct[0], static_cast<float>(hits));
  EXPECT_EQ(ticket[0], 0u) << "the ticket is left zero for the next launch";
  // The -inf row makes the mean loss NaN; the rows before it are finite.
  EXPECT_TRUE(std::isnan(loss[0]));
  for (int r = 0; r < rows - 1; ++r) {
    if (targets[r] < 0)
      continue;
    const float *row = &logits[r * vocab];
    double largest = *std::max_element(row, row + vocab), sum = 0;
    for (int v = 0; v < vocab; ++v)
      sum += std::exp(double(row[v]) - largest);
    double want = largest + std::log(sum) - row[targets[r]];
    ASSERT_TRUE(std::isfinite(want)) << "row " << r;
    EXPECT_NEAR(rowLoss[r], want, 1e-5 * (1 + std::abs(want))) << "row " << r;
  }
}

TEST(EmuLoss, CrossEntropyCountsTheFirstLargestLogitThroughQuads) {
  // 64 threads read quads t, t + 64, ...: index 132 (quad 33) is thread
  // 33's, in the second warp, and index 276 (quad 69) thread 5's, in the
  // first, so the lower thread holds the higher index; index 388 (quad 97)
  // is thread 33's again, read after 132.
  expectCrossEntropy("ce_vector", 1024, 64, 132, 276, 388);
}

TEST(EmuLoss, CrossEntropyCountsTheFirstLargestLogitOneByOne) {
  // 64 threads read values t, t + 64, ...: index 40 is thread 40's, index
  // 66 thread 2's, index 168 thread 40's again.
  expectCrossEntropy("ce_scalar", 250, 64, 40, 66, 168);
}

} // namespace
