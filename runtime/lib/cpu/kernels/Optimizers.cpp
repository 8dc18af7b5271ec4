//===- Optimizers.cpp - schedules, gradient norms and updates -------------===//
//
// The updates compute each element in double from the element's inputs,
// read before any output is written, so new_param / new_m / new_v may alias
// param / m / v (the plan updates them in place).
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "Kernels.h"
#include "UpdateLoops.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace moec::cpu {

using defs::LrSchedule;

namespace {

double scheduledLr(const KernelContext &ctx, int64_t step) {
  namespace lr = defs::ops::lr_schedule;
  LrSchedule kind = enumAttr<LrSchedule>(ctx, lr::kKind);
  double base = ctx.attrs.getFloat(lr::kBaseLr);
  int64_t warmup = ctx.attrs.getInt(lr::kWarmup, lr::kWarmupDefault);
  int64_t total = ctx.attrs.getInt(lr::kTotalSteps, lr::kTotalStepsDefault);
  double finalLr = ctx.attrs.getFloat(lr::kFinalLr, lr::kFinalLrDefault);
  double power = ctx.attrs.getFloat(lr::kPower, lr::kPowerDefault);
  if (warmup < 0 || total < 0)
    ctx.fail(fmt::format("warmup = {} and total_steps = {} must be >= 0",
                         warmup, total));
  if (!(power > 0) || !std::isfinite(power))
    ctx.fail(fmt::format("power = {} must be a finite number > 0", power));
  double s = static_cast<double>(step), w = static_cast<double>(warmup);
  if (kind == LrSchedule::Constant)
    return base;
  if (step < warmup)
    return base * s / w;
  if (kind == LrSchedule::InverseSqrt)
    return warmup == 0 ? base / std::sqrt(s) : base * std::sqrt(w / s);
  double span = static_cast<double>(std::max<int64_t>(1, total - warmup));
  double left = static_cast<double>(std::max<int64_t>(0, total - step));
  if (kind == LrSchedule::Linear)
    return finalLr + (base - finalLr) * left / span;
  if (kind == LrSchedule::Polynomial)
    return finalLr + (base - finalLr) * std::pow(left / span, power);
  double progress = std::min(1.0, (s - w) / span);
  return finalLr + (base - finalLr) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

/// Runs `update(begin, count, into)` over [0, n) in blocks of kUpdateBlock
/// elements, in parallel; `into(out)` is where a block writes an output:
/// `out + begin`, or scratch when nobody reads that output.
template <typename T, typename Fn> void forEachBlock(int64_t n, Fn &&update) {
  constexpr int64_t kUpdateBlock = 16384;
  int64_t blocks = (n + kUpdateBlock - 1) / kUpdateBlock;
  parallelFor(blocks, 30 * kUpdateBlock, [&](int64_t b) {
    int64_t begin = b * kUpdateBlock, count = std::min(kUpdateBlock, n - begin);
    Scratch scratch;
    update(begin, count,
           [&](T *out) { return out ? out + begin : scratch.get<T>(count); });
  });
}

/// Checks param, grad and moment operands share dtype and shape.
template <typename T>
void checkLike(const KernelContext &ctx, const TensorView &param,
               const TensorView &other, std::string_view name) {
  expectDType(ctx, other, dtypeOf<T>(), name);
  expectShape(ctx, other, param.shape, name);
}

template <typename T> void adamUpdate(KernelContext &ctx) {
  const TensorView &param = requireInput(ctx, 0, "param");
  const TensorView &grad = requireInput(ctx, 1, "grad");
  const TensorView &m = requireInput(ctx, 2, "m");
  const TensorView &v = requireInput(ctx, 3, "v");
  checkLike<T>(ctx, param, grad, "grad");
  checkLike<T>(ctx, param, m, "m");
  checkLike<T>(ctx, param, v, "v");
  int64_t step = scalarInt(ctx, ctx.in(4), "step");
  if (step < 1)
    ctx.fail(fmt::format("step = {} but Adam steps are 1-based", step));
  expectNumel(ctx, requireInput(ctx, 5, "lr"), 1, DType::F32, "lr");
  double lr = scalarFloat(ctx, ctx.in(5), "lr");
  double gradScale = scalarFloat(ctx, ctx.in(6), "grad_scale");
  namespace adam = defs::ops::adam_update;
  double beta1 = ctx.attrs.getFloat(adam::kBeta1),
         beta2 = ctx.attrs.getFloat(adam::kBeta2);
  double eps = ctx.attrs.getFloat(adam::kEps);
  double wd = ctx.attrs.getFloat(adam::kWeightDecay, adam::kWeightDecayDefault);
  bool decoupled = ctx.attrs.getFlag(adam::kDecoupled);
  const TensorView &newP = ctx.out(0), &newM = ctx.out(1), &newV = ctx.out(2);
  for (const TensorView *out : {&newP, &newM, &newV})
    if (out->present())
      checkLike<T>(ctx, param, *out, "the updated state");

  AdamStep constants{lr,
                     gradScale,
                     beta1,
                     beta2,
                     eps,
                     wd,
                     1.0 - std::pow(beta1, static_cast<double>(step)),
                     1.0 - std::pow(beta2, static_cast<double>(step)),
                     decoupled};
  const T *pp = param.as<T>(), *gp = grad.as<T>(), *mp = m.as<T>(),
          *vp = v.as<T>();
  T *po = newP.as<T>(), *mo = newM.as<T>(), *vo = newV.as<T>();
  forEachBlock<T>(param.numel(),
                  [&](int64_t begin, int64_t count, auto &&into) {
                    adamValues(pp + begin, gp + begin, mp + begin, vp + begin,
                               into(po), into(mo), into(vo), count, constants);
                  });
}

template <typename T> void sgdUpdate(KernelContext &ctx) {
  const TensorView &param = requireInput(ctx, 0, "param");
  const TensorView &grad = requireInput(ctx, 1, "grad");
  const TensorView &m = requireInput(ctx, 2, "m");
  checkLike<T>(ctx, param, grad, "grad");
  checkLike<T>(ctx, param, m, "m");
  expectNumel(ctx, requireInput(ctx, 3, "lr"), 1, DType::F32, "lr");
  double lr = scalarFloat(ctx, ctx.in(3), "lr");
  double gradScale = scalarFloat(ctx, ctx.in(4), "grad_scale");
  namespace sgd = defs::ops::sgd_update;
  double momentum = ctx.attrs.getFloat(sgd::kMomentum, sgd::kMomentumDefault);
  double wd = ctx.attrs.getFloat(sgd::kWeightDecay, sgd::kWeightDecayDefault);
  const TensorView &newP = ctx.out(0), &newM = ctx.out(1);
  for (const TensorView *out : {&newP, &newM})
    if (out->present())
      checkLike<T>(ctx, param, *out, "the updated state");

  const T *pp = param.as<T>(), *gp = grad.as<T>(), *mp = m.as<T>();
  T *po = newP.as<T>(), *mo = newM.as<T>();
  SgdStep constants{lr, gradScale, momentum, wd};
  forEachBlock<T>(param.numel(),
                  [&](int64_t begin, int64_t count, auto &&into) {
                    sgdValues(pp + begin, gp + begin, mp + begin, into(po),
                              into(mo), count, constants);
                  });
}

} // namespace

void lrScheduleKernel(KernelContext &ctx) {
  checkArity(ctx, 1, 1, 1, 1);
  int64_t step = scalarInt(ctx, ctx.in(0), "step");
  if (step < 1)
    ctx.fail(fmt::format("step = {} but schedule steps are 1-based", step));
  double lr = scheduledLr(ctx, step);
  const TensorView &out = ctx.out(0);
  expectNumel(ctx, out, 1, DType::F32, "lr");
  if (out.present())
    *out.as<float>() = static_cast<float>(lr);
}

void globalNormKernel(KernelContext &ctx) {
  const TensorView &out = ctx.out(0);
  checkArity(ctx, 0, SIZE_MAX, 1, 1);
  // Fixed-size chunks summed in parallel, then the partial sums in operand
  // and chunk order: the grouping never depends on the thread count.
  constexpr int64_t kChunk = 1 << 15;
  struct Chunk {
    size_t input;
    int64_t begin, end;
  };
  std::vector<Chunk> chunks;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const TensorView &g = requireInput(ctx, i, "a gradient");
    if (g.dtype != DType::F32 && g.dtype != DType::F64)
      ctx.fail(fmt::format("operand #{} must be f32 or f64, got {}", i,
                           dtypeName(g.dtype)));
    for (int64_t b = 0; b < g.numel(); b += kChunk)
      chunks.push_back({i, b, std::min(g.numel(), b + kChunk)});
  }
  std::vector<double> partial(chunks.size());
  parallelFor(static_cast<int64_t>(chunks.size()), kChunk, [&](int64_t c) {
    const Chunk &ch = chunks[c];
    const TensorView &g = ctx.inputs[ch.input];
    int64_t count = ch.end - ch.begin;
    partial[c] = g.dtype == DType::F32
                     ? sumOfSquares(g.as<float>() + ch.begin, count)
                     : sumOfSquares(g.as<double>() + ch.begin, count);
  });
  double total = 0;
  for (double p : partial)
    total += p;
  if (!out.present())
    return;
  if (out.numel() != 1)
    ctx.fail(fmt::format("the result must be a scalar, got shape {}",
                         shapeString(out.shape)));
  dispatchFloat(ctx, out, "the result", [&](auto tag) {
    *out.as<decltype(tag)>() = static_cast<decltype(tag)>(std::sqrt(total));
  });
}

void adamUpdateKernel(KernelContext &ctx) {
  checkArity(ctx, 7, 7, 3, 3);
  dispatchFloat(ctx, requireInput(ctx, 0, "param"), "param",
                [&](auto tag) { adamUpdate<decltype(tag)>(ctx); });
}

void sgdUpdateKernel(KernelContext &ctx) {
  checkArity(ctx, 5, 5, 2, 2);
  dispatchFloat(ctx, requireInput(ctx, 0, "param"), "param",
                [&](auto tag) { sgdUpdate<decltype(tag)>(ctx); });
}

} // namespace moec::cpu
