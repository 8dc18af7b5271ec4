//===- EmuTestUtil.h - building and launching test kernels ------*- C++ -*-===//

#ifndef MOEC_TEST_EMU_EMUTESTUTIL_H
#define MOEC_TEST_EMU_EMUTESTUTIL_H

#include "emu/EmuCompiler.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace moec::emu::test {

/// Kernels that run correctly (EmuKernels.cpp).
extern const char *const kCorrectKernels;
/// Kernels with bugs check mode reports (EmuKernels.cpp).
extern const char *const kFaultyKernels;

/// One file of the device library (runtime/device) from the source tree.
std::string deviceFile(const std::string &name);

/// defs.cuh, prelude.cuh, vector.cuh, reduce.cuh, mma.cuh, async_copy.cuh
/// and gemm.cuh from the source tree.
std::string deviceHeaders();

/// Options that build into the test binary's cache directory, shared by the
/// test processes ctest starts.
EmuOptions testOptions(bool check);

/// kCorrectKernels built normally (loaded once per process).
const EmuModule &correctModule();
/// kCorrectKernels and kFaultyKernels built with MOEC_EMU_CHECK.
const EmuModule &checkedModule();

/// One launch: a 1-D grid, buffers bound to host vectors.
class Launch {
public:
  Launch(unsigned grid, unsigned block);

  template <typename T> Launch &buffer(int i, std::vector<T> &data) {
    params.buffers[i] = data.data();
    setBytes(i, data.size() * sizeof(T));
    return *this;
  }
  Launch &scalar(int i, int64_t value) {
    params.scalars[i] = value;
    return *this;
  }
  Launch &shared(uint64_t bytes) {
    config.sharedBytes = bytes;
    return *this;
  }
  Launch &hostThreads(unsigned n) {
    config.hostThreads = n;
    return *this;
  }

  /// Launches; a failure is a moec::Error.
  void run(const EmuModule &module, const std::string &kernel) const;
  /// Launches and returns the error message ("" when it succeeded).
  std::string error(const EmuModule &module, const std::string &kernel) const;

  EmuLaunchConfig config;
  KernelParams params;

private:
  void setBytes(int i, uint64_t bytes);
};

/// The operands of one product C = A B for the gemm tile test kernels
/// (EmuKernels.cpp, whose withLayout names the layouts): A and B as stored,
/// padding included (the tiles must skip it) and ending at the last
/// element read, the gather orders of layouts 2 and 3 (A's rows or columns
/// from 5 source rows by orderA[3 + i] / 2, B's from 7 by orderB[i]), and A
/// (M x K) and B (K x N) as logical matrices.
template <typename Stored, typename Logical> struct GemmOperands {
  std::vector<Stored> a, b;
  std::vector<int32_t> orderA{0}, orderB{0};
  std::vector<Logical> A, B;

  /// `fill(v, size, rng)` sizes and fills a stored buffer; `value(v, i)`
  /// reads stored element i as a logical value.
  template <typename Fill, typename Value>
  GemmOperands(int layout, int64_t M, int64_t N, int64_t K, int64_t lda,
               int64_t ldb, unsigned seed, Fill fill, Value value)
      : A(M * K), B(K * N) {
    std::mt19937 rng(seed);
    if (layout == 0) {
      fill(a, (M - 1) * lda + K, rng);
      fill(b, (K - 1) * ldb + N, rng);
    } else if (layout == 1) {
      fill(a, (K - 1) * lda + M, rng);
      fill(b, (N - 1) * ldb + K, rng);
    } else {
      const bool t = layout == 3;
      fill(a, 4 * lda + (t ? M : K), rng);
      fill(b, 6 * ldb + (t ? N : K), rng);
      orderA.assign(static_cast<size_t>((t ? K : M) + 3), 0);
      orderB.assign(static_cast<size_t>(t ? K : N), 0);
      for (auto &o : orderA)
        o = static_cast<int32_t>(rng() % 10);
      for (auto &o : orderB)
        o = static_cast<int32_t>(rng() % 7);
    }
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k)
        A[m * K + k] =
            layout == 0   ? value(a, m * lda + k)
            : layout == 1 ? value(a, k * lda + m)
            : layout == 2 ? value(a, orderA[3 + m] / 2 * lda + k)
                          : value(a, orderA[3 + k] / 2 * lda + m);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n)
        B[k * N + n] = layout == 0   ? value(b, k * ldb + n)
                       : layout == 1 ? value(b, n * ldb + k)
                       : layout == 2 ? value(b, orderB[n] * ldb + k)
                                     : value(b, orderB[k] * ldb + n);
  }
};

/// One product C = A B of float operands for the gemmTf32* kernels
/// (EmuKernels.cpp), with the operands as stored (padding and gathers as
/// in EmuMmaTest's bf16 problems) and as logical matrices in double.
struct FloatGemmProblem : GemmOperands<float, double> {
  const char *kernel;
  int layout;
  int64_t tm, tn, M, N, K, lda, ldb;

  // Full 24-bit mantissas, so rounding to tf32 loses something.
  FloatGemmProblem(const char *kernel, int layout, int64_t tm, int64_t tn,
                   int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
                   unsigned seed)
      : GemmOperands(
            layout, M, N, K, lda, ldb, seed,
            [](std::vector<float> &v, int64_t size, std::mt19937 &rng) {
              std::normal_distribution<float> normal;
              v.resize(static_cast<size_t>(size));
              for (float &x : v)
                x = normal(rng);
            },
            [](const std::vector<float> &v, int64_t i) {
              return double(v[static_cast<size_t>(i)]);
            }),
        kernel(kernel), layout(layout), tm(tm), tn(tn), M(M), N(N), K(K),
        lda(lda), ldb(ldb) {}

  /// C through `which`: 0 gemmTileTf32, 1 gemmTile3xTf32, 2 gemmTile; 3,
  /// 4 and 5 gemmRows rounding to fp32, bf16 and tf32 (M at most
  /// kGemmRowsMax: one block row).
  std::vector<float> run(const EmuModule &module, int which) {
    std::vector<float> C(M * N, -7.0f);
    unsigned blocks =
        static_cast<unsigned>(((M + tm - 1) / tm) * ((N + tn - 1) / tn));
    Launch(blocks, 256)
        .scalar(0, M)
        .scalar(1, N)
        .scalar(2, K)
        .scalar(3, lda)
        .scalar(4, ldb)
        .scalar(5, which)
        .buffer(0, a)
        .buffer(1, b)
        .buffer(2, C)
        .buffer(3, orderA)
        .buffer(4, orderB)
        .run(module, kernel);
    return C;
  }

  std::string name() const {
    return std::string(kernel) + " " + std::to_string(M) + "x" +
           std::to_string(N) + "x" + std::to_string(K);
  }
};

/// Rounds to 10 fraction bits, to nearest with ties away from zero, in
/// double (exact for floats): what cvt.rna.tf32.f32 computes.
float roundToTf32(float x);

/// Rounds to bf16, to nearest with ties to even, as the device's bf16
/// conversion does (moec::bf16FromFloat, read back as a float).
float roundToBf16(float x);

/// The bits of a float rounded to bf16 by truncation, and back.
uint16_t toBf16Bits(float value);
float fromBf16Bits(uint16_t bits);

} // namespace moec::emu::test

#endif // MOEC_TEST_EMU_EMUTESTUTIL_H
