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
