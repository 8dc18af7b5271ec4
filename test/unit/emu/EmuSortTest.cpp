//===- EmuSortTest.cpp - the device library's counting sort in emu --------===//
//
// Runs sort.cuh's four phases on the emu device and compares the order with
// std::stable_sort and the offsets with a histogram, for few and many keys
// and for inputs spanning many chunks of every tile.
//
//===----------------------------------------------------------------------===//

#include "EmuTestUtil.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <mutex>
#include <random>

using namespace moec::emu;
using namespace moec::emu::test;

namespace {

constexpr int kTiles = 8, kThreads = 64;

// Buffers: keys, counts, rank, offsets, blockTotals, order; scalars: n,
// numKeys.
const char *const kSortKernels = R"cuda(
using moec::bufferArg;
using moec::gptr;
using moec::scalarArg;
constexpr int kTiles = 8, kThreads = 64;

extern "C" __global__ void sortRankTest(const moec::KernelParams p) {
  moec::sortRank<kTiles, kThreads>(scalarArg(p, 0), scalarArg(p, 1),
                                   bufferArg<const int32_t>(p, 0),
                                   bufferArg<int32_t>(p, 1),
                                   bufferArg<int32_t>(p, 2));
}
MOEC_EMU_EXPORT_KERNEL(sortRankTest)

extern "C" __global__ void sortCountTest(const moec::KernelParams p) {
  moec::sortCount<kTiles, kThreads>(scalarArg(p, 1), bufferArg<int32_t>(p, 1),
                                    bufferArg<int32_t>(p, 3),
                                    bufferArg<int32_t>(p, 4));
}
MOEC_EMU_EXPORT_KERNEL(sortCountTest)

extern "C" __global__ void sortOffsetsTest(const moec::KernelParams p) {
  moec::sortOffsets<kThreads>(scalarArg(p, 1), bufferArg<const int32_t>(p, 4),
                              bufferArg<int32_t>(p, 3));
}
MOEC_EMU_EXPORT_KERNEL(sortOffsetsTest)

extern "C" __global__ void sortScatterTest(const moec::KernelParams p) {
  moec::sortScatter<kTiles, kThreads>(
      scalarArg(p, 0), scalarArg(p, 1), bufferArg<const int32_t>(p, 0),
      bufferArg<const int32_t>(p, 1), bufferArg<const int32_t>(p, 2),
      bufferArg<const int32_t>(p, 3), bufferArg<int32_t>(p, 5));
}
MOEC_EMU_EXPORT_KERNEL(sortScatterTest)

// The embedding gradient both ways, d = 40 (buffers: keys 0, offsets 3,
// order 5, dy 6, out 7): every token scanned per id, as before the sort,
// and the run of the id's tokens in the sorted order.
extern "C" __global__ void scanAllTokens(const moec::KernelParams p) {
  const int64_t T = scalarArg(p, 0), v = blockIdx.x;
  gptr<const int32_t> ids = bufferArg<const int32_t>(p, 0);
  gptr<const float> dy = bufferArg<const float>(p, 6);
  gptr<float> out = bufferArg<float>(p, 7);
  for (int64_t c = threadIdx.x; c < 40; c += blockDim.x) {
    float sum = 0.0f;
    for (int64_t t = 0; t < T; ++t)
      if (ids[t] == v) sum += dy[t * 40 + c];
    out[v * 40 + c] = sum;
  }
}
MOEC_EMU_EXPORT_KERNEL(scanAllTokens)

extern "C" __global__ void sumSortedRuns(const moec::KernelParams p) {
  gptr<const int32_t> offsets = bufferArg<const int32_t>(p, 3);
  gptr<const int32_t> order = bufferArg<const int32_t>(p, 5);
  gptr<const float> dy = bufferArg<const float>(p, 6);
  gptr<float> out = bufferArg<float>(p, 7);
  const int64_t v = blockIdx.x;
  const int32_t begin = offsets[v], end = offsets[v + 1];
  for (int64_t c = threadIdx.x; c < 40; c += blockDim.x) {
    float sum = 0.0f;
    for (int32_t k = begin; k < end; ++k)
      sum += dy[static_cast<int64_t>(order[k]) * 40 + c];
    out[v * 40 + c] = sum;
  }
}
MOEC_EMU_EXPORT_KERNEL(sumSortedRuns)
)cuda";

const EmuModule &sortModule() {
  static std::once_flag once;
  static std::unique_ptr<EmuModule> module;
  std::call_once(once, [] {
    module = std::make_unique<EmuModule>(
        EmuModule::load(deviceHeaders() + deviceFile("scan.cuh") +
                            deviceFile("sort.cuh") + kSortKernels,
                        "emu-sort-test", testOptions(false)));
  });
  return *module;
}

unsigned blocks(int64_t n) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, (n + kThreads - 1) / kThreads));
}

struct Sorted {
  std::vector<int32_t> order, offsets;
  /// The sort's buffers as the device left them.
  std::vector<int32_t> deviceOrder, deviceOffsets;
};

Sorted deviceSort(std::vector<int32_t> keys, int64_t numKeys) {
  const int64_t n = static_cast<int64_t>(keys.size());
  // Garbage everywhere: every phase must write what the next reads.
  std::vector<int32_t> counts(kTiles * numKeys, 12345), rank(n, 777),
      offsets(numKeys + 1, -9), totals(blocks(numKeys), 4242), order(n, -1);
  auto launch = [&](unsigned grid) {
    Launch l(grid, kThreads);
    l.buffer(0, keys)
        .buffer(1, counts)
        .buffer(2, rank)
        .buffer(3, offsets)
        .buffer(4, totals)
        .buffer(5, order)
        .scalar(0, n)
        .scalar(1, numKeys);
    return l;
  };
  launch(kTiles).run(sortModule(), "sortRankTest");
  launch(blocks(numKeys)).run(sortModule(), "sortCountTest");
  launch(blocks(numKeys)).run(sortModule(), "sortOffsetsTest");
  launch(blocks(n)).run(sortModule(), "sortScatterTest");
  Sorted s{order, offsets, order, offsets};
  int64_t valid = offsets[numKeys];
  if (valid >= 0 && valid <= n)
    s.order.resize(static_cast<size_t>(valid));
  return s;
}

/// What the device must produce: indices of in-range keys, stably sorted.
Sorted hostSort(const std::vector<int32_t> &keys, int64_t numKeys) {
  Sorted s;
  for (int32_t i = 0; i < static_cast<int32_t>(keys.size()); ++i)
    if (keys[i] >= 0 && keys[i] < numKeys)
      s.order.push_back(i);
  std::stable_sort(s.order.begin(), s.order.end(),
                   [&](int32_t a, int32_t b) { return keys[a] < keys[b]; });
  s.offsets.assign(numKeys + 1, 0);
  for (int32_t i : s.order)
    ++s.offsets[keys[i] + 1];
  for (int64_t k = 0; k < numKeys; ++k)
    s.offsets[k + 1] += s.offsets[k];
  return s;
}

void expectSorted(const std::vector<int32_t> &keys, int64_t numKeys) {
  Sorted want = hostSort(keys, numKeys), got = deviceSort(keys, numKeys);
  ASSERT_EQ(got.offsets, want.offsets)
      << "n = " << keys.size() << ", keys = " << numKeys;
  ASSERT_EQ(got.order, want.order)
      << "n = " << keys.size() << ", keys = " << numKeys;
}

std::vector<int32_t> randomKeys(int64_t n, int64_t numKeys, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> dist(0, numKeys - 1);
  std::vector<int32_t> keys(n);
  for (int32_t &k : keys)
    k = static_cast<int32_t>(dist(rng));
  return keys;
}

} // namespace

TEST(EmuSort, FewKeysIsStable) {
  for (int64_t n : {1, 2, 7, 63, 64, 65, 500, 513, 3001})
    expectSorted(randomKeys(n, 3, static_cast<unsigned>(n)), 3);
}

TEST(EmuSort, ManyKeysIsStable) {
  for (int64_t n : {1, 100, 1025, 2500})
    expectSorted(randomKeys(n, 70000, static_cast<unsigned>(n) + 1), 70000);
}

TEST(EmuSort, RepeatedKeysWithinAndAcrossTiles) {
  // Runs of one key longer than a chunk and a tile, then a few keys.
  std::vector<int32_t> keys(1500, 5);
  for (int i = 900; i < 1500; ++i)
    keys[i] = i % 4 == 0 ? 5 : i % 7;
  expectSorted(keys, 7);
}

TEST(EmuSort, KeysOutOfRangeAreLeftOut) {
  std::vector<int32_t> keys = randomKeys(700, 10, 99);
  for (int i = 0; i < 700; i += 9)
    keys[i] = i % 2 == 0 ? -1 - i : 10 + i;
  expectSorted(keys, 10);
}

TEST(EmuSort, EmbeddingGradientMatchesTheScanOfAllTokensBitForBit) {
  // The sorted runs add each id's rows in token order, as the scan did, so
  // the fp32 sums agree exactly, whatever the magnitudes.
  const int64_t T = 1800, vocab = 50, d = 40;
  std::vector<int32_t> ids = randomKeys(T, vocab + 3, 7);
  ids[5] = -2; // out of range both ways: in no sum
  Sorted sorted = deviceSort(ids, vocab);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<float> dy(T * d);
  for (float &x : dy)
    x = std::ldexp(mantissa(rng), exponent(rng));
  std::vector<float> scanned(vocab * d, -1.0f), summed(vocab * d, -2.0f);
  auto launch = [&](std::vector<float> &out) {
    Launch l(static_cast<unsigned>(vocab), 32);
    l.buffer(0, ids)
        .buffer(3, sorted.deviceOffsets)
        .buffer(5, sorted.deviceOrder)
        .buffer(6, dy)
        .buffer(7, out)
        .scalar(0, T);
    return l;
  };
  launch(scanned).run(sortModule(), "scanAllTokens");
  launch(summed).run(sortModule(), "sumSortedRuns");
  ASSERT_EQ(std::memcmp(scanned.data(), summed.data(),
                        scanned.size() * sizeof(float)),
            0);
}
