//===- Rope.cpp - rotary position embeddings ------------------------------===//
//
// moe.rope: one table of f32 cos/sin per call (positions start .. start +
// S - 1, one entry per rotated pair), then every pair of every head of
// every row turned by it. The table is computed as the op defines it, so
// the generated kernels, which compute each entry where they need it, get
// the same bits.
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "Kernels.h"

#include <cmath>
#include <fmt/format.h>
#include <vector>

namespace moec::cpu {

namespace {

struct RopeDims {
  int64_t rows, seq, heads, headDim, rotary;
};

RopeDims ropeDims(const KernelContext &ctx, const TensorView &x) {
  namespace rope = defs::ops::rope;
  RopeDims d;
  d.heads = ctx.attrs.getInt(rope::kNumHeads);
  d.headDim = ctx.attrs.getInt(rope::kHeadDim);
  d.rotary = ctx.attrs.getInt(rope::kRotaryDim);
  if (d.heads < 1 || d.headDim < 1 || d.rotary < 2 || d.rotary % 2 != 0 ||
      d.rotary > d.headDim)
    ctx.fail(fmt::format("num_heads = {}, head_dim = {}, rotary_dim = {}: "
                         "rotary_dim must be even, >= 2 and at most head_dim",
                         d.heads, d.headDim, d.rotary));
  if (x.rank() != 3 || x.dim(2) != d.heads * d.headDim)
    ctx.fail(fmt::format("x must be [B, S, {}] (num_heads * head_dim), got "
                         "shape {}",
                         d.heads * d.headDim, shapeString(x.shape)));
  d.seq = x.dim(1);
  d.rows = x.dim(0) * d.seq;
  return d;
}

/// cos and sin of every (position, pair), interleaved: the f32 values
/// moe.rope defines (inverse frequency rounded from double, the angle an
/// f32 product, cos and sin of it in double rounded to f32).
std::vector<float> cosSinTable(int64_t start, int64_t seq, int64_t rotary,
                               double base) {
  int64_t half = rotary / 2;
  std::vector<float> inv(half);
  for (int64_t i = 0; i < half; ++i)
    inv[i] = static_cast<float>(std::pow(
        base, -2.0 * static_cast<double>(i) / static_cast<double>(rotary)));
  std::vector<float> table(seq * half * 2);
  for (int64_t s = 0; s < seq; ++s)
    for (int64_t i = 0; i < half; ++i) {
      float angle = static_cast<float>(start + s) * inv[i];
      table[(s * half + i) * 2] =
          static_cast<float>(std::cos(static_cast<double>(angle)));
      table[(s * half + i) * 2 + 1] =
          static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  return table;
}

template <typename T> void rope(KernelContext &ctx) {
  namespace rope = defs::ops::rope;
  const TensorView &x = requireInput(ctx, 0, "x");
  const TensorView &y = ctx.out(0);
  RopeDims d = ropeDims(ctx, x);
  int64_t start = scalarInt(ctx, ctx.in(1), "start");
  if (start < 0)
    ctx.fail(fmt::format("start = {} must be >= 0", start));
  double base = ctx.attrs.getFloat(rope::kBase, rope::kBaseDefault);
  bool inverse = ctx.attrs.getFlag(rope::kInverse);
  int64_t width = d.heads * d.headDim;
  expectRows(ctx, y, d.rows, width, dtypeOf<T>(), "the result");
  if (!y.present())
    return;
  std::vector<float> table = cosSinTable(start, d.seq, d.rotary, base);
  const T *src = x.as<T>();
  T *dst = y.as<T>();
  int64_t half = d.rotary / 2;
  // The sign of sin in a's output (b's is the opposite): a' = a cos - b sin
  // forward, a cos + b sin inverse.
  T sign = inverse ? T(1) : T(-1);
  parallelFor(d.rows, width, [&](int64_t r) {
    const float *cs = table.data() + (r % d.seq) * half * 2;
    for (int64_t h = 0; h < d.heads; ++h) {
      const T *in = src + r * width + h * d.headDim;
      T *out = dst + r * width + h * d.headDim;
      for (int64_t i = 0; i < half; ++i) {
        T c = cs[2 * i], s = cs[2 * i + 1];
        // Both read before either is written: out may be in.
        T a = in[i], b = in[i + half];
        out[i] = a * c + b * (sign * s);
        out[i + half] = b * c + a * (-sign * s);
      }
      for (int64_t i = d.rotary; i < d.headDim; ++i)
        out[i] = in[i];
    }
  });
}

} // namespace

void ropeKernel(KernelContext &ctx) {
  checkArity(ctx, 2, 2, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { rope<decltype(tag)>(ctx); });
}

} // namespace moec::cpu
