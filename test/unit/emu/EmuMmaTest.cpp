//===- EmuMmaTest.cpp - mma tiles against a reference matmul --------------===//

#include "EmuTestUtil.h"
#include "moec/Tensor.h"

#include <cstring>
#include <gtest/gtest.h>
#include <random>

using namespace moec::emu;
using namespace moec::emu::test;

namespace {

float truncateToTf32(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  bits &= 0xffffe000u;
  std::memcpy(&value, &bits, sizeof bits);
  return value;
}

} // namespace

TEST(EmuMma, M16N8K16Bf16MatchesAReferenceMatmul) {
  const int tiles = 4; // 2 blocks of 2 warps
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  std::vector<uint16_t> A(tiles * 256), B(tiles * 128);
  std::vector<float> C(tiles * 128), D(tiles * 128, 0.0f);
  for (auto &a : A)
    a = toBf16Bits(uniform(rng));
  for (auto &b : B)
    b = toBf16Bits(uniform(rng));
  for (auto &c : C)
    c = uniform(rng);
  Launch(2, 64).buffer(0, A).buffer(1, B).buffer(2, C).buffer(3, D).run(
      correctModule(), "mmaBf16");
  for (int tile = 0; tile < tiles; ++tile) {
    for (int i = 0; i < 16; ++i) {
      for (int j = 0; j < 8; ++j) {
        float acc = C[tile * 128 + i * 8 + j];
        for (int pass = 0; pass < 2; ++pass)
          for (int k = 0; k < 16; ++k)
            acc += fromBf16Bits(A[tile * 256 + i * 16 + k]) *
                   fromBf16Bits(B[tile * 128 + k * 8 + j]);
        EXPECT_EQ(D[tile * 128 + i * 8 + j], acc)
            << "tile " << tile << " (" << i << ", " << j << ")";
      }
    }
  }
}

TEST(EmuMma, M16N8K8Tf32MatchesAReferenceMatmul) {
  const int tiles = 3; // 1 block of 3 warps
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
  std::vector<float> A(tiles * 128), B(tiles * 64), C(tiles * 128),
      D(tiles * 128, 0.0f);
  for (auto *v : {&A, &B, &C})
    for (auto &x : *v)
      x = uniform(rng);
  Launch(1, 96).buffer(0, A).buffer(1, B).buffer(2, C).buffer(3, D).run(
      correctModule(), "mmaTf32");
  int inexact = 0;
  for (int tile = 0; tile < tiles; ++tile) {
    for (int i = 0; i < 16; ++i) {
      for (int j = 0; j < 8; ++j) {
        float acc = C[tile * 128 + i * 8 + j], full = acc;
        for (int k = 0; k < 8; ++k) {
          acc += truncateToTf32(A[tile * 128 + i * 8 + k]) *
                 truncateToTf32(B[tile * 64 + k * 8 + j]);
          full += A[tile * 128 + i * 8 + k] * B[tile * 64 + k * 8 + j];
        }
        EXPECT_EQ(D[tile * 128 + i * 8 + j], acc)
            << "tile " << tile << " (" << i << ", " << j << ")";
        inexact += acc != full;
      }
    }
  }
  EXPECT_GT(inexact, 0) << "the inputs should exercise tf32 truncation";
}

// The tensor-core GEMM tile of the device library on sizes that fill no
// tile and an odd depth, for both operand layouts: every output equals the
// product of the bf16-rounded operands, summed in fp32.
TEST(EmuMma, GemmTileBf16MatchesARoundedReference) {
  const int64_t M = 70, N = 72, K = 37;
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> A(M * K), B(K * N);
  for (auto *v : {&A, &B})
    for (auto &x : *v)
      x = uniform(rng);
  // Rounded to nearest even, as the tile rounds (toBf16Bits truncates).
  auto rounded = [](float x) { return moec::bf16ToFloat(moec::bf16FromFloat(x)); };
  for (bool transposed : {false, true}) {
    // The same matrices, stored transposed for the second kernel.
    std::vector<float> a(A.size()), b(B.size());
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k)
        a[transposed ? k * M + m : m * K + k] = A[m * K + k];
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n)
        b[transposed ? n * K + k : k * N + n] = B[k * N + n];
    const int64_t tm = 64, tn = transposed ? 32 : 64;
    const unsigned blocks = ((M + tm - 1) / tm) * ((N + tn - 1) / tn);
    std::vector<float> C(M * N, -7.0f);
    Launch(blocks, 256)
        .scalar(0, M)
        .scalar(1, N)
        .scalar(2, K)
        .buffer(0, a)
        .buffer(1, b)
        .buffer(2, C)
        .run(correctModule(),
             transposed ? "gemmBf16Transposed" : "gemmBf16Rows");
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double expected = 0;
        for (int64_t k = 0; k < K; ++k)
          expected += double(rounded(A[m * K + k])) * rounded(B[k * N + n]);
        ASSERT_NEAR(C[m * N + n], expected, 1e-5)
            << (transposed ? "transposed " : "") << "(" << m << ", " << n
            << ")";
      }
  }
}

// ldmatrix.x4 against the PTX ISA's definition: lane L gets, for matrix i,
// the word of row L / 4 holding columns 2 (L % 4) and 2 (L % 4) + 1; with
// .trans, columns L / 4 of rows 2 (L % 4) and 2 (L % 4) + 1.
TEST(EmuMma, LdmatrixX4FollowsThePtxDefinition) {
  std::vector<uint16_t> element(4 * 64); // [matrix][row][column]
  for (size_t i = 0; i < element.size(); ++i)
    element[i] = static_cast<uint16_t>(i * 37 + 11);
  std::vector<uint32_t> in(128);
  for (size_t w = 0; w < in.size(); ++w)
    in[w] = element[2 * w] | static_cast<uint32_t>(element[2 * w + 1]) << 16;
  auto e = [&](unsigned i, unsigned r, unsigned c) -> uint32_t {
    return element[i * 64 + r * 8 + c];
  };
  for (const EmuModule *module : {&correctModule(), &checkedModule()}) {
    std::vector<uint32_t> out(128, 0), outTrans(128, 0);
    Launch(1, 32).buffer(0, in).buffer(1, out).buffer(2, outTrans).run(
        *module, "ldmatrixX4");
    for (unsigned lane = 0; lane < 32; ++lane) {
      const unsigned g = lane / 4, t = lane % 4;
      for (unsigned i = 0; i < 4; ++i) {
        EXPECT_EQ(out[4 * lane + i], e(i, g, 2 * t) | e(i, g, 2 * t + 1) << 16)
            << "lane " << lane << " matrix " << i;
        EXPECT_EQ(outTrans[4 * lane + i],
                  e(i, 2 * t, g) | e(i, 2 * t + 1, g) << 16)
            << "lane " << lane << " matrix " << i << " (.trans)";
      }
    }
  }
}

namespace {

/// One product for the gemmTiles* kernels (EmuKernels.cpp): sizes, leading
/// dimensions, and the operands both as stored and as logical matrices.
struct GemmProblem : GemmOperands<uint16_t, float> {
  const char *kernel;
  int layout; // as the kernels' LAYOUT
  int64_t tm, tn, M, N, K, lda, ldb;

  // Random values everywhere, padding included, never zero, so that check
  // mode sees any read past the edges.
  GemmProblem(const char *kernel, int layout, int64_t tm, int64_t tn,
              int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
              unsigned seed)
      : GemmOperands(
            layout, M, N, K, lda, ldb, seed,
            [](std::vector<uint16_t> &v, int64_t size, std::mt19937 &rng) {
              std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
              v.resize(static_cast<size_t>(size));
              for (auto &x : v) {
                float f = uniform(rng);
                x = moec::bf16FromFloat(f == 0.0f ? 0.5f : f);
              }
            },
            [](const std::vector<uint16_t> &v, int64_t i) {
              return fromBf16Bits(v[static_cast<size_t>(i)]);
            }),
        kernel(kernel), layout(layout), tm(tm), tn(tn), M(M), N(N), K(K),
        lda(lda), ldb(ldb) {}

  unsigned blocks() const {
    return static_cast<unsigned>(((M + tm - 1) / tm) * ((N + tn - 1) / tn));
  }

  /// C through tile `which` (0 gemmTileBf16, 1 the pipeline with cp.async,
  /// 2 gemmTileBf16Async, 3 the pipeline reading element by element);
  /// `applies` gets the pipeline's run-time check.
  std::vector<float> run(const EmuModule &module, int which,
                         std::vector<int32_t> &applies) {
    std::vector<float> C(M * N, -7.0f);
    applies.assign(blocks(), -1);
    Launch(blocks(), 256)
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
        .buffer(5, applies)
        .run(module, kernel);
    return C;
  }

  /// The products summed in increasing k order in fp32, as the mma tiles
  /// do (bf16 products are exact in fp32).
  float expected(int64_t m, int64_t n) const {
    float acc = 0.0f;
    for (int64_t k = 0; k < K; ++k)
      acc += A[m * K + k] * B[k * N + n];
    return acc;
  }

  std::string name() const {
    return std::string(kernel) + " " + std::to_string(M) + "x" +
           std::to_string(N) + "x" + std::to_string(K);
  }
};

std::vector<GemmProblem> gemmProblems() {
  std::vector<GemmProblem> p;
  p.emplace_back("gemmTilesRows64x64", 0, 64, 64, 1, 1, 1, 8, 8, 1);
  p.emplace_back("gemmTilesRows64x64", 0, 64, 64, 37, 53, 70, 72, 56, 2);
  p.emplace_back("gemmTilesRows64x64", 0, 64, 64, 128, 128, 256, 256, 128, 3);
  p.emplace_back("gemmTilesRows64x64", 0, 64, 64, 64, 64, 48, 48, 64, 4);
  p.emplace_back("gemmTilesRows64x32", 0, 64, 32, 37, 53, 70, 72, 64, 5);
  p.emplace_back("gemmTilesCols128x64", 1, 128, 64, 1, 1, 1, 8, 8, 6);
  p.emplace_back("gemmTilesCols128x64", 1, 128, 64, 37, 53, 70, 40, 72, 7);
  p.emplace_back("gemmTilesCols128x64", 1, 128, 64, 130, 70, 100, 136, 104, 8);
  p.emplace_back("gemmTilesGather64x32", 2, 64, 32, 1, 1, 1, 8, 8, 9);
  p.emplace_back("gemmTilesGather64x32", 2, 64, 32, 37, 53, 70, 72, 80, 10);
  p.emplace_back("gemmTilesGatherT64x64", 3, 64, 64, 37, 53, 70, 40, 56, 11);
  p.emplace_back("gemmTilesRows128x128", 0, 128, 128, 130, 200, 70, 72, 200,
                 12);
  return p;
}

} // namespace

// The pipelined tile on ragged and aligned sizes, every operand layout and
// gathered rows and columns: exactly the fp32 sum of the bf16 products in
// increasing k order (close to the exact sum), bit for bit what
// gemmTileBf16 computes, what gemmTileBf16Async picks, and what the
// pipeline computes reading its chunks element by element.
TEST(EmuMma, GemmTileBf16AsyncMatchesAReferenceAndTheScalarTile) {
  for (GemmProblem &p : gemmProblems()) {
    std::vector<int32_t> applies;
    std::vector<float> pipelined = p.run(correctModule(), 1, applies);
    for (int32_t a : applies)
      ASSERT_EQ(a, 1) << p.name() << ": the pipeline should apply";
    for (int64_t m = 0; m < p.M; ++m)
      for (int64_t n = 0; n < p.N; ++n) {
        double exact = 0;
        for (int64_t k = 0; k < p.K; ++k)
          exact += double(p.A[m * p.K + k]) * p.B[k * p.N + n];
        const float c = pipelined[m * p.N + n];
        ASSERT_EQ(c, p.expected(m, n)) << p.name() << " (" << m << ", " << n
                                       << ")";
        ASSERT_NEAR(c, exact, 1e-5 * p.K) << p.name();
      }
    EXPECT_EQ(p.run(correctModule(), 0, applies), pipelined)
        << p.name() << ": gemmTileBf16 differs";
    EXPECT_EQ(p.run(correctModule(), 2, applies), pipelined)
        << p.name() << ": gemmTileBf16Async differs";
    EXPECT_EQ(p.run(correctModule(), 3, applies), pipelined)
        << p.name() << ": the pipeline's element-by-element reads differ";
  }
}

// Check mode: no read outside the operands (the buffers end at their last
// element), no read of shared memory before cp.async wrote it, aligned
// copies; and the same results.
TEST(EmuMma, GemmTileBf16AsyncPassesCheckMode) {
  std::vector<GemmProblem> problems = gemmProblems();
  for (size_t i : {1, 4, 6, 9, 10, 11}) {
    GemmProblem &p = problems[i];
    std::vector<int32_t> applies;
    std::vector<float> checked = p.run(checkedModule(), 2, applies);
    EXPECT_EQ(checked, p.run(correctModule(), 1, applies)) << p.name();
  }
  // gemmTileBf16's epilogue, in eight passes of 16 rows through its
  // operands' shared memory: no read of shared memory before it was
  // written, the same results.
  GemmProblem &wide = problems[11];
  std::vector<int32_t> applies;
  EXPECT_EQ(wide.run(checkedModule(), 0, applies),
            wide.run(correctModule(), 1, applies))
      << wide.name();
}

// Rows of an odd length cannot be copied in 16-byte chunks: the run-time
// check fails and gemmTileBf16Async's pipeline reads them element by
// element, bit for bit what gemmTileBf16 computes; in check mode too (no
// read past the operands, none of shared memory before it was written).
TEST(EmuMma, GemmTileBf16AsyncReadsUnalignedRowsElementByElement) {
  for (GemmProblem p :
       {GemmProblem("gemmTilesRows64x64", 0, 64, 64, 37, 53, 70, 70, 53, 12),
        GemmProblem("gemmTilesCols128x64", 1, 128, 64, 37, 53, 70, 37, 71, 13),
        GemmProblem("gemmTilesGather64x32", 2, 64, 32, 37, 53, 70, 71, 81,
                    14)}) {
    std::vector<int32_t> applies;
    std::vector<float> picked = p.run(correctModule(), 2, applies);
    for (int32_t a : applies)
      EXPECT_EQ(a, 0) << p.name();
    EXPECT_EQ(picked, p.run(correctModule(), 0, applies)) << p.name();
    EXPECT_EQ(picked, p.run(checkedModule(), 2, applies)) << p.name();
    for (int64_t m = 0; m < p.M; ++m)
      for (int64_t n = 0; n < p.N; ++n)
        ASSERT_EQ(picked[m * p.N + n], p.expected(m, n)) << p.name();
  }
}
