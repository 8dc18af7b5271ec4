//===- Bf16Staging.cpp - f32 copies of a step's bf16 operands -------------===//
//
// The conversion loops are compiled for AVX-512, AVX2 and baseline x86-64;
// each is exact (widening) or one integer rounding (narrowing), so every
// version gives the same bits.
//
//===----------------------------------------------------------------------===//

#include "Bf16Staging.h"

#include <algorithm>

namespace moec::cpu {

namespace {

bool isBf16(const TensorView &v) {
  return v.present() && v.dtype == DType::BF16;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void
widenRun(const uint16_t *from, float *to, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    to[i] = bf16ToFloat(from[i]);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void
roundRun(const float *from, uint16_t *to, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    to[i] = bf16FromFloat(from[i]);
}

/// Runs `convert(begin, count)` over [0, n) in parallel runs.
template <typename Fn> void inRuns(int64_t n, Fn &&convert) {
  constexpr int64_t kRun = 16384;
  parallelFor((n + kRun - 1) / kRun, kRun, [&](int64_t r) {
    int64_t begin = r * kRun;
    convert(begin, std::min(kRun, n - begin));
  });
}

} // namespace

void widenBf16(const uint16_t *from, float *to, int64_t n) {
  inRuns(n, [&](int64_t begin, int64_t count) {
    widenRun(from + begin, to + begin, count);
  });
}

void roundToBf16(const float *from, uint16_t *to, int64_t n) {
  inRuns(n, [&](int64_t begin, int64_t count) {
    roundRun(from + begin, to + begin, count);
  });
}

Bf16Staging::Bf16Staging(KernelContext &ctx, BlockPool &pool) : pool(pool) {
  // Copies live for one step: what outlives it (the hidden layers) is keyed
  // by the inputs' own storage.
  if (std::any_of(ctx.inputs.begin(), ctx.inputs.end(), isBf16))
    ctx.storedInputs = ctx.inputs;
  for (TensorView &v : ctx.inputs)
    stage(v, false);
  for (TensorView &v : ctx.outputs)
    stage(v, true);
}

Bf16Staging::~Bf16Staging() {
  for (BlockPool::Block &b : blocks)
    pool.give(b);
}

void Bf16Staging::finish() {
  for (Staged &s : staged)
    if (s.output)
      roundToBf16(s.copy.as<float>(), s.original.as<uint16_t>(),
                  s.copy.numel());
}

void Bf16Staging::stage(TensorView &v, bool output) {
  if (!isBf16(v))
    return;
  TensorView copy{DType::F32, v.shape, nullptr};
  blocks.push_back(pool.take(copy.nbytes(), /*replaceLargest=*/true,
                             "the f32 copy of a bf16 operand"));
  copy.data = blocks.back().data;
  widenBf16(v.as<uint16_t>(), copy.as<float>(), copy.numel());
  staged.push_back({v, copy, output});
  v = copy;
}

} // namespace moec::cpu
