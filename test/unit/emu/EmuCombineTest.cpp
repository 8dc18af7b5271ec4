//===- EmuCombineTest.cpp - experts.cuh's combine in emu ------------------===//
//
// expertCombine sums each token's kept expert rows in choice order. With a
// width that is a multiple of 4 and aligned rows it reads four columns per
// 16-byte load; otherwise one at a time. Both paths must give exactly the
// sums of the scalar loop, skip dropped choices, and stay inside the rows
// (the kernels run in checking mode).
//
//===----------------------------------------------------------------------===//

#include "EmuTestUtil.h"

#include <gtest/gtest.h>
#include <mutex>
#include <random>

using namespace moec::emu;
using namespace moec::emu::test;

namespace {

constexpr int kChoices = 2;

// Buffers: slot [T, K], rows [T * K, D] after `at` padding floats, y
// [T, D]; scalars: tokens, at.
const char *const kCombineKernels = R"cuda(
using moec::bufferArg;
using moec::scalarArg;

template <int D> __device__ void combineCase(const moec::KernelParams p) {
  const int64_t tokens = scalarArg(p, 0), at = scalarArg(p, 1);
  moec::gptr<float> y = bufferArg<float>(p, 2);
  moec::expertCombine<2, D>(tokens, bufferArg<const int32_t>(p, 0),
                            bufferArg<const float>(p, 1) + at,
                            [=](int64_t i, float v) { y[i] = v; });
}
extern "C" __global__ void combine8(const moec::KernelParams p) {
  combineCase<8>(p);
}
MOEC_EMU_EXPORT_KERNEL(combine8)
extern "C" __global__ void combine6(const moec::KernelParams p) {
  combineCase<6>(p);
}
MOEC_EMU_EXPORT_KERNEL(combine6)
)cuda";

const EmuModule &combineModule() {
  static std::once_flag once;
  static std::unique_ptr<EmuModule> module;
  std::call_once(once, [] {
    module = std::make_unique<EmuModule>(EmuModule::load(
        deviceHeaders() + deviceFile("experts.cuh") + kCombineKernels,
        "emu-combine-test", testOptions(true)));
  });
  return *module;
}

/// Runs the combine of width `d` over `tokens` tokens whose rows start
/// after `at` padding floats, and compares every output with the scalar
/// sum in choice order.
void expectCombine(int64_t tokens, int d, int64_t at, const char *kernel) {
  std::mt19937 rng(static_cast<unsigned>(tokens * 31 + d + at));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<int32_t> slot(static_cast<size_t>(tokens * kChoices));
  for (size_t a = 0; a < slot.size(); ++a)
    slot[a] = a % 5 == 3 ? -1 : static_cast<int32_t>(a % 7); // some dropped
  std::vector<float> rows(static_cast<size_t>(at + tokens * kChoices * d));
  for (float &x : rows)
    x = dist(rng);
  std::vector<float> y(static_cast<size_t>(tokens * d), 99.0f);
  // A grid smaller than the work, so that threads loop.
  Launch(2, 64)
      .buffer(0, slot)
      .buffer(1, rows)
      .buffer(2, y)
      .scalar(0, tokens)
      .scalar(1, at)
      .run(combineModule(), kernel);
  for (int64_t t = 0; t < tokens; ++t)
    for (int c = 0; c < d; ++c) {
      float want = 0.0f;
      for (int j = 0; j < kChoices; ++j)
        if (slot[t * kChoices + j] >= 0)
          want += rows[at + (t * kChoices + j) * d + c];
      ASSERT_EQ(y[t * d + c], want)
          << kernel << " token " << t << " column " << c << " offset " << at;
    }
}

} // namespace

TEST(EmuCombine, SixteenByteLoadsSumEveryKeptChoiceInOrder) {
  for (int64_t tokens : {1, 37, 300})
    expectCombine(tokens, 8, 0, "combine8");
}

TEST(EmuCombine, MisalignedRowsAndOddWidthsTakeScalarLoads) {
  for (int64_t tokens : {1, 37, 300}) {
    expectCombine(tokens, 8, 1, "combine8");
    expectCombine(tokens, 6, 0, "combine6");
  }
}
