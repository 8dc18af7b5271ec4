//===- CpuGemmTest.cpp - the cpu device's gemm wrapper --------------------===//
//
// gemm and gemmSerial against a double-precision loop, for every
// transpose pair, with padded leading dimensions, alpha and beta: general
// shapes (BLAS gemm) and one-row and one-column products (BLAS gemv, what a
// decoding step runs), where C starts as NaN for beta = 0 and must not
// keep it; and that gemv runs on the calling thread.
//
//===----------------------------------------------------------------------===//

#include "cpu/kernels/Common.h"

#include <cblas.h>

#include <cmath>
#include <cstdint>
#include <gtest/gtest.h>
#include <limits>
#include <omp.h>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

using namespace moec::cpu;

namespace {

struct Case {
  bool transA, transB;
  int64_t m, n, k;
};

std::string describe(const Case &c, double beta, bool serial) {
  return (serial ? "gemmSerial " : "gemm ") + std::to_string(c.m) + "x" +
         std::to_string(c.n) + "x" + std::to_string(c.k) +
         (c.transA ? " A^T" : " A") + (c.transB ? " B^T" : " B") + " beta " +
         std::to_string(beta);
}

template <typename T> void expectGemm(const Case &c, double beta, bool serial) {
  SCOPED_TRACE(describe(c, beta, serial));
  // Stored shapes, each row padded by 3 elements that must not be read
  // into the result.
  const int64_t aRows = c.transA ? c.k : c.m, aCols = c.transA ? c.m : c.k;
  const int64_t bRows = c.transB ? c.n : c.k, bCols = c.transB ? c.k : c.n;
  const int64_t lda = aCols + 3, ldb = bCols + 3, ldc = c.n + 3;
  std::mt19937 rng(static_cast<unsigned>(c.m * 131 + c.n * 17 + c.k));
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<T> a(aRows * lda), b(bRows * ldb), cm(c.m * ldc);
  for (T &x : a)
    x = static_cast<T>(dist(rng));
  for (T &x : b)
    x = static_cast<T>(dist(rng));
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (T &x : cm)
    x = beta == 0.0 ? nan : static_cast<T>(dist(rng));
  const std::vector<T> before = cm;
  auto opA = [&](int64_t i, int64_t p) {
    return double(c.transA ? a[p * lda + i] : a[i * lda + p]);
  };
  auto opB = [&](int64_t p, int64_t j) {
    return double(c.transB ? b[j * ldb + p] : b[p * ldb + j]);
  };
  const T alpha = T(1.5);
  if (serial)
    gemmSerial<T>(c.transA, c.transB, c.m, c.n, c.k, alpha, a.data(), lda,
                  b.data(), ldb, T(beta), cm.data(), ldc);
  else
    gemm<T>(c.transA, c.transB, c.m, c.n, c.k, alpha, a.data(), lda, b.data(),
            ldb, T(beta), cm.data(), ldc);
  const double tolerance =
      (std::is_same_v<T, float> ? 1e-6 : 1e-14) * static_cast<double>(c.k);
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double want = 0;
      for (int64_t p = 0; p < c.k; ++p)
        want += opA(i, p) * opB(p, j);
      want *= double(alpha);
      if (beta != 0.0)
        want += beta * double(before[i * ldc + j]);
      ASSERT_NEAR(double(cm[i * ldc + j]), want, tolerance)
          << "C[" << i << ", " << j << "]";
    }
    // The padding of C is left as it was (NaN stays NaN).
    for (int64_t j = c.n; j < ldc; ++j)
      ASSERT_EQ(std::isnan(cm[i * ldc + j]), std::isnan(before[i * ldc + j]));
  }
}

template <typename T> void expectAllShapes() {
  for (bool transA : {false, true})
    for (bool transB : {false, true})
      for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 300, 70},
                             {1, 1, 70},
                             {1, 5, 1},
                             {200, 1, 70},
                             {7, 1, 1},
                             {150, 90, 33}})
        for (double beta : {0.0, 0.5})
          for (bool serial : {false, true})
            expectGemm<T>({transA, transB, m, n, k}, beta, serial);
}

TEST(CpuGemm, MatchesALoopInFloat) { expectAllShapes<float>(); }

TEST(CpuGemm, MatchesALoopInDouble) { expectAllShapes<double>(); }

// A one-row product large enough for OpenBLAS to thread its gemv (64 x 300
// elements) runs on one OpenMP thread: OpenBLAS is never asked for a team
// (it would first take the OpenMP count as its own), and the caller gets
// its thread count back. Called directly (outside any parallel region) and
// through gemm, whose one-block loop does not fork.
TEST(CpuGemm, OneRowProductsRunOnTheCallingThread) {
  const int saved = omp_get_max_threads();
  const int blasThreads = openblas_get_num_threads();
  const int asked = blasThreads + 1;
  omp_set_num_threads(asked);
  std::vector<float> a(300, 0.5f), b(300 * 64, 0.25f), c(64, 7.0f);
  gemmSerial<float>(false, false, 1, 64, 300, 1.0f, a.data(), 300, b.data(), 64,
                    0.0f, c.data(), 64);
  EXPECT_EQ(omp_get_max_threads(), asked);
  EXPECT_EQ(openblas_get_num_threads(), blasThreads);
  EXPECT_EQ(c[0], 37.5f);
  gemm<float>(false, false, 1, 64, 300, 1.0f, a.data(), 300, b.data(), 64, 0.0f,
              c.data(), 64);
  EXPECT_EQ(omp_get_max_threads(), asked);
  EXPECT_EQ(openblas_get_num_threads(), blasThreads);
  EXPECT_EQ(c[63], 37.5f);
  omp_set_num_threads(saved);
}

} // namespace
