//===- EmuNormTest.cpp - norm.cuh's rows in emu ---------------------------===//
//
// Layer and RMS norms and their row gradients, forward through normRows4
// (16-byte accesses) when the buffers are aligned and normRows otherwise,
// the gradient choosing for itself. Both paths must match a double-precision
// reference and stay inside the rows (the kernels run in checking mode).
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

constexpr float kEps = 1e-5f;

// Buffers: x, gamma, beta, y (forward) or dy, dx, contrib (gradient), the
// rows after `at` padding floats; scalars: rows, at.
const char *const kNormKernels = R"cuda(
using moec::bufferArg;
using moec::scalarArg;

template <int D, bool Rms> __device__ void forwardCase(const moec::KernelParams p) {
  const int64_t rows = scalarArg(p, 0), at = scalarArg(p, 1);
  const moec::gptr<const float> x = bufferArg<const float>(p, 0) + at;
  const moec::gptr<const float> gamma = bufferArg<const float>(p, 1);
  const moec::gptr<const float> beta = bufferArg<const float>(p, 2);
  const moec::gptr<float> y = bufferArg<float>(p, 3) + at;
  if constexpr (D % 4 == 0) {
    if (moec::aligned16(x, y)) {
      moec::normRows4<D, Rms, 2, float>(
          rows, 1e-5f,
          [=](int64_t r, int64_t q) { return moec::load4(x, r * (D / 4) + q); },
          gamma, beta,
          [=](int64_t r, int64_t q, float4 v) {
            moec::store4(y, r * (D / 4) + q, v);
          });
      return;
    }
  }
  moec::normRows<D, Rms, 2, float>(
        rows, 1e-5f, [=](int64_t r, int64_t c) { return x[r * D + c]; },
        gamma, beta, [=](int64_t r, int64_t c, float v) { y[r * D + c] = v; });
}

template <int D, bool Rms> __device__ void gradCase(const moec::KernelParams p) {
  const int64_t rows = scalarArg(p, 0), at = scalarArg(p, 1);
  moec::normGradRows<D, Rms, 2, float>(
      rows, 1e-5f, bufferArg<const float>(p, 0) + at,
      bufferArg<const float>(p, 1), bufferArg<const float>(p, 2) + at,
      bufferArg<float>(p, 3) + at, bufferArg<float>(p, 4) + at);
}

#define NORM_KERNELS(D, RMS, NAME)                                             \
  extern "C" __global__ void NAME(const moec::KernelParams p) {                \
    forwardCase<D, RMS>(p);                                                    \
  }                                                                            \
  MOEC_EMU_EXPORT_KERNEL(NAME)                                                 \
  extern "C" __global__ void NAME##_grad(const moec::KernelParams p) {         \
    gradCase<D, RMS>(p);                                                       \
  }                                                                            \
  MOEC_EMU_EXPORT_KERNEL(NAME##_grad)

NORM_KERNELS(160, false, layer160)
NORM_KERNELS(160, true, rms160)
NORM_KERNELS(12, false, layer12)
NORM_KERNELS(10, false, layer10)
)cuda";

const EmuModule &normModule() {
  static std::once_flag once;
  static std::unique_ptr<EmuModule> module;
  std::call_once(once, [] {
    module = std::make_unique<EmuModule>(
        EmuModule::load(deviceHeaders() + deviceFile("reduce.cuh") +
                            deviceFile("vector.cuh") + deviceFile("norm.cuh") +
                            kNormKernels,
                        "emu-norm-test", testOptions(true)));
  });
  return *module;
}

std::vector<float> randomValues(size_t n, unsigned seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// Runs kernel `name` (forward) and `name`_grad over `rows` rows of width
/// d placed `at` floats into their buffers and compares both with the
/// norm and its gradient in double.
void expectNorm(const char *name, int64_t d, bool rms, int64_t rows,
                int64_t at) {
  SCOPED_TRACE(testing::Message() << name << " rows " << rows << " at " << at);
  const size_t n = static_cast<size_t>(at + rows * d);
  unsigned seed = static_cast<unsigned>(rows * 7 + d + at);
  std::vector<float> x = randomValues(n, seed, -2.0f, 3.0f);
  std::vector<float> dy = randomValues(n, seed + 1, -1.0f, 1.0f);
  std::vector<float> gamma = randomValues(size_t(d), seed + 2, 0.5f, 1.5f);
  std::vector<float> beta = randomValues(size_t(d), seed + 3, -0.5f, 0.5f);
  std::vector<float> y(n, 99.0f), dx(n, 99.0f), contrib(n, 99.0f);
  // Two rows a block, a grid that covers them.
  const int64_t blocks = (rows + 1) / 2;
  Launch(blocks, 64)
      .buffer(0, x)
      .buffer(1, gamma)
      .buffer(2, beta)
      .buffer(3, y)
      .scalar(0, rows)
      .scalar(1, at)
      .run(normModule(), name);
  Launch(blocks, 64)
      .buffer(0, x)
      .buffer(1, gamma)
      .buffer(2, dy)
      .buffer(3, dx)
      .buffer(4, contrib)
      .scalar(0, rows)
      .scalar(1, at)
      .run(normModule(), std::string(name) + "_grad");
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = &x[at + r * d], *dyr = &dy[at + r * d];
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t c = 0; c < d; ++c)
        mean += xr[c];
      mean /= double(d);
    }
    for (int64_t c = 0; c < d; ++c)
      var += (xr[c] - mean) * (xr[c] - mean);
    const double inv = 1.0 / std::sqrt(var / double(d) + kEps);
    double gMean = 0, gxMean = 0;
    for (int64_t c = 0; c < d; ++c) {
      const double xh = (xr[c] - mean) * inv, g = dyr[c] * gamma[c];
      gMean += g / double(d);
      gxMean += g * xh / double(d);
    }
    for (int64_t c = 0; c < d; ++c) {
      const size_t i = static_cast<size_t>(at + r * d + c);
      const double xh = (xr[c] - mean) * inv, g = dyr[c] * gamma[c];
      const double want = xh * gamma[c] + (rms ? 0.0 : beta[c]);
      ASSERT_NEAR(y[i], want, 2e-5 * (1 + std::fabs(want))) << "y col " << c;
      const double wantDx = inv * (g - (rms ? 0.0 : gMean) - xh * gxMean);
      ASSERT_NEAR(dx[i], wantDx, 2e-5 * (1 + std::fabs(wantDx)))
          << "dx col " << c;
      ASSERT_NEAR(contrib[i], dyr[c] * xh, 2e-5) << "contrib col " << c;
    }
  }
  // Nothing before the rows was written.
  for (int64_t i = 0; i < at; ++i) {
    ASSERT_EQ(y[i], 99.0f);
    ASSERT_EQ(dx[i], 99.0f);
  }
}

} // namespace

// Aligned f32 rows of a multiple of 4 columns: 16-byte accesses, with more
// quads (40) than lanes, and fewer (3).
TEST(EmuNorm, SixteenByteRowsMatchTheReference) {
  for (int64_t rows : {1, 5}) {
    expectNorm("layer160", 160, false, rows, 0);
    expectNorm("rms160", 160, true, rows, 0);
    expectNorm("layer12", 12, false, rows, 0);
  }
}

// Rows one float off 16-byte boundaries, and a width of 10: scalar paths.
TEST(EmuNorm, MisalignedRowsAndOddWidthsTakeScalarAccesses) {
  for (int64_t rows : {1, 5}) {
    expectNorm("layer160", 160, false, rows, 1);
    expectNorm("rms160", 160, true, rows, 3);
    expectNorm("layer10", 10, false, rows, 0);
  }
}
