//===- Activations.cpp - pointwise activations and dropout ----------------===//

#include "ActivationFns.h"
#include "Kernels.h"
#include "Philox.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/format.h>

namespace moec::cpu {

namespace {

template <typename T> void activation(KernelContext &ctx) {
  const TensorView &x = requireInput(ctx, 0, "x");
  const TensorView &y = ctx.out(0);
  expectNumel(ctx, y, x.numel(), dtypeOf<T>(), "the result");
  Activation kind = enumAttr<Activation>(ctx, defs::ops::activation::kKind);
  if (!y.present())
    return;
  const T *in = x.as<T>();
  T *out = y.as<T>();
  act::withKind(kind, [&](auto k) {
    act::forChunks(x.numel(), [&](int64_t i0, int64_t count) {
      act::values<decltype(k)::value>(in + i0, out + i0,
                                      static_cast<T *>(nullptr), count);
    });
  });
}

template <typename T> void activationGrad(KernelContext &ctx) {
  const TensorView &x = requireInput(ctx, 0, "x");
  const TensorView &dy = requireInput(ctx, 1, "dy");
  const TensorView &dx = ctx.out(0);
  expectNumel(ctx, dy, x.numel(), dtypeOf<T>(), "dy");
  expectNumel(ctx, dx, x.numel(), dtypeOf<T>(), "dx");
  Activation kind = enumAttr<Activation>(ctx, defs::ops::activation_grad::kKind);
  if (!dx.present())
    return;
  const T *in = x.as<T>(), *g = dy.as<T>();
  T *out = dx.as<T>();
  // dx = f'(x) dy, with f(x) into a chunk-sized buffer.
  act::withKind(kind, [&](auto k) {
    act::forChunks(x.numel(), [&](int64_t i0, int64_t count) {
      T value[act::kChunk];
      act::values<decltype(k)::value>(in + i0, value, out + i0, count);
      for (int64_t i = i0; i < i0 + count; ++i)
        out[i] *= g[i];
    });
  });
}

/// out[i] = keep(i) ? in[i] / (1 - rate) : 0. Draws one Philox block per
/// four elements; element i uses word i % 4 of block i / 4, exactly as
/// philoxUniform(seed, stream, i) does. Each task draws its blocks in one
/// philoxBlocks call, and keep(i), uniformFromWord(word) < 1 - rate, is
/// the same test on the word's 24 bits: (word >> 8) < ceil((1 - rate) 2^24).
template <typename T>
void applyDropout(const KernelContext &ctx, const TensorView &in,
                  const TensorView &out) {
  expectNumel(ctx, out, in.numel(), dtypeOf<T>(), "the result");
  uint64_t seed = static_cast<uint64_t>(scalarInt(ctx, ctx.in(1), "seed"));
  // moe.dropout and moe.dropout_grad name their attributes alike.
  uint64_t stream =
      static_cast<uint64_t>(ctx.attrs.getInt(defs::ops::dropout::kStream));
  double rate = ctx.attrs.getFloat(defs::ops::dropout::kRate);
  if (!(rate >= 0.0 && rate <= 1.0))
    ctx.fail(fmt::format("rate must be in [0, 1], got {}", rate));
  if (!out.present())
    return;
  double keepProb = 1.0 - rate;
  T divisor = static_cast<T>(keepProb);
  const T *src = in.as<T>();
  T *dst = out.as<T>();
  int64_t n = in.numel();
  const uint32_t threshold =
      static_cast<uint32_t>(std::ceil(keepProb * 16777216.0));
  constexpr int64_t kBlocks = 256; // 1024 elements a task
  const int64_t blocks = (n + 3) / 4;
  parallelFor((blocks + kBlocks - 1) / kBlocks, 64 * kBlocks, [&](int64_t t) {
    const int64_t first = t * kBlocks;
    const int64_t count = std::min(kBlocks, blocks - first);
    uint32_t words[4 * kBlocks];
    philoxBlocks(seed, stream, static_cast<uint64_t>(first), count, words);
    const int64_t begin = 4 * first, end = std::min(n, begin + 4 * count);
    for (int64_t i = begin; i < end; ++i)
      dst[i] = (words[i - begin] >> 8) < threshold ? src[i] / divisor : T(0);
  });
}

} // namespace

void activationKernel(KernelContext &ctx) {
  checkArity(ctx, 1, 1, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { activation<decltype(tag)>(ctx); });
}

void activationGradKernel(KernelContext &ctx) {
  checkArity(ctx, 2, 2, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { activationGrad<decltype(tag)>(ctx); });
}

void castKernel(KernelContext &ctx) {
  checkArity(ctx, 1, 1, 1, 1);
  const TensorView &x = requireInput(ctx, 0, "x");
  const TensorView &y = ctx.out(0);
  expectNumel(ctx, y, x.numel(), y.dtype, "the result");
  if (!y.present())
    return;
  // bf16 operands arrive as f32 (the device stages them): f32 <-> f64 here.
  dispatchFloat(ctx, x, "x", [&](auto from) {
    using From = decltype(from);
    dispatchFloat(ctx, y, "the result", [&](auto to) {
      using To = decltype(to);
      const From *src = x.as<From>();
      To *dst = y.as<To>();
      parallelFor(x.numel(), 1,
                  [&](int64_t i) { dst[i] = static_cast<To>(src[i]); });
    });
  });
}

bool castWithBf16(KernelContext &ctx) {
  if (ctx.inputs.size() != 1 || ctx.outputs.size() != 1)
    return false;
  const TensorView &x = ctx.inputs[0], &y = ctx.outputs[0];
  auto f32OrBf16 = [](const TensorView &v) {
    return v.present() && (v.dtype == DType::F32 || v.dtype == DType::BF16);
  };
  if (!f32OrBf16(x) || !f32OrBf16(y) || x.numel() != y.numel() ||
      (x.dtype == DType::F32 && y.dtype == DType::F32))
    return false;
  // Overlapping storage of different widths goes through the staging.
  if (x.dtype != y.dtype && viewsOverlap(x, y))
    return false;
  const int64_t n = x.numel();
  if (x.dtype == y.dtype) {
    std::memmove(y.as<uint16_t>(), x.as<uint16_t>(), size_t(n) * 2);
  } else if (x.dtype == DType::BF16) {
    const uint16_t *src = x.as<uint16_t>();
    float *dst = y.as<float>();
    parallelFor(n, 1, [&](int64_t i) { dst[i] = bf16ToFloat(src[i]); });
  } else {
    const float *src = x.as<float>();
    uint16_t *dst = y.as<uint16_t>();
    parallelFor(n, 1, [&](int64_t i) { dst[i] = bf16FromFloat(src[i]); });
  }
  return true;
}

void dropoutKernel(KernelContext &ctx) {
  checkArity(ctx, 2, 2, 1, 1);
  const TensorView &x = requireInput(ctx, 0, "x");
  dispatchFloat(ctx, x, "x", [&](auto tag) {
    applyDropout<decltype(tag)>(ctx, x, ctx.out(0));
  });
}

void dropoutGradKernel(KernelContext &ctx) {
  checkArity(ctx, 2, 2, 1, 1);
  const TensorView &dy = requireInput(ctx, 0, "dy");
  dispatchFloat(ctx, dy, "dy", [&](auto tag) {
    applyDropout<decltype(tag)>(ctx, dy, ctx.out(0));
  });
}

} // namespace moec::cpu
