//===- EmuAttentionTest.cpp - attention forward kernels in emu ------------===//
//
// attentionForwardMma (the bf16 tensor-core forward) and attentionForward
// (the CUDA-core one, which bf16 models keep for other head dims) against
// attention written out in double on the same bf16 inputs: causal or not,
// with a KV cache offset, grouped-query heads, a key mask, fully masked
// rows, lengths that fill no tile, and K/V rows that cp.async cannot copy.
// The kernels run in checking mode, so a read past a tensor or of shared
// memory no thread wrote fails the launch.
//
//===----------------------------------------------------------------------===//

#include "EmuTestUtil.h"
#include "moec/Tensor.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <mutex>
#include <random>

using namespace moec::emu;
using namespace moec::emu::test;

namespace {

// Buffers: q, k, v (bf16), out (bf16), lse (f32), key mask (i32); scalars:
// batch, sq, rows per batch, kvLen, offset, heads, kvHeads, the scale's
// float bits, causal, whether there is a key mask, whether lse is written,
// the element offset of k and v (1 misaligns their rows).
const char *const kAttentionKernels = R"cuda(
using moec::bufferArg;
using moec::scalarArg;

MOEC_DEVICE moec::AttentionShape testShape(const moec::KernelParams &p) {
  moec::AttentionShape s{};
  s.batch = scalarArg(p, 0);
  s.sq = scalarArg(p, 1);
  s.rowsPerBatch = scalarArg(p, 2);
  s.kvLen = scalarArg(p, 3);
  s.offset = scalarArg(p, 4);
  s.heads = static_cast<int>(scalarArg(p, 5));
  s.kvHeads = static_cast<int>(scalarArg(p, 6));
  s.scale = __int_as_float(static_cast<int>(scalarArg(p, 7)));
  s.causal = scalarArg(p, 8) != 0;
  if (scalarArg(p, 9))
    s.keyMask = bufferArg<const int32_t>(p, 5);
  return s;
}

// The kernel's template arguments hold commas: the call is __VA_ARGS__.
#define ATTENTION_TEST(name, ...)                                              \
  extern "C" __global__ void name(const moec::KernelParams p) {                \
    const int64_t at = scalarArg(p, 11);                                       \
    moec::__VA_ARGS__(testShape(p), bufferArg<const moec::bf16>(p, 0),               \
               bufferArg<const moec::bf16>(p, 1) + at,                         \
               bufferArg<const moec::bf16>(p, 2) + at,                         \
               bufferArg<moec::bf16>(p, 3),                                    \
               scalarArg(p, 10) ? bufferArg<float>(p, 4)                       \
                                : moec::gptr<float>());                        \
  }                                                                            \
  MOEC_EMU_EXPORT_KERNEL(name)

ATTENTION_TEST(attentionMma16, attentionForwardMma<16, 64, 64, 128>)
ATTENTION_TEST(attentionMma32, attentionForwardMma<32, 64, 64, 128>)
ATTENTION_TEST(attentionMma48, attentionForwardMma<48, 64, 64, 128>)
ATTENTION_TEST(attentionMma64, attentionForwardMma<64, 64, 64, 128>)
ATTENTION_TEST(attentionMma96, attentionForwardMma<96, 64, 32, 128>)
ATTENTION_TEST(attentionMma128, attentionForwardMma<128, 64, 32, 128>)
ATTENTION_TEST(attentionMma192, attentionForwardMma<192, 64, 16, 128, 96>)
ATTENTION_TEST(attentionMma256, attentionForwardMma<256, 64, 16, 128, 128>)
ATTENTION_TEST(attentionCores8, attentionForward<8, 32, 32, 128>)
)cuda";

const EmuModule &attentionModule() {
  static std::once_flag once;
  static std::unique_ptr<EmuModule> module;
  std::call_once(once, [] {
    module = std::make_unique<EmuModule>(
        EmuModule::load(deviceHeaders() + deviceFile("reduce.cuh") +
                            deviceFile("attention.cuh") +
                            deviceFile("attention_mma.cuh") + kAttentionKernels,
                        "emu-attention-test", testOptions(true)));
  });
  return *module;
}

/// One attention problem; q is [B, Sq, H*D], k and v [B, rows, Hkv*D].
struct Problem {
  int64_t headDim, batch = 2, sq, rows, kvLen, offset;
  int heads = 4, kvHeads = 4;
  bool causal = false, keyMask = false, withLse = true;
  int64_t kvAt = 0; // k and v start this many elements into their buffers
};

struct Result {
  std::vector<float> out, lse;
};

/// Runs `kernel` on random inputs and the double reference on the same
/// bf16 values; returns both.
void runProblem(const Problem &pb, const char *kernel, unsigned seed,
                Result &got, Result &want) {
  const int64_t D = pb.headDim, B = pb.batch, H = pb.heads, G = pb.kvHeads;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto randomBf16 = [&](int64_t n) {
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (auto &x : v)
      x = moec::bf16FromFloat(2.0f * uniform(rng));
    return v;
  };
  std::vector<uint16_t> q = randomBf16(B * pb.sq * H * D);
  std::vector<uint16_t> k = randomBf16(pb.kvAt + B * pb.rows * G * D);
  std::vector<uint16_t> v = randomBf16(pb.kvAt + B * pb.rows * G * D);
  std::vector<int32_t> mask(static_cast<size_t>(B * pb.rows), 1);
  if (pb.keyMask) {
    for (auto &m : mask)
      m = uniform(rng) > -0.4f; // about 30% padding
    for (int64_t j = 0; j < pb.rows; ++j)
      mask[static_cast<size_t>(j)] = 0; // batch 0 sees nothing
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  int32_t scaleBits;
  std::memcpy(&scaleBits, &scale, sizeof scaleBits);

  got.out.assign(static_cast<size_t>(B * pb.sq * H * D), 0.0f);
  std::vector<uint16_t> out(got.out.size(), moec::bf16FromFloat(7.0f));
  got.lse.assign(static_cast<size_t>(B * H * pb.sq), 5.0f);
  Launch launch(1, 128);
  const bool cores = std::strcmp(kernel, "attentionCores8") == 0;
  const int64_t tq = cores ? 32 : 64;
  // Past 128 dims a head takes two blocks, each writing half its columns.
  const int64_t parts = !cores && D > 128 ? 2 : 1;
  launch.config.grid = {static_cast<unsigned>((pb.sq + tq - 1) / tq),
                        static_cast<unsigned>(H * parts),
                        static_cast<unsigned>(B)};
  launch.buffer(0, q).buffer(1, k).buffer(2, v).buffer(3, out);
  launch.buffer(4, got.lse).buffer(5, mask);
  const int64_t scalars[] = {B,         pb.sq,      pb.rows,    pb.kvLen,
                             pb.offset, H,          G,          scaleBits,
                             pb.causal, pb.keyMask, pb.withLse, pb.kvAt};
  for (int i = 0; i < 12; ++i)
    launch.scalar(i, scalars[i]);
  launch.run(attentionModule(), kernel);
  for (size_t i = 0; i < out.size(); ++i)
    got.out[i] = moec::bf16ToFloat(out[i]);

  want.out.assign(got.out.size(), 0.0f);
  want.lse.assign(got.lse.size(), -INFINITY);
  auto value = [](const std::vector<uint16_t> &t, int64_t i) {
    return static_cast<double>(moec::bf16ToFloat(t[static_cast<size_t>(i)]));
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < pb.sq; ++i) {
        const int64_t g = h / (H / G);
        std::vector<double> score(static_cast<size_t>(pb.kvLen), -INFINITY);
        double mx = -INFINITY;
        for (int64_t j = 0; j < pb.kvLen; ++j) {
          if ((pb.causal && j > i + pb.offset) ||
              !mask[static_cast<size_t>(b * pb.rows + j)])
            continue;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += value(q, ((b * pb.sq + i) * H + h) * D + d) *
                   value(k, pb.kvAt + ((b * pb.rows + j) * G + g) * D + d);
          score[static_cast<size_t>(j)] = dot * scale;
          mx = std::max(mx, dot * scale);
        }
        if (mx == -INFINITY)
          continue; // nothing visible: out 0, lse -inf
        double sum = 0;
        std::vector<double> o(static_cast<size_t>(D), 0.0);
        for (int64_t j = 0; j < pb.kvLen; ++j) {
          double p = std::exp(score[static_cast<size_t>(j)] - mx);
          sum += p;
          for (int64_t d = 0; d < D; ++d)
            o[static_cast<size_t>(d)] +=
                p * value(v, pb.kvAt + ((b * pb.rows + j) * G + g) * D + d);
        }
        for (int64_t d = 0; d < D; ++d)
          want.out[static_cast<size_t>(((b * pb.sq + i) * H + h) * D + d)] =
              static_cast<float>(o[static_cast<size_t>(d)] / sum);
        want.lse[static_cast<size_t>((b * H + h) * pb.sq + i)] =
            static_cast<float>(mx + std::log(sum));
      }
}

/// Outputs within bf16 accuracy (P and O are rounded to bf16), lse within
/// fp32's; fully masked rows exactly 0 and -inf.
void expectClose(const Problem &pb, const char *kernel, unsigned seed) {
  Result got, want;
  runProblem(pb, kernel, seed, got, want);
  int masked = 0;
  for (size_t i = 0; i < got.out.size(); ++i) {
    SCOPED_TRACE(testing::Message() << kernel << " output " << i);
    ASSERT_NEAR(got.out[i], want.out[i], 1e-2 + 1e-2 * std::fabs(want.out[i]));
  }
  for (size_t i = 0; i < got.lse.size(); ++i) {
    SCOPED_TRACE(testing::Message() << kernel << " lse " << i);
    if (!pb.withLse) {
      ASSERT_EQ(got.lse[i], 5.0f) << "lse written without a pointer";
    } else if (std::isinf(want.lse[i])) {
      ASSERT_EQ(got.lse[i], -INFINITY);
      ++masked;
      for (int64_t d = 0; d < pb.headDim; ++d) {
        // Row i of lse is (b, h, row): the same (b, row, h) of out.
        const int64_t row = static_cast<int64_t>(i) % pb.sq;
        const int64_t bh = static_cast<int64_t>(i) / pb.sq;
        const int64_t b = bh / pb.heads, h = bh % pb.heads;
        ASSERT_EQ(got.out[static_cast<size_t>(
                      ((b * pb.sq + row) * pb.heads + h) * pb.headDim + d)],
                  0.0f);
      }
    } else {
      ASSERT_NEAR(got.lse[i], want.lse[i], 2e-3);
    }
  }
  if (pb.keyMask && pb.withLse) {
    EXPECT_GT(masked, 0) << "batch 0 should have fully masked rows";
  }
}

Problem problem(int64_t headDim, int64_t sq, int64_t kvLen) {
  Problem pb;
  pb.headDim = headDim;
  pb.sq = sq;
  pb.rows = kvLen;
  pb.kvLen = kvLen;
  pb.offset = kvLen - sq;
  return pb;
}

} // namespace

// Lengths that fill no 64-query or 64-key tile.
TEST(EmuAttention, MmaForwardMatchesTheReference) {
  expectClose(problem(32, 70, 70), "attentionMma32", 1);
  expectClose(problem(64, 33, 97), "attentionMma64", 2);
  expectClose(problem(16, 130, 5), "attentionMma16", 3);
  expectClose(problem(48, 20, 150), "attentionMma48", 4);
}

// Head dims above 64 take 32-key tiles (the MoA paper's base model has
// 128): causal over a cache with grouped query heads, and a key mask.
TEST(EmuAttention, MmaForwardWideHeads) {
  expectClose(problem(96, 33, 50), "attentionMma96", 16);
  Problem pb = problem(128, 21, 70);
  pb.rows = 80;
  pb.causal = true;
  pb.heads = 4;
  pb.kvHeads = 2;
  expectClose(pb, "attentionMma128", 17);
  pb = problem(128, 40, 45);
  pb.keyMask = true;
  pb.kvAt = 1; // rows off 16-byte boundaries: plain loads
  expectClose(pb, "attentionMma128", 18);
}

// Head dims past 128 (the MoA paper's big model has 256): two blocks a
// head, each computing S whole and O for half the columns; only the first
// writes lse. Causal over a cache with grouped query heads, a key mask with
// rows off 16-byte boundaries, and 192 (96 columns a block).
TEST(EmuAttention, MmaForwardSplitHeads) {
  Problem pb = problem(256, 21, 40);
  pb.rows = 48;
  pb.causal = true;
  pb.heads = 4;
  pb.kvHeads = 2;
  pb.batch = 1;
  expectClose(pb, "attentionMma256", 19);
  pb = problem(256, 17, 23);
  pb.keyMask = true;
  pb.kvAt = 1;
  pb.heads = 2;
  pb.kvHeads = 2;
  expectClose(pb, "attentionMma256", 20);
  pb = problem(192, 30, 30);
  pb.causal = true;
  pb.heads = 2;
  pb.kvHeads = 1;
  pb.batch = 1;
  expectClose(pb, "attentionMma192", 21);
}

TEST(EmuAttention, MmaForwardCausal) {
  Problem pb = problem(64, 100, 100);
  pb.causal = true;
  expectClose(pb, "attentionMma64", 5);
  pb = problem(32, 150, 150);
  pb.causal = true;
  pb.batch = 1;
  expectClose(pb, "attentionMma32", 6);
}

// Queries i attend keys j <= i + offset of a cache longer than the new
// tokens; the cache buffer has rows past kvLen (their values are garbage
// the kernel must not see).
TEST(EmuAttention, MmaForwardWithACache) {
  Problem pb = problem(32, 5, 83);
  pb.rows = 96;
  pb.causal = true;
  expectClose(pb, "attentionMma32", 7);
  pb = problem(64, 1, 140);
  pb.rows = 140;
  pb.causal = true;
  pb.withLse = false;
  expectClose(pb, "attentionMma64", 8);
}

TEST(EmuAttention, MmaForwardGroupedQueryHeads) {
  Problem pb = problem(32, 66, 90);
  pb.heads = 6;
  pb.kvHeads = 2;
  pb.causal = true;
  expectClose(pb, "attentionMma32", 9);
  pb = problem(64, 40, 40);
  pb.kvHeads = 1;
  expectClose(pb, "attentionMma64", 10);
}

// A key mask with about 30% padding, and none visible in batch 0.
TEST(EmuAttention, MmaForwardKeyMask) {
  Problem pb = problem(32, 70, 75);
  pb.keyMask = true;
  expectClose(pb, "attentionMma32", 11);
  pb.causal = true;
  pb.heads = 2;
  pb.kvHeads = 1;
  expectClose(pb, "attentionMma32", 12);
}

// Causal with fewer keys than queries: the first rows see no key.
TEST(EmuAttention, MmaForwardFullyMaskedRows) {
  Problem pb = problem(32, 90, 20);
  pb.causal = true;
  Result got, want;
  runProblem(pb, "attentionMma32", 13, got, want);
  EXPECT_EQ(got.lse[0], -INFINITY);
  expectClose(pb, "attentionMma32", 13);
}

// K and V one element into their buffers: rows are not 16-byte aligned, so
// the kernel stages them with plain loads instead of cp.async.
TEST(EmuAttention, MmaForwardMisalignedKeys) {
  Problem pb = problem(32, 70, 90);
  pb.kvAt = 1;
  pb.causal = true;
  pb.kvHeads = 2;
  expectClose(pb, "attentionMma32", 14);
  pb.kvAt = 8; // aligned again
  expectClose(pb, "attentionMma32", 14);
}

// The CUDA-core kernel that bf16 models keep for other head dims.
TEST(EmuAttention, CudaCoreForwardOnBf16) {
  Problem pb = problem(8, 40, 45);
  pb.causal = true;
  pb.keyMask = true;
  pb.heads = 4;
  pb.kvHeads = 2;
  expectClose(pb, "attentionCores8", 15);
}
