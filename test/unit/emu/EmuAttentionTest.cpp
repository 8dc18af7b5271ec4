//===- EmuAttentionTest.cpp - attention kernels in emu --------------------===//
//
// attentionForwardMma (the bf16 tensor-core forward), attentionForward
// (the CUDA-core one, which bf16 models keep for other head dims), the dq
// kernels (attentionGradQMma on the tensor cores, attentionGradQ on CUDA
// cores) and the dk/dv kernel (attentionGradKV) against attention and its
// gradients written out in double on the same bf16 inputs: causal or not,
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

// Buffers: q, k, v (bf16), out or dq (bf16), lse (f32), key mask (i32),
// and for dq: dout (bf16), delta (f32); scalars:
// batch, sq, rows per batch, kvLen, offset, heads, kvHeads, the scale's
// float bits, causal, whether there is a key mask, whether lse is written,
// the element offset of k and v (2 takes their rows off 16-byte
// boundaries), and of q and dout in the gradient kernels.
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
    moec::__VA_ARGS__(testShape(p), bufferArg<const moec::bf16>(p, 0),         \
                      bufferArg<const moec::bf16>(p, 1) + at,                  \
                      bufferArg<const moec::bf16>(p, 2) + at,                  \
                      bufferArg<moec::bf16>(p, 3),                             \
                      scalarArg(p, 10) ? bufferArg<float>(p, 4)                \
                                       : moec::gptr<float>());                 \
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

// The inputs of both gradient kernels: (s, q, k, v, dout, lse, delta).
#define GRADIENT_INPUTS                                                        \
  testShape(p), bufferArg<const moec::bf16>(p, 0) + scalarArg(p, 12),          \
      bufferArg<const moec::bf16>(p, 1) + scalarArg(p, 11),                    \
      bufferArg<const moec::bf16>(p, 2) + scalarArg(p, 11),                    \
      bufferArg<const moec::bf16>(p, 6) + scalarArg(p, 12),                    \
      bufferArg<const float>(p, 4), bufferArg<const float>(p, 7)

#define ATTENTION_DQ_TEST(name, ...)                                           \
  extern "C" __global__ void name(const moec::KernelParams p) {                \
    moec::__VA_ARGS__(GRADIENT_INPUTS, bufferArg<moec::bf16>(p, 3));           \
  }                                                                            \
  MOEC_EMU_EXPORT_KERNEL(name)

ATTENTION_DQ_TEST(gradQMma16, attentionGradQMma<16, 64, 32, 128>)
ATTENTION_DQ_TEST(gradQMma32, attentionGradQMma<32, 64, 32, 128>)
ATTENTION_DQ_TEST(gradQMma48, attentionGradQMma<48, 64, 32, 128>)
ATTENTION_DQ_TEST(gradQMma64, attentionGradQMma<64, 64, 32, 128>)
ATTENTION_DQ_TEST(gradQMma128, attentionGradQMma<128, 64, 32, 128>)
ATTENTION_DQ_TEST(gradQMma160, attentionGradQMma<160, 64, 16, 128, 80>)
ATTENTION_DQ_TEST(gradQMma192, attentionGradQMma<192, 64, 16, 128, 96>)
ATTENTION_DQ_TEST(gradQMma224, attentionGradQMma<224, 64, 16, 128, 112>)
ATTENTION_DQ_TEST(gradQMma256, attentionGradQMma<256, 64, 16, 128, 64>)
ATTENTION_DQ_TEST(gradQCores8, attentionGradQ<8, 32, 32, 128>)
ATTENTION_DQ_TEST(gradQCores32, attentionGradQ<32, 32, 32, 128>)

// dk into buffer 3, dv into buffer 8.
#define ATTENTION_DKV_TEST(name, ...)                                          \
  extern "C" __global__ void name(const moec::KernelParams p) {                \
    moec::__VA_ARGS__(GRADIENT_INPUTS, bufferArg<moec::bf16>(p, 3),            \
                      bufferArg<moec::bf16>(p, 8));                            \
  }                                                                            \
  MOEC_EMU_EXPORT_KERNEL(name)

ATTENTION_DKV_TEST(gradKVMma16, attentionGradKVMma<16, 32, 64, 128>)
ATTENTION_DKV_TEST(gradKVMma32, attentionGradKVMma<32, 32, 64, 128>)
ATTENTION_DKV_TEST(gradKVMma48, attentionGradKVMma<48, 32, 64, 128>)
ATTENTION_DKV_TEST(gradKVMma64, attentionGradKVMma<64, 32, 64, 128>)
ATTENTION_DKV_TEST(gradKVMma80, attentionGradKVMma<80, 32, 64, 128>)
ATTENTION_DKV_TEST(gradKVMma96, attentionGradKVMma<96, 32, 64, 128>)
ATTENTION_DKV_TEST(gradKVMma112, attentionGradKVMma<112, 32, 64, 128>)
ATTENTION_DKV_TEST(gradKVMma128, attentionGradKVMma<128, 32, 64, 128, 64>)
ATTENTION_DKV_TEST(gradKVMma160, attentionGradKVMma<160, 16, 64, 128, 80>)
ATTENTION_DKV_TEST(gradKVMma192, attentionGradKVMma<192, 16, 64, 128, 64>)
ATTENTION_DKV_TEST(gradKVMma224, attentionGradKVMma<224, 16, 64, 128, 32>)
ATTENTION_DKV_TEST(gradKVMma256, attentionGradKVMma<256, 16, 64, 128, 64>)
ATTENTION_DKV_TEST(gradKVCores8, attentionGradKV<8, 32, 32, 128>)
ATTENTION_DKV_TEST(gradKVCores32, attentionGradKV<32, 32, 32, 128>)
ATTENTION_DKV_TEST(gradKVCores24, attentionGradKV<24, 16, 32, 128>)
)cuda";

const EmuModule &attentionModule() {
  static std::once_flag once;
  static std::unique_ptr<EmuModule> module;
  std::call_once(once, [] {
    module = std::make_unique<EmuModule>(
        EmuModule::load(deviceHeaders() + deviceFile("attention.cuh") +
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
  int64_t qAt = 0;  // and q and dout (the gradient kernels)
};

struct Result {
  std::vector<float> out, lse;
};

/// Random bf16 inputs of a problem (dout only for the gradient tests: it is
/// drawn last, so the forward's inputs do not depend on it).
struct Inputs {
  std::vector<uint16_t> q, k, v, dout;
  std::vector<int32_t> mask;
  float scale = 0;
  int32_t scaleBits = 0;

  double at(const std::vector<uint16_t> &t, int64_t i) const {
    return static_cast<double>(moec::bf16ToFloat(t[static_cast<size_t>(i)]));
  }
};

Inputs makeInputs(const Problem &pb, unsigned seed, bool withDout) {
  const int64_t D = pb.headDim, B = pb.batch, H = pb.heads, G = pb.kvHeads;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto randomBf16 = [&](int64_t n) {
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (auto &x : v)
      x = moec::bf16FromFloat(2.0f * uniform(rng));
    return v;
  };
  Inputs in;
  in.q = randomBf16(pb.qAt + B * pb.sq * H * D);
  in.k = randomBf16(pb.kvAt + B * pb.rows * G * D);
  in.v = randomBf16(pb.kvAt + B * pb.rows * G * D);
  in.mask.assign(static_cast<size_t>(B * pb.rows), 1);
  if (pb.keyMask) {
    for (auto &m : in.mask)
      m = uniform(rng) > -0.4f; // about 30% padding
    for (int64_t j = 0; j < pb.rows; ++j)
      in.mask[static_cast<size_t>(j)] = 0; // batch 0 sees nothing
  }
  if (withDout)
    in.dout = randomBf16(pb.qAt + B * pb.sq * H * D);
  in.scale = 1.0f / std::sqrt(static_cast<float>(D));
  std::memcpy(&in.scaleBits, &in.scale, sizeof in.scaleBits);
  return in;
}

/// Element d of query (or output) row i of head h, and of key (value) row j
/// of K/V head g.
int64_t queryIndex(const Problem &pb, int64_t b, int64_t h, int64_t i,
                   int64_t d) {
  return ((b * pb.sq + i) * pb.heads + h) * pb.headDim + d;
}
int64_t keyIndex(const Problem &pb, int64_t b, int64_t g, int64_t j,
                 int64_t d) {
  return pb.kvAt + ((b * pb.rows + j) * pb.kvHeads + g) * pb.headDim + d;
}

/// The softmax probabilities of query i of head h over the kvLen keys (0
/// where not visible) and its log-sum-exp; false when it sees no key.
bool probabilities(const Problem &pb, const Inputs &in, int64_t b, int64_t h,
                   int64_t i, std::vector<double> &p, double &lse) {
  const int64_t g = h / (pb.heads / pb.kvHeads);
  std::vector<double> score(static_cast<size_t>(pb.kvLen), -INFINITY);
  double mx = -INFINITY;
  for (int64_t j = 0; j < pb.kvLen; ++j) {
    if ((pb.causal && j > i + pb.offset) ||
        !in.mask[static_cast<size_t>(b * pb.rows + j)])
      continue;
    double dot = 0;
    for (int64_t d = 0; d < pb.headDim; ++d)
      dot += in.at(in.q, pb.qAt + queryIndex(pb, b, h, i, d)) *
             in.at(in.k, keyIndex(pb, b, g, j, d));
    score[static_cast<size_t>(j)] = dot * in.scale;
    mx = std::max(mx, dot * in.scale);
  }
  p.assign(static_cast<size_t>(pb.kvLen), 0.0);
  if (mx == -INFINITY)
    return false;
  double sum = 0;
  for (int64_t j = 0; j < pb.kvLen; ++j)
    sum += std::exp(score[static_cast<size_t>(j)] - mx);
  lse = mx + std::log(sum);
  for (int64_t j = 0; j < pb.kvLen; ++j)
    p[static_cast<size_t>(j)] = std::exp(score[static_cast<size_t>(j)] - lse);
  return true;
}

/// A launch of one of the test kernels over `pb`: 128 threads, queries
/// `tq` a block (heads x `parts` blocks a head), the inputs' buffers and
/// the scalars testShape reads.
Launch problemLaunch(const Problem &pb, Inputs &in, int64_t tq, int64_t parts) {
  Launch launch(1, 128);
  launch.config.grid = {static_cast<unsigned>((pb.sq + tq - 1) / tq),
                        static_cast<unsigned>(pb.heads * parts),
                        static_cast<unsigned>(pb.batch)};
  launch.buffer(0, in.q).buffer(1, in.k).buffer(2, in.v).buffer(5, in.mask);
  const int64_t scalars[] = {pb.batch,  pb.sq,      pb.rows,    pb.kvLen,
                             pb.offset, pb.heads,   pb.kvHeads, in.scaleBits,
                             pb.causal, pb.keyMask, pb.withLse, pb.kvAt,
                             pb.qAt};
  for (int i = 0; i < 13; ++i)
    launch.scalar(i, scalars[i]);
  return launch;
}

/// Runs `kernel` on random inputs and the double reference on the same
/// bf16 values; returns both.
void runProblem(const Problem &pb, const char *kernel, unsigned seed,
                Result &got, Result &want) {
  const int64_t D = pb.headDim, B = pb.batch, H = pb.heads, G = pb.kvHeads;
  Inputs in = makeInputs(pb, seed, false);
  got.out.assign(static_cast<size_t>(B * pb.sq * H * D), 0.0f);
  std::vector<uint16_t> out(got.out.size(), moec::bf16FromFloat(7.0f));
  got.lse.assign(static_cast<size_t>(B * H * pb.sq), 5.0f);
  const bool cores = std::strcmp(kernel, "attentionCores8") == 0;
  // Past 128 dims a head takes two blocks, each writing half its columns.
  Launch launch =
      problemLaunch(pb, in, cores ? 32 : 64, !cores && D > 128 ? 2 : 1);
  launch.buffer(3, out).buffer(4, got.lse);
  launch.run(attentionModule(), kernel);
  for (size_t i = 0; i < out.size(); ++i)
    got.out[i] = moec::bf16ToFloat(out[i]);

  want.out.assign(got.out.size(), 0.0f);
  want.lse.assign(got.lse.size(), -INFINITY);
  std::vector<double> p;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < pb.sq; ++i) {
        const int64_t g = h / (H / G);
        double lse;
        if (!probabilities(pb, in, b, h, i, p, lse))
          continue; // nothing visible: out 0, lse -inf
        for (int64_t d = 0; d < D; ++d) {
          double o = 0;
          for (int64_t j = 0; j < pb.kvLen; ++j)
            o += p[static_cast<size_t>(j)] *
                 in.at(in.v, keyIndex(pb, b, g, j, d));
          want.out[static_cast<size_t>(queryIndex(pb, b, h, i, d))] =
              static_cast<float>(o);
        }
        want.lse[static_cast<size_t>((b * H + h) * pb.sq + i)] =
            static_cast<float>(lse);
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

/// Head dims past 128 (the MoA paper's big model has 256): 256, causal
/// over a cache with grouped-query heads; 192 with a key mask and Q, dO, K
/// and V rows off 16-byte boundaries; 160 causal, 224 with a key mask.
std::vector<Problem> wideHeadProblems() {
  Problem causal = problem(256, 21, 40);
  causal.rows = 48;
  causal.causal = true;
  causal.heads = 4;
  causal.kvHeads = 2;
  causal.batch = 1;
  Problem masked = problem(192, 30, 35);
  masked.keyMask = true;
  masked.kvAt = masked.qAt = 2;
  masked.heads = 2;
  masked.kvHeads = 1;
  Problem causal160 = problem(160, 19, 19);
  causal160.causal = true;
  causal160.batch = 1;
  Problem masked224 = problem(224, 17, 21); // batch 1 sees keys, 0 none
  masked224.keyMask = true;
  return {causal, masked, causal160, masked224};
}

/// The blocks a head takes in the dq and dk/dv kernels above
/// (AttentionPath.h): dq half the columns a block (a quarter at 256),
/// dk/dv 64 columns (80 at 160, 32 at 224).
int64_t gradQBlocks(int64_t headDim) { return headDim == 256 ? 4 : 2; }
int64_t gradKVBlocks(int64_t headDim) {
  return headDim / (headDim == 160 ? 80 : headDim == 224 ? 32 : 64);
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
  pb.kvAt = 2; // rows off 16-byte boundaries: plain loads
  expectClose(pb, "attentionMma128", 18);
}

// Head dims past 128 (the MoA paper's big model has 256): two blocks a
// head, each computing S whole and O for half the columns; only the first
// writes lse. Causal over a cache with grouped query heads, a key mask with
// rows off 16-byte boundaries, and 192 (96 columns a block).
TEST(EmuAttention, MmaForwardSplitHeads) {
  Problem pb = wideHeadProblems()[0];
  expectClose(pb, "attentionMma256", 19);
  pb = problem(256, 17, 23);
  pb.keyMask = true;
  pb.kvAt = 2;
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

// K and V two elements into their buffers: rows are not 16-byte aligned,
// so the kernel stages them with plain loads instead of cp.async. One
// element in, they are not even 4-byte aligned, which the tensor-core
// kernels' two-bf16 fragment loads need (every buffer is 64-byte aligned
// and these rows have an even length): the emu reports it.
TEST(EmuAttention, MmaForwardMisalignedKeys) {
  Problem pb = problem(32, 70, 90);
  pb.kvAt = 2;
  pb.causal = true;
  pb.kvHeads = 2;
  expectClose(pb, "attentionMma32", 14);
  pb.kvAt = 8; // aligned again
  expectClose(pb, "attentionMma32", 14);

  pb.kvAt = 1;
  Inputs in = makeInputs(pb, 14, false);
  std::vector<uint16_t> out(
      static_cast<size_t>(pb.batch * pb.sq * pb.heads * pb.headDim));
  std::vector<float> lse(static_cast<size_t>(pb.batch * pb.heads * pb.sq));
  Launch launch = problemLaunch(pb, in, 64, 1);
  launch.buffer(3, out).buffer(4, lse);
  const std::string error = launch.error(attentionModule(), "attentionMma32");
  EXPECT_NE(error.find("ld.global.b32: global address"), std::string::npos)
      << error;
  EXPECT_NE(error.find("is not 4-byte aligned"), std::string::npos) << error;
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

namespace {

/// The gradients of a problem in double, with dO random: P from the
/// reference, delta = <dO, O>, dS = P (dO . v - delta), dq = scale * sum_j
/// dS_j k_j, dk_j = scale * sum_i dS_ij q_i and dv_j = sum_i P_ij dO_i over
/// the query heads of K/V head g; and lse and delta as the forward and the
/// delta kernel give them (lse -inf for a row that sees no key).
struct Gradients {
  std::vector<float> lse, delta;
  std::vector<double> dq, dk, dv;
  int masked = 0; // rows that see no key
};

Gradients referenceGradients(const Problem &pb, const Inputs &in) {
  const int64_t D = pb.headDim, B = pb.batch, H = pb.heads, G = pb.kvHeads;
  Gradients r;
  r.lse.assign(static_cast<size_t>(B * H * pb.sq), -INFINITY);
  r.delta.assign(r.lse.size(), 0.0f);
  r.dq.assign(static_cast<size_t>(B * pb.sq * H * D), 0.0);
  r.dk.assign(static_cast<size_t>(B * pb.rows * G * D), 0.0);
  r.dv.assign(r.dk.size(), 0.0);
  std::vector<double> p;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < pb.sq; ++i) {
        const int64_t g = h / (H / G), row = (b * H + h) * pb.sq + i;
        double rowLse;
        if (!probabilities(pb, in, b, h, i, p, rowLse)) {
          ++r.masked;
          continue;
        }
        auto dout = [&](int64_t d) {
          return in.at(in.dout, pb.qAt + queryIndex(pb, b, h, i, d));
        };
        double rowDelta = 0;
        for (int64_t d = 0; d < D; ++d) {
          double o = 0;
          for (int64_t j = 0; j < pb.kvLen; ++j)
            o += p[static_cast<size_t>(j)] *
                 in.at(in.v, keyIndex(pb, b, g, j, d));
          rowDelta += dout(d) * o;
        }
        r.lse[static_cast<size_t>(row)] = static_cast<float>(rowLse);
        r.delta[static_cast<size_t>(row)] = static_cast<float>(rowDelta);
        for (int64_t j = 0; j < pb.kvLen; ++j) {
          const double pj = p[static_cast<size_t>(j)];
          if (pj == 0)
            continue;
          double dp = 0;
          for (int64_t d = 0; d < D; ++d)
            dp += dout(d) * in.at(in.v, keyIndex(pb, b, g, j, d));
          const double ds = pj * (dp - rowDelta);
          for (int64_t d = 0; d < D; ++d) {
            const auto key =
                static_cast<size_t>(keyIndex(pb, b, g, j, d) - pb.kvAt);
            r.dq[static_cast<size_t>(queryIndex(pb, b, h, i, d))] +=
                in.scale * ds * in.at(in.k, keyIndex(pb, b, g, j, d));
            r.dk[key] += in.scale * ds *
                         in.at(in.q, pb.qAt + queryIndex(pb, b, h, i, d));
            r.dv[key] += pj * dout(d);
          }
        }
      }
  return r;
}

/// `got` (bf16) within bf16 accuracy of `want`: 1% of the largest value
/// plus 1% of the element's own (dS is rounded to bf16 for the tensor-core
/// products, every result to bf16 when stored).
void expectNearBf16(const std::vector<uint16_t> &got,
                    const std::vector<double> &want, const char *what) {
  double scale = 0;
  for (double w : want)
    scale = std::max(scale, std::fabs(w));
  ASSERT_GT(scale, 0.05) << what << " all but zero";
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(testing::Message() << what << " " << i);
    ASSERT_NEAR(moec::bf16ToFloat(got[i]), want[i],
                1e-2 * scale + 1e-2 * std::fabs(want[i]));
  }
}

/// dq of `kernel` (tq queries a block, `parts` blocks a head) against
/// referenceGradients, fed the reference's lse and delta.
void expectGradQClose(const Problem &pb, const char *kernel, int64_t tq,
                      unsigned seed, int64_t parts = 1) {
  Inputs in = makeInputs(pb, seed, true);
  Gradients want = referenceGradients(pb, in);
  std::vector<uint16_t> dq(want.dq.size(), moec::bf16FromFloat(7.0f));
  Launch launch = problemLaunch(pb, in, tq, parts);
  launch.buffer(3, dq).buffer(4, want.lse).buffer(6, in.dout);
  launch.buffer(7, want.delta);
  launch.run(attentionModule(), kernel);
  expectNearBf16(dq, want.dq, "dq");
  if (pb.keyMask) {
    EXPECT_GT(want.masked, 0) << "batch 0 should have fully masked rows";
  }
}

/// dk and dv of `kernel` (tk keys a block, `parts` blocks a K/V head)
/// against referenceGradients: rows of keys no query sees get 0.
void expectGradKVClose(const Problem &pb, const char *kernel, int64_t tk,
                       unsigned seed, int64_t parts = 1) {
  Inputs in = makeInputs(pb, seed, true);
  Gradients want = referenceGradients(pb, in);
  std::vector<uint16_t> dk(want.dk.size(), moec::bf16FromFloat(0.0f));
  std::vector<uint16_t> dv(want.dv.size(), moec::bf16FromFloat(0.0f));
  Launch launch = problemLaunch(pb, in, 1, 1);
  launch.config.grid = {static_cast<unsigned>((pb.rows + tk - 1) / tk),
                        static_cast<unsigned>(pb.kvHeads * parts),
                        static_cast<unsigned>(pb.batch)};
  launch.buffer(3, dk).buffer(8, dv).buffer(4, want.lse).buffer(6, in.dout);
  launch.buffer(7, want.delta);
  launch.run(attentionModule(), kernel);
  expectNearBf16(dk, want.dk, "dk");
  expectNearBf16(dv, want.dv, "dv");
}

/// Masks and caches for both gradient kernels: causal over a cache with
/// grouped query heads; a key mask with rows that see nothing and Q, dO,
/// K and V rows off 16-byte boundaries (plain loads); causal with fewer
/// keys than queries (the first rows see none); a causal offset of 5,
/// which starts warps of keys whose first query tile sees some of them and
/// blocks whose first visible query is inside a tile.
std::vector<Problem> maskedGradientProblems() {
  std::vector<Problem> all;
  Problem pb = problem(32, 70, 83);
  pb.rows = 96;
  pb.causal = true;
  pb.heads = 6;
  pb.kvHeads = 2;
  all.push_back(pb);
  pb = problem(64, 40, 45);
  pb.keyMask = true;
  pb.kvAt = pb.qAt = 2;
  pb.heads = 2;
  pb.kvHeads = 1;
  all.push_back(pb);
  pb = problem(32, 90, 20);
  pb.causal = true;
  all.push_back(pb);
  pb = problem(16, 100, 105);
  pb.causal = true;
  pb.batch = 1;
  all.push_back(pb);
  return all;
}

} // namespace

// Lengths that fill no 64-query or 32-key tile, every head dim the
// tensor-core dq takes a block of.
TEST(EmuAttention, MmaGradQMatchesTheReference) {
  expectGradQClose(problem(32, 70, 70), "gradQMma32", 64, 31);
  expectGradQClose(problem(64, 33, 97), "gradQMma64", 64, 32);
  expectGradQClose(problem(16, 130, 5), "gradQMma16", 64, 33);
  expectGradQClose(problem(48, 20, 150), "gradQMma48", 64, 34);
  expectGradQClose(problem(128, 21, 45), "gradQMma128", 64, 35);
}

TEST(EmuAttention, MmaGradQMasksAndCaches) {
  unsigned seed = 36;
  for (const Problem &pb : maskedGradientProblems())
    expectGradQClose(pb, ("gradQMma" + std::to_string(pb.headDim)).c_str(), 64,
                     seed++);
}

// Past 128 dims each head takes several blocks, each computing S and dP
// whole and dq for some of the columns (16-key tiles): four at 256, two
// below.
TEST(EmuAttention, MmaGradQSplitHeads) {
  unsigned seed = 44;
  for (const Problem &pb : wideHeadProblems())
    expectGradQClose(pb, ("gradQMma" + std::to_string(pb.headDim)).c_str(), 64,
                     seed++, gradQBlocks(pb.headDim));
}

// The CUDA-core dq that f32 models and other head dims keep, on bf16 here.
TEST(EmuAttention, CudaCoreGradQOnBf16) {
  Problem pb = problem(8, 40, 45);
  pb.causal = true;
  pb.keyMask = true;
  pb.heads = 4;
  pb.kvHeads = 2;
  expectGradQClose(pb, "gradQCores8", 32, 39);
  expectGradQClose(problem(32, 50, 70), "gradQCores32", 32, 40);
}

// Lengths that fill no 64-key or 32-query tile, every head dim the
// tensor-core dk/dv takes in one block; at 96 a key mask with Q and dO
// rows off 16-byte boundaries.
TEST(EmuAttention, MmaGradKVMatchesTheReference) {
  expectGradKVClose(problem(32, 70, 70), "gradKVMma32", 64, 51);
  expectGradKVClose(problem(64, 33, 97), "gradKVMma64", 64, 52);
  expectGradKVClose(problem(16, 130, 5), "gradKVMma16", 64, 53);
  expectGradKVClose(problem(48, 20, 150), "gradKVMma48", 64, 54);
  expectGradKVClose(problem(80, 45, 70), "gradKVMma80", 64, 63);
  expectGradKVClose(problem(112, 70, 33), "gradKVMma112", 64, 64);
  Problem pb = problem(96, 33, 50);
  pb.keyMask = true;
  pb.qAt = 2;
  pb.heads = 2;
  pb.kvHeads = 2;
  expectGradKVClose(pb, "gradKVMma96", 64, 60);
}

// Past 112 dims each K/V head takes blocks of 64 columns, each computing
// S^T and dP^T whole and dk, dv for its columns: at 128, causal over a
// cache with grouped-query heads; past 128, against 16-query tiles.
TEST(EmuAttention, MmaGradKVSplitHeads) {
  Problem pb = problem(128, 45, 70);
  pb.rows = 80;
  pb.causal = true;
  pb.heads = 4;
  pb.kvHeads = 2;
  expectGradKVClose(pb, "gradKVMma128", 64, 59, 2);
  unsigned seed = 61;
  for (const Problem &wide : wideHeadProblems())
    expectGradKVClose(wide,
                      ("gradKVMma" + std::to_string(wide.headDim)).c_str(), 64,
                      seed++, gradKVBlocks(wide.headDim));
}

TEST(EmuAttention, MmaGradKVMasksAndCaches) {
  unsigned seed = 55;
  for (const Problem &pb : maskedGradientProblems())
    expectGradKVClose(pb, ("gradKVMma" + std::to_string(pb.headDim)).c_str(),
                      64, seed++);
}

// The CUDA-core dk/dv kernel (every model's): grouped-query heads summed
// into their K/V head, causal over a cache, a key mask, a head dim that
// is no multiple of 16 and query tiles of 16.
TEST(EmuAttention, CudaCoreGradKVOnBf16) {
  Problem pb = problem(8, 40, 45);
  pb.causal = true;
  pb.keyMask = true;
  pb.heads = 4;
  pb.kvHeads = 2;
  expectGradKVClose(pb, "gradKVCores8", 32, 41);
  pb = problem(32, 50, 70);
  pb.heads = 6;
  pb.kvHeads = 2;
  expectGradKVClose(pb, "gradKVCores32", 32, 42);
  pb = problem(24, 30, 90);
  pb.rows = 96;
  pb.causal = true;
  expectGradKVClose(pb, "gradKVCores24", 32, 43);
}
