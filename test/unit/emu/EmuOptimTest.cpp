//===- EmuOptimTest.cpp - optim.cuh's per-tensor updates in emu ----------===//
//
// adamUpdate, sgdUpdate and sumOfSquares take 16-byte accesses when every
// pointer is aligned and scalar ones otherwise. Both paths must compute
// each element as the scalar formula does, in place, with lengths that
// leave a tail after the last full vector; the kernels run in checking
// mode, so an access past a tensor's end fails the launch.
//
//===----------------------------------------------------------------------===//

#include "EmuTestUtil.h"

#include <cmath>
#include <gtest/gtest.h>
#include <mutex>
#include <random>

using namespace moec::emu;
using namespace moec::emu::test;

namespace {

// Buffers: param, grad, m, v (updated in place), squares (one double per
// thread); scalars: n, the element offset of every tensor (1 misaligns
// them all).
const char *const kOptimKernels = R"cuda(
using moec::bufferArg;
using moec::scalarArg;

extern "C" __global__ void adamTest(const moec::KernelParams p) {
  const int64_t n = scalarArg(p, 0), at = scalarArg(p, 1);
  const moec::AdamConfig c{0.01f, 0.5f,  0.9f, 0.98f, 1e-8f,
                           0.1f,  1.25f, 1.5f, true};
  moec::adamUpdate(bufferArg<const float>(p, 0) + at,
                   bufferArg<const float>(p, 1) + at,
                   bufferArg<const float>(p, 2) + at,
                   bufferArg<const float>(p, 3) + at,
                   bufferArg<float>(p, 0) + at, bufferArg<float>(p, 2) + at,
                   bufferArg<float>(p, 3) + at, n, c);
}
MOEC_EMU_EXPORT_KERNEL(adamTest)

extern "C" __global__ void sgdTest(const moec::KernelParams p) {
  const int64_t n = scalarArg(p, 0), at = scalarArg(p, 1);
  moec::sgdUpdate(bufferArg<const float>(p, 0) + at,
                  bufferArg<const float>(p, 1) + at,
                  bufferArg<const float>(p, 2) + at,
                  bufferArg<float>(p, 0) + at, bufferArg<float>(p, 2) + at, n,
                  0.05f, 0.5f, 0.9f, 0.01f);
}
MOEC_EMU_EXPORT_KERNEL(sgdTest)

extern "C" __global__ void squaresTest(const moec::KernelParams p) {
  const int64_t n = scalarArg(p, 0), at = scalarArg(p, 1);
  bufferArg<double>(p, 4)[blockIdx.x * blockDim.x + threadIdx.x] =
      moec::sumOfSquares(bufferArg<const float>(p, 1) + at, n);
}
MOEC_EMU_EXPORT_KERNEL(squaresTest)
)cuda";

const EmuModule &optimModule() {
  static std::once_flag once;
  static std::unique_ptr<EmuModule> module;
  std::call_once(once, [] {
    module = std::make_unique<EmuModule>(EmuModule::load(
        deviceHeaders() + deviceFile("optim.cuh") + kOptimKernels,
        "emu-optim-test", testOptions(true)));
  });
  return *module;
}

constexpr unsigned kGrid = 3, kBlock = 32;

struct Tensors {
  std::vector<float> param, grad, m, v;
  std::vector<double> squares;
};

/// Non-zero state for `n` elements after `at` padding elements; the
/// buffers end exactly at the last element.
Tensors randomTensors(int64_t n, int64_t at, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensors t;
  for (auto *x : {&t.param, &t.grad, &t.m, &t.v}) {
    x->resize(static_cast<size_t>(n + at));
    for (float &e : *x)
      e = dist(rng);
  }
  for (float &e : t.v)
    e = std::fabs(e);
  t.squares.assign(kGrid * kBlock, -1.0);
  return t;
}

void run(Tensors &t, int64_t n, int64_t at, const char *kernel) {
  Launch(kGrid, kBlock)
      .buffer(0, t.param)
      .buffer(1, t.grad)
      .buffer(2, t.m)
      .buffer(3, t.v)
      .buffer(4, t.squares)
      .scalar(0, n)
      .scalar(1, at)
      .run(optimModule(), kernel);
}

// The lengths: less than one vector, a multiple of 4, a tail of 3, and
// more elements than the launch has threads (each thread loops).
const int64_t kLengths[] = {3, 64, 387, 1000};

} // namespace

TEST(EmuOptim, AdamUpdatesEveryElementAsTheScalarStep) {
  for (int64_t n : kLengths)
    for (int64_t at : {0, 1}) {
      Tensors t = randomTensors(n, at, 7 + static_cast<unsigned>(n));
      Tensors want = t;
      for (int64_t i = at; i < n + at; ++i) {
        // adamStep's arithmetic, written out.
        float g = want.grad[i] * 0.5f;
        float m = 0.9f * want.m[i] + (1.0f - 0.9f) * g;
        float v = 0.98f * want.v[i] + (1.0f - 0.98f) * g * g;
        float p = want.param[i];
        float next = p - 0.01f * (m * 1.25f) / (std::sqrt(v * 1.5f) + 1e-8f);
        want.param[i] = next - 0.01f * 0.1f * p;
        want.m[i] = m;
        want.v[i] = v;
      }
      run(t, n, at, "adamTest");
      for (int64_t i = 0; i < n + at; ++i) {
        SCOPED_TRACE(testing::Message()
                     << "n " << n << " offset " << at << " element " << i);
        EXPECT_NEAR(t.param[i], want.param[i], 1e-6f);
        EXPECT_NEAR(t.m[i], want.m[i], 1e-6f);
        EXPECT_NEAR(t.v[i], want.v[i], 1e-6f);
      }
      EXPECT_EQ(t.grad, want.grad);
    }
}

TEST(EmuOptim, AlignedAndMisalignedTensorsGiveTheSameBits) {
  const int64_t n = 387;
  Tensors aligned = randomTensors(n, 0, 3), shifted;
  shifted = aligned;
  for (auto *x : {&shifted.param, &shifted.grad, &shifted.m, &shifted.v})
    x->insert(x->begin(), 2.0f);
  run(aligned, n, 0, "adamTest");
  run(shifted, n, 1, "adamTest");
  EXPECT_EQ(std::vector<float>(shifted.param.begin() + 1, shifted.param.end()),
            aligned.param);
  EXPECT_EQ(std::vector<float>(shifted.v.begin() + 1, shifted.v.end()),
            aligned.v);
  EXPECT_EQ(shifted.param[0], 2.0f); // the padding is not touched
}

TEST(EmuOptim, SgdWithMomentumUpdatesEveryElement) {
  for (int64_t n : kLengths)
    for (int64_t at : {0, 1}) {
      Tensors t = randomTensors(n, at, 11 + static_cast<unsigned>(n));
      Tensors want = t;
      for (int64_t i = at; i < n + at; ++i) {
        float g = want.grad[i] * 0.5f + 0.01f * want.param[i];
        want.m[i] = 0.9f * want.m[i] + g;
        want.param[i] = want.param[i] - 0.05f * want.m[i];
      }
      run(t, n, at, "sgdTest");
      for (int64_t i = 0; i < n + at; ++i) {
        SCOPED_TRACE(testing::Message()
                     << "n " << n << " offset " << at << " element " << i);
        EXPECT_NEAR(t.param[i], want.param[i], 1e-6f);
        EXPECT_NEAR(t.m[i], want.m[i], 1e-6f);
      }
    }
}

TEST(EmuOptim, SumOfSquaresCoversEveryElementOnce) {
  for (int64_t n : kLengths)
    for (int64_t at : {0, 1}) {
      Tensors t = randomTensors(n, at, 5 + static_cast<unsigned>(n));
      double want = 0.0;
      for (int64_t i = at; i < n + at; ++i)
        want += static_cast<double>(t.grad[i]) * t.grad[i];
      run(t, n, at, "squaresTest");
      double got = 0.0;
      for (double s : t.squares)
        got += s;
      EXPECT_NEAR(got, want, 1e-12 * want) << "n " << n << " offset " << at;
    }
}
