//===- EmuNormTest.cpp - norm.cuh's rows in emu ---------------------------===//
//
// Layer and RMS norms and their row gradients, forward through
// normRowsVector (16-byte accesses: four f32 or eight bf16 columns) when the
// buffers are aligned and normRows otherwise, the gradient choosing for
// itself. Both paths must match a double-precision
// reference and stay inside the rows (the kernels run in checking mode).
//
//===----------------------------------------------------------------------===//

#include "EmuTestUtil.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <gtest/gtest.h>
#include <mutex>
#include <random>
#include <type_traits>

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
      moec::normRowsVector<D, Rms, 2, float>(
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

// bf16 rows and parameters; buffers x, gamma, beta, y as above.
template <int D, bool Rms> __device__ void bf16Case(const moec::KernelParams p) {
  const int64_t rows = scalarArg(p, 0), at = scalarArg(p, 1);
  const moec::gptr<const moec::bf16> x = bufferArg<const moec::bf16>(p, 0) + at;
  const moec::gptr<const moec::bf16> gamma = bufferArg<const moec::bf16>(p, 1);
  const moec::gptr<const moec::bf16> beta = bufferArg<const moec::bf16>(p, 2);
  const moec::gptr<moec::bf16> y = bufferArg<moec::bf16>(p, 3) + at;
  if (moec::aligned16(x, y)) {
    moec::normRowsVector<D, Rms, 2, moec::bf16>(
        rows, 1e-5f,
        [=](int64_t r, int64_t q) { return moec::load8(x, r * (D / 8) + q); },
        gamma, beta,
        [=](int64_t r, int64_t q, const moec::float8 &v) {
          moec::store8(y, r * (D / 8) + q, v);
        });
    return;
  }
  moec::normRows<D, Rms, 2, moec::bf16>(
      rows, 1e-5f, [=](int64_t r, int64_t c) { return moec::toFloat(x[r * D + c]); },
      gamma, beta, [=](int64_t r, int64_t c, float v) { y[r * D + c] = v; });
}

// Buffers x, gamma, dy, dx (bf16) and contrib (f32).
template <int D, bool Rms> __device__ void bf16GradCase(const moec::KernelParams p) {
  const int64_t rows = scalarArg(p, 0), at = scalarArg(p, 1);
  moec::normGradRows<D, Rms, 2, moec::bf16>(
      rows, 1e-5f, bufferArg<const moec::bf16>(p, 0) + at,
      bufferArg<const moec::bf16>(p, 1), bufferArg<const moec::bf16>(p, 2) + at,
      bufferArg<moec::bf16>(p, 3) + at, bufferArg<float>(p, 4) + at);
}

#define BF16_NORM_KERNELS(D, RMS, NAME)                                        \
  extern "C" __global__ void NAME(const moec::KernelParams p) {                \
    bf16Case<D, RMS>(p);                                                       \
  }                                                                            \
  MOEC_EMU_EXPORT_KERNEL(NAME)                                                 \
  extern "C" __global__ void NAME##_grad(const moec::KernelParams p) {         \
    bf16GradCase<D, RMS>(p);                                                   \
  }                                                                            \
  MOEC_EMU_EXPORT_KERNEL(NAME##_grad)

BF16_NORM_KERNELS(320, false, layer_bf16_320)
BF16_NORM_KERNELS(16, true, rms_bf16_16)

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
        EmuModule::load(deviceHeaders() + deviceFile("vector.cuh") +
                            deviceFile("norm.cuh") + kNormKernels,
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

uint16_t toBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u); // nearest even; no NaNs here
  return static_cast<uint16_t>(u >> 16);
}

double fromBf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// The stored form of a float in rows of E: float itself, or bf16 bits.
template <typename E> E stored(float f) {
  if constexpr (std::is_same_v<E, float>)
    return f;
  else
    return toBf16(f);
}
template <typename E> double valueOf(E e) {
  if constexpr (std::is_same_v<E, float>)
    return e;
  else
    return fromBf16(e);
}

template <typename E>
std::vector<E> randomRow(size_t n, unsigned seed, float lo, float hi) {
  std::vector<E> out;
  for (float f : randomValues(n, seed, lo, hi))
    out.push_back(stored<E>(f));
  return out;
}

/// Runs kernel `name` (forward) and `name`_grad over `rows` rows of width
/// d placed `at` elements into their buffers, the rows and parameters
/// stored as E (float or bf16 bits) and the dgamma contributions as f32,
/// and compares y, dx and the contributions with the norm and its gradient
/// in double of the same stored inputs: y and dx within `relative` |want|
/// + `absolute`, the contributions within 2e-5.
template <typename E>
void expectNorm(const char *name, int64_t d, bool rms, int64_t rows, int64_t at,
                double relative, double absolute) {
  SCOPED_TRACE(testing::Message() << name << " rows " << rows << " at " << at);
  const size_t n = static_cast<size_t>(at + rows * d);
  unsigned seed = static_cast<unsigned>(rows * 7 + d + at);
  std::vector<E> x = randomRow<E>(n, seed, -2.0f, 3.0f);
  std::vector<E> dy = randomRow<E>(n, seed + 1, -1.0f, 1.0f);
  std::vector<E> gamma = randomRow<E>(size_t(d), seed + 2, 0.5f, 1.5f);
  std::vector<E> beta = randomRow<E>(size_t(d), seed + 3, -0.5f, 0.5f);
  const E sentinel = stored<E>(99.0f);
  std::vector<E> y(n, sentinel), dx(n, sentinel);
  std::vector<float> contrib(n, 99.0f);
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
    auto xr = [&](int64_t c) { return valueOf(x[size_t(at + r * d + c)]); };
    auto dyr = [&](int64_t c) { return valueOf(dy[size_t(at + r * d + c)]); };
    auto gammaAt = [&](int64_t c) { return valueOf(gamma[size_t(c)]); };
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t c = 0; c < d; ++c)
        mean += xr(c);
      mean /= double(d);
    }
    for (int64_t c = 0; c < d; ++c)
      var += (xr(c) - mean) * (xr(c) - mean);
    const double inv = 1.0 / std::sqrt(var / double(d) + kEps);
    double gMean = 0, gxMean = 0;
    for (int64_t c = 0; c < d; ++c) {
      const double xh = (xr(c) - mean) * inv, g = dyr(c) * gammaAt(c);
      gMean += g / double(d);
      gxMean += g * xh / double(d);
    }
    for (int64_t c = 0; c < d; ++c) {
      const size_t i = static_cast<size_t>(at + r * d + c);
      const double xh = (xr(c) - mean) * inv, g = dyr(c) * gammaAt(c);
      const double want =
          xh * gammaAt(c) + (rms ? 0.0 : valueOf(beta[size_t(c)]));
      ASSERT_NEAR(valueOf(y[i]), want, relative * std::fabs(want) + absolute)
          << "y col " << c;
      const double wantDx = inv * (g - (rms ? 0.0 : gMean) - xh * gxMean);
      ASSERT_NEAR(valueOf(dx[i]), wantDx,
                  relative * std::fabs(wantDx) + absolute)
          << "dx col " << c;
      ASSERT_NEAR(contrib[i], dyr(c) * xh, 2e-5) << "contrib col " << c;
    }
  }
  // Nothing before the rows was written.
  for (int64_t i = 0; i < at; ++i) {
    ASSERT_EQ(y[size_t(i)], sentinel);
    ASSERT_EQ(dx[size_t(i)], sentinel);
    ASSERT_EQ(contrib[size_t(i)], 99.0f);
  }
}

/// f32 rows: within float rounding of the double norm.
void expectNorm(const char *name, int64_t d, bool rms, int64_t rows,
                int64_t at) {
  expectNorm<float>(name, d, rms, rows, at, 2e-5, 2e-5);
}

/// bf16 rows: within half a bf16 ulp of y and dx (at most 2^-8 of the
/// value) and float sums.
void expectBf16Norm(const char *name, int64_t d, bool rms, int64_t rows,
                    int64_t at) {
  expectNorm<uint16_t>(name, d, rms, rows, at, std::ldexp(1.0, -8), 1e-5);
}

} // namespace

// bf16 rows of a multiple of 8 columns: eight columns per 16-byte access,
// forward and gradient (more vectors than lanes: 40; fewer: 2), and rows
// off the 16-byte boundaries on the scalar paths.
TEST(EmuNorm, Bf16RowsMatchTheReferenceOnBothPaths) {
  for (int64_t rows : {1, 5}) {
    expectBf16Norm("layer_bf16_320", 320, false, rows, 0);
    expectBf16Norm("rms_bf16_16", 16, true, rows, 0);
    expectBf16Norm("layer_bf16_320", 320, false, rows, 3);
    expectBf16Norm("rms_bf16_16", 16, true, rows, 1);
  }
}

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
