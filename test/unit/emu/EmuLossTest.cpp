//===- EmuLossTest.cpp - losses.cuh's cross-entropy in emu ----------------===//
//
// crossEntropyForward and crossEntropyBackward over rows of logits, one
// block a row, through the 16-byte path (V a multiple of 4) and the scalar
// one, with label smoothing 0 and 0.1: the mean loss, the counted targets,
// the targets at the first index of the row's largest logit, and the
// gradient, against a double-precision reference of the same logits. Ties
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
#include <string>

using namespace moec::emu;
using namespace moec::emu::test;

namespace {

// Forward buffers: logits, targets, rowLoss, rowHit, loss, count, correct,
// ticket; scalars: rows, smoothing in thousandths. Backward buffers:
// logits, targets, dloss, count, dlogits; scalar: smoothing in thousandths.
const char *const kLossKernels = R"cuda(
__device__ float smoothingArg(const moec::KernelParams &p, int i) {
  return static_cast<float>(moec::scalarArg(p, i)) / 1000.0f;
}

template <int V, int THREADS> __device__ void forwardCase(const moec::KernelParams p) {
  using moec::bufferArg;
  moec::crossEntropyForward<V, THREADS>(
      moec::scalarArg(p, 0), smoothingArg(p, 1), bufferArg<const float>(p, 0),
      bufferArg<const int32_t>(p, 1), bufferArg<float>(p, 2),
      bufferArg<float>(p, 3), bufferArg<float>(p, 4), bufferArg<float>(p, 5),
      bufferArg<float>(p, 6), bufferArg<unsigned>(p, 7));
}

template <int V, int THREADS> __device__ void backwardCase(const moec::KernelParams p) {
  using moec::bufferArg;
  moec::crossEntropyBackward<V, THREADS>(
      smoothingArg(p, 0), bufferArg<const float>(p, 0),
      bufferArg<const int32_t>(p, 1), bufferArg<const float>(p, 2),
      bufferArg<const float>(p, 3), bufferArg<float>(p, 4));
}

#define CROSS_ENTROPY_KERNELS(V, THREADS, NAME)                                \
  extern "C" __global__ void NAME(const moec::KernelParams p) {                \
    forwardCase<V, THREADS>(p);                                                \
  }                                                                            \
  MOEC_EMU_EXPORT_KERNEL(NAME)                                                 \
  extern "C" __global__ void NAME##_grad(const moec::KernelParams p) {         \
    backwardCase<V, THREADS>(p);                                               \
  }                                                                            \
  MOEC_EMU_EXPORT_KERNEL(NAME##_grad)

CROSS_ENTROPY_KERNELS(1024, 64, ce_vector)
CROSS_ENTROPY_KERNELS(250, 64, ce_scalar)
)cuda";

const EmuModule &lossModule() {
  static std::once_flag once;
  static std::unique_ptr<EmuModule> module;
  std::call_once(once, [] {
    module = std::make_unique<EmuModule>(EmuModule::load(
        deviceHeaders() + deviceFile("losses.cuh") + kLossKernels,
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

/// Random rows of `vocab` logits with ties at `low` and `high` in every
/// row but the last two (the row's largest value, so the first index is
/// `low`), in row 2 also at `later` (which `low`'s thread reads after
/// `low`), every fifth logit masked (-inf) in row kMaskedRow, and an all
/// -inf last row; targets hit the lower tie, miss the upper one, skip row 3,
/// and in the masked row take the row's own first largest index.
struct LossRows {
  static constexpr int kRows = 9, kMaskedRow = 7;
  int vocab;
  std::vector<float> logits;
  std::vector<int32_t> targets;

  LossRows(int vocab, int low, int high, int later)
      : vocab(vocab), logits(static_cast<size_t>(kRows) * vocab) {
    std::mt19937 rng(static_cast<unsigned>(vocab));
    std::normal_distribution<float> dist(0.0f, 2.0f);
    for (float &x : logits)
      x = dist(rng);
    for (int r = 0; r < kRows - 2; ++r) {
      logits[r * vocab + low] = 40.0f;
      logits[r * vocab + high] = 40.0f;
    }
    logits[2 * vocab + later] = 40.0f;
    const float inf = std::numeric_limits<float>::infinity();
    for (int v = 1; v < vocab; v += 5)
      logits[kMaskedRow * vocab + v] = -inf;
    for (int v = 0; v < vocab; ++v)
      logits[(kRows - 1) * vocab + v] = -inf;
    targets = {low, high, low, -1, low, high, low, 0, 0};
    targets[kMaskedRow] = firstLargest(row(kMaskedRow), vocab);
  }

  const float *row(int r) const { return &logits[r * vocab]; }

  /// log sum_v exp(logit v) in double.
  double logSumExp(int r) const {
    const float *x = row(r);
    double largest = *std::max_element(x, x + vocab), sum = 0;
    for (int v = 0; v < vocab; ++v)
      sum += std::exp(double(x[v]) - largest);
    return largest + std::log(sum);
  }

  /// (1 - a) (-log p_target) + a mean_v (-log p_v); without smoothing only
  /// the first term, so a masked row stays finite.
  double rowLoss(int r, double a) const {
    double lse = logSumExp(r), nll = lse - row(r)[targets[r]];
    if (a == 0.0)
      return nll;
    double mean = 0;
    for (int v = 0; v < vocab; ++v)
      mean += lse - row(r)[v];
    return (1 - a) * nll + a * mean / vocab;
  }
};

/// The forward `kernel` with smoothing `a`: loss, count and correct.
void expectForward(const char *kernel, const LossRows &rows, int threads,
                   double a) {
  const int n = LossRows::kRows;
  std::vector<float> logits = rows.logits;
  std::vector<int32_t> targets = rows.targets;
  std::vector<float> rowLoss(n, 99.0f), rowHit(n, 99.0f);
  std::vector<float> loss{99.0f}, count{99.0f}, correct{99.0f};
  std::vector<unsigned> ticket{0};
  Launch launch(n, static_cast<unsigned>(threads));
  launch.buffer(0, logits)
      .buffer(1, targets)
      .buffer(2, rowLoss)
      .buffer(3, rowHit)
      .buffer(4, loss)
      .buffer(5, count)
      .buffer(6, correct)
      .buffer(7, ticket)
      .scalar(0, n)
      .scalar(1, std::lround(a * 1000));
  launch.run(lossModule(), kernel);

  int64_t counted = 0, hits = 0;
  for (int r = 0; r < n; ++r) {
    if (targets[r] < 0)
      continue;
    ++counted;
    hits += firstLargest(rows.row(r), rows.vocab) == targets[r];
  }
  EXPECT_EQ(counted, 8);
  EXPECT_EQ(hits, 6); // rows 0, 2, 4, 6, 7 and 8
  EXPECT_EQ(count[0], static_cast<float>(counted));
  EXPECT_EQ(correct[0], static_cast<float>(hits));
  EXPECT_EQ(ticket[0], 0u) << "the ticket is left zero for the next launch";
  // The -inf row makes the mean loss NaN; the rows before it are finite,
  // but for the masked row with smoothing, which puts mass on -inf.
  EXPECT_TRUE(std::isnan(loss[0]));
  for (int r = 0; r < n - 1; ++r) {
    if (targets[r] < 0)
      continue;
    if (r == LossRows::kMaskedRow && a > 0) {
      EXPECT_EQ(rowLoss[r], std::numeric_limits<float>::infinity());
      continue;
    }
    double want = rows.rowLoss(r, a);
    ASSERT_TRUE(std::isfinite(want)) << "row " << r;
    EXPECT_NEAR(rowLoss[r], want, 1e-5 * (1 + std::abs(want))) << "row " << r;
  }
}

/// The backward `kernel` with smoothing `a` and dloss 2 over 8 counted
/// rows: dloss / 8 (softmax - a / V - (1 - a) onehot), 0 on the ignored
/// row, finite on the masked row, and NaN on the all -inf row (softmax
/// has no value there), as on the cpu.
void expectBackward(const char *kernel, const LossRows &rows, int threads,
                    double a) {
  const int n = LossRows::kRows, vocab = rows.vocab;
  std::vector<float> logits = rows.logits;
  std::vector<int32_t> targets = rows.targets;
  std::vector<float> dloss{2.0f}, count{8.0f};
  std::vector<float> dlogits(logits.size(), 99.0f);
  Launch launch(n, static_cast<unsigned>(threads));
  launch.buffer(0, logits)
      .buffer(1, targets)
      .buffer(2, dloss)
      .buffer(3, count)
      .buffer(4, dlogits)
      .scalar(0, std::lround(a * 1000));
  launch.run(lossModule(), kernel);

  const double scale = 2.0 / 8;
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    const float *got = &dlogits[r * vocab];
    if (targets[r] < 0) {
      EXPECT_EQ(*std::max_element(got, got + vocab), 0.0f);
      EXPECT_EQ(*std::min_element(got, got + vocab), 0.0f);
      continue;
    }
    if (r == n - 1) {
      EXPECT_TRUE(
          std::all_of(got, got + vocab, [](float g) { return std::isnan(g); }));
      continue;
    }
    double lse = rows.logSumExp(r);
    for (int v = 0; v < vocab; ++v) {
      double want = std::exp(double(rows.row(r)[v]) - lse) - a / vocab;
      if (v == targets[r])
        want -= 1 - a;
      ASSERT_NEAR(got[v], scale * want, 1e-6 * scale) << "logit " << v;
    }
  }
}

/// The forward and backward `kernel`s on LossRows(vocab, low, high, later),
/// without and with label smoothing.
void expectCrossEntropy(const char *kernel, int vocab, int threads, int low,
                        int high, int later) {
  const LossRows rows(vocab, low, high, later);
  const std::string grad = std::string(kernel) + "_grad";
  for (double a : {0.0, 0.1}) {
    SCOPED_TRACE(std::string(kernel) + ", smoothing " + std::to_string(a));
    expectForward(kernel, rows, threads, a);
    expectBackward(grad.c_str(), rows, threads, a);
  }
}

TEST(EmuLoss, CrossEntropyForwardAndBackwardThroughQuads) {
  // 64 threads read quads t, t + 64, ...: index 132 (quad 33) is thread
  // 33's, in the second warp, and index 276 (quad 69) thread 5's, in the
  // first, so the lower thread holds the higher index; index 388 (quad 97)
  // is thread 33's again, read after 132.
  expectCrossEntropy("ce_vector", 1024, 64, 132, 276, 388);
}

TEST(EmuLoss, CrossEntropyForwardAndBackwardOneByOne) {
  // 64 threads read values t, t + 64, ...: index 40 is thread 40's, index
  // 66 thread 2's, index 168 thread 40's again.
  expectCrossEntropy("ce_scalar", 250, 64, 40, 66, 168);
}

} // namespace
