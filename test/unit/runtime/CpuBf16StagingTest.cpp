//===- CpuBf16StagingTest.cpp - f32 copies of bf16 operands ---------------===//

#include "KernelTestUtil.h"
#include "cpu/Bf16Staging.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <limits>
#include <random>

using namespace moec;
using namespace moec::test;

namespace {

float fromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Every bf16 value widens exactly (in runs across the parallel blocks).
TEST(CpuBf16Staging, WideningIsExactForEveryBitPattern) {
  std::vector<uint16_t> bits(1 << 16);
  for (size_t i = 0; i < bits.size(); ++i)
    bits[i] = static_cast<uint16_t>(i);
  std::vector<float> wide(bits.size());
  cpu::widenBf16(bits.data(), wide.data(), static_cast<int64_t>(bits.size()));
  for (size_t i = 0; i < bits.size(); ++i) {
    uint32_t got;
    std::memcpy(&got, &wide[i], 4);
    ASSERT_EQ(got, static_cast<uint32_t>(i) << 16) << "bf16 bits " << i;
  }
}

// The vectorised rounding gives the scalar rule's bits: nearest, ties to
// even, NaN kept quiet with its sign, overflow to infinity.
TEST(CpuBf16Staging, RoundingMatchesTheScalarRule) {
  std::vector<float> values = {
      0.0f,
      -0.0f,
      1.0f,
      -1.0f,
      fromBits(0x3f808000u), // 1 + 2^-8: a tie, rounds down to even
      fromBits(0x3f818000u), // 1 + 3 * 2^-8: a tie, rounds up to even
      fromBits(0x3f808001u), // just above the tie: rounds up
      fromBits(0x00000001u), // the smallest subnormal
      std::numeric_limits<float>::max(),
      -std::numeric_limits<float>::max(),
      std::numeric_limits<float>::infinity(),
      -std::numeric_limits<float>::infinity(),
      fromBits(0x7fc00000u),
      fromBits(0xff800001u),  // a signalling NaN, negative
      fromBits(0x7f7f8000u)}; // rounds up into infinity
  std::mt19937 rng(5);
  while (values.size() < 3 * 16384 + 101)
    values.push_back(fromBits(rng()));
  std::vector<uint16_t> got(values.size());
  cpu::roundToBf16(values.data(), got.data(),
                   static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i)
    ASSERT_EQ(got[i], bf16FromFloat(values[i])) << "element " << i;
  EXPECT_EQ(got[4], 0x3f80u);
  EXPECT_EQ(got[5], 0x3f82u);
  EXPECT_EQ(got[6], 0x3f81u);
  EXPECT_TRUE(std::isnan(bf16ToFloat(got[13])) && (got[13] & 0x8000u));
  EXPECT_EQ(got[14], 0x7f80u);
}

// A step sees f32 copies of its bf16 operands (f32 ones untouched), keyed
// for the hidden cache by the stored operands; its bf16 results are rounded
// back by finish(); the copies' memory is reused by the next step.
TEST(CpuBf16Staging, StepsRunOnF32CopiesThatThePoolReuses) {
  Tensor x = zeros(DType::BF16, {3, 5}), f = randomTensor(DType::F32, {4}, 3);
  Tensor y = zeros(DType::BF16, {3, 5});
  for (int64_t i = 0; i < 15; ++i)
    x.data<uint16_t>()[i] = bf16FromFloat(0.37f * static_cast<float>(i) - 2);
  cpu::BlockPool pool;
  Json noAttrs = Json::object();
  void *firstCopy = nullptr;
  for (int step = 0; step < 2; ++step) {
    cpu::KernelContext ctx{"test",     {x.view(), f.view()},
                           {y.view()}, cpu::Attrs(noAttrs, "test"),
                           nullptr,    {}};
    cpu::Bf16Staging staging(ctx, pool);
    ASSERT_EQ(ctx.storedInputs.size(), 2u);
    EXPECT_EQ(ctx.storedInputs[0].data, x.raw());
    EXPECT_EQ(ctx.inputs[0].dtype, DType::F32);
    EXPECT_EQ(ctx.inputs[1].data, f.raw());
    EXPECT_EQ(ctx.outputs[0].dtype, DType::F32);
    if (step == 0)
      firstCopy = ctx.inputs[0].data;
    else
      EXPECT_TRUE(ctx.inputs[0].data == firstCopy ||
                  ctx.outputs[0].data == firstCopy);
    const float *in = ctx.inputs[0].as<float>();
    float *out = ctx.outputs[0].as<float>();
    for (int64_t i = 0; i < 15; ++i) {
      ASSERT_EQ(in[i], bf16ToFloat(x.data<uint16_t>()[i]));
      out[i] = in[i] * (1.0f + 1.0f / 512) + static_cast<float>(step);
    }
    staging.finish();
    for (int64_t i = 0; i < 15; ++i)
      ASSERT_EQ(y.data<uint16_t>()[i], bf16FromFloat(out[i]));
  }
}

} // namespace
