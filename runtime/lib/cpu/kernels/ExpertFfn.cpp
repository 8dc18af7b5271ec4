//===- ExpertFfn.cpp - gathered expert FFN and its gradient ---------------===//
//
// Kept assignments (t, j) are grouped by expert in token order and their rows
// gathered into one matrix (ExpertGroups.h); each expert's rows then go
// through its gemms. Results are combined per token in ascending j, so y and
// dx do not depend on the grouping.
//
// The work runs in phases (all gathers, then every expert's gemms, then all
// pointwise work, ...) rather than expert by expert, and each phase's gemms
// run as one GemmBatch, so the cores are handed over a few times per call,
// not per expert, and small experts do not leave them idle. On the cpu
// device the gradient takes the hidden layer's pre-activations from the
// forward (HiddenCache.h) instead of recomputing them.
//
//===----------------------------------------------------------------------===//

#include "ActivationFns.h"
#include "cpu/HiddenCache.h"
#include "Common.h"
#include "ExpertGroups.h"
#include "GemmBatch.h"
#include "Kernels.h"

#include <cstring>
#include <fmt/format.h>
#include <tuple>

namespace moec::cpu {

namespace {

struct FfnOperands {
  const TensorView &x, &expert, &gates, &slot, &w1, &b1, &w2, &b2, &w3;
  int64_t n, d, k, numExperts, hidden;
};

template <typename T> FfnOperands ffnOperands(const KernelContext &ctx) {
  FfnOperands o{requireInput(ctx, 0, "x"),
                requireInput(ctx, 1, "expert"),
                requireInput(ctx, 2, "gates"),
                requireInput(ctx, 3, "slot"),
                requireInput(ctx, 4, "w1"),
                ctx.in(5),
                requireInput(ctx, 6, "w2"),
                ctx.in(7),
                ctx.in(8),
                0,
                0,
                0,
                0,
                0};
  if (o.x.rank() == 0 || o.expert.rank() == 0)
    ctx.fail("x must be [..., d] and expert [..., k]");
  DType dt = dtypeOf<T>();
  RowShape xs = rowShape(o.x);
  o.n = xs.rows;
  o.d = xs.width;
  o.k = rowShape(o.expert).width;
  expectRows(ctx, o.expert, o.n, o.k, DType::I32, "expert");
  expectRows(ctx, o.gates, o.n, o.k, dt, "gates");
  expectRows(ctx, o.slot, o.n, o.k, DType::I32, "slot");
  expectDType(ctx, o.w1, dt, "w1");
  expectRank(ctx, o.w1, 3, "w1");
  o.numExperts = o.w1.dim(0);
  o.hidden = o.w1.dim(2);
  int64_t e = o.numExperts, d = o.d, f = o.hidden;
  expectShape(ctx, o.w1, {e, d, f}, "w1");
  expectDType(ctx, o.w2, dt, "w2");
  expectShape(ctx, o.w2, {e, f, d}, "w2");
  if (o.b1.present()) {
    expectDType(ctx, o.b1, dt, "b1");
    expectShape(ctx, o.b1, {e, f}, "b1");
  }
  if (o.b2.present()) {
    expectDType(ctx, o.b2, dt, "b2");
    expectShape(ctx, o.b2, {e, d}, "b2");
  }
  if (o.w3.present()) {
    expectDType(ctx, o.w3, dt, "w3");
    expectShape(ctx, o.w3, {e, d, f}, "w3");
  }
  checkExpertIndices(ctx, o.expert, &o.slot, e);
  return o;
}

/// Sets grouped row r of `dst` to row e of `perExpert` (`[E, width]`) for
/// the expert e owning r; returns the beta with which gemms then add to
/// `dst`: 1, or 0 (nothing filled) without `perExpert`.
template <typename T>
T fillExpertRows(const T *perExpert, const FfnOperands &o,
                 const ExpertGroups &groups, int64_t width, T *dst) {
  if (!perExpert)
    return T(0);
  const int32_t *ex = o.expert.as<int32_t>();
  parallelFor(groups.rows(), width, [&](int64_t r) {
    const T *src = perExpert + ex[groups.assignments[r]] * width;
    std::copy(src, src + width, dst + r * width);
  });
  return T(1);
}

/// The hidden layer for every grouped row: a = x W1_e + b1_e, u = x W3_e
/// (GLU only), actA = act(a) and h = actA [* u] (h is actA without GLU);
/// for the backward also dAct = act'(a).
template <typename T> struct Hidden {
  T *xg, *a, *u = nullptr, *actA, *h = nullptr, *dAct = nullptr;
  const T *hidden() const { return h ? h : actA; }
};

/// Storage for a and u outside the kernel's scratch (the HiddenCache's),
/// and whether it already holds them.
template <typename T> struct PreActivations {
  T *a = nullptr, *u = nullptr;
  bool computed = false;
};

/// The key of the HiddenCache: the operands a and u depend on (with the
/// routing and gates, which decide the row order), as stored.
std::vector<TensorView> hiddenKey(const KernelContext &ctx) {
  const std::vector<TensorView> &stored =
      ctx.storedInputs.empty() ? ctx.inputs : ctx.storedInputs;
  return {stored.begin(), stored.begin() + 9};
}
constexpr const char *kHiddenTag = "expert_ffn";

template <typename T>
Hidden<T> computeHidden(const FfnOperands &o, Activation kind,
                        const ExpertGroups &groups, bool withDerivative,
                        Scratch &scratch, PreActivations<T> pre = {}) {
  int64_t rows = groups.rows(), d = o.d, f = o.hidden;
  bool glu = o.w3.present();
  Hidden<T> hid;
  hid.xg = scratch.get<T>(rows * d);
  hid.a = pre.a ? pre.a : scratch.get<T>(rows * f);
  hid.actA = scratch.get<T>(rows * f);
  if (glu) {
    hid.u = pre.u ? pre.u : scratch.get<T>(rows * f);
    hid.h = scratch.get<T>(rows * f);
  }
  if (withDerivative)
    hid.dAct = scratch.get<T>(rows * f);
  gatherRows(o.x.as<T>(), groups, o.k, d, hid.xg);
  if (!pre.computed) {
    T beta = fillExpertRows(o.b1.present() ? o.b1.as<T>() : nullptr, o,
                            groups, f, hid.a);
    GemmBatch<T> batch;
    for (int64_t e = 0; e < o.numExperts; ++e) {
      int64_t m = groups.count(e), r0 = groups.offset[e];
      batch.add(false, false, m, f, d, T(1), hid.xg + r0 * d, d,
                o.w1.as<T>() + e * d * f, f, beta, hid.a + r0 * f, f);
      if (glu)
        batch.add(false, false, m, f, d, T(1), hid.xg + r0 * d, d,
                  o.w3.as<T>() + e * d * f, f, T(0), hid.u + r0 * f, f);
    }
    batch.run();
  }
  const T *a = hid.a, *u = hid.u;
  T *actA = hid.actA, *h = hid.h, *dAct = hid.dAct;
  act::withKind(kind, [&](auto kc) {
    parallelFor(rows, 25 * f, [&](int64_t r) {
      act::values<decltype(kc)::value>(a + r * f, actA + r * f,
                                       dAct ? dAct + r * f : nullptr, f);
      if (glu)
        for (int64_t i = r * f; i < (r + 1) * f; ++i)
          h[i] = actA[i] * u[i];
    });
  });
  return hid;
}

template <typename T> void expertFfn(KernelContext &ctx) {
  FfnOperands o = ffnOperands<T>(ctx);
  Activation kind =
      enumAttr<Activation>(ctx, defs::ops::expert_ffn::kActivation);
  const TensorView &y = ctx.out(0);
  expectRows(ctx, y, o.n, o.d, dtypeOf<T>(), "the result");
  if (!y.present())
    return;
  ExpertGroups groups = groupByExpert(o.expert, o.slot, o.numExperts);
  int64_t d = o.d, f = o.hidden;
  Scratch scratch;
  // On the cpu device, a and u go where the gradient can find them.
  PreActivations<T> pre;
  std::vector<void *> saved;
  if (ctx.hidden) {
    saved = ctx.hidden->allocate(o.w3.present() ? 2 : 1,
                                 groups.rows() * f * sizeof(T));
    pre.a = static_cast<T *>(saved[0]);
    pre.u = saved.size() > 1 ? static_cast<T *>(saved[1]) : nullptr;
  }
  Hidden<T> hid = computeHidden<T>(o, kind, groups, false, scratch, pre);
  if (ctx.hidden)
    ctx.hidden->put(hiddenKey(ctx), kHiddenTag, std::move(saved));
  // o = h W2_e + b2_e per grouped row, then the gate-weighted combine.
  T *out = scratch.get<T>(groups.rows() * d);
  T beta = fillExpertRows(o.b2.present() ? o.b2.as<T>() : nullptr, o, groups,
                          d, out);
  GemmBatch<T> batch;
  for (int64_t e = 0; e < o.numExperts; ++e) {
    int64_t r0 = groups.offset[e];
    batch.add(false, false, groups.count(e), d, f, T(1),
              hid.hidden() + r0 * f, f, o.w2.as<T>() + e * f * d, d, beta,
              out + r0 * d, d);
  }
  batch.run();
  const T *g = o.gates.as<T>();
  combineRows(
      o.n, o.k, o.d, groups, out, [&](int64_t a) { return g[a]; }, y.as<T>());
}

/// The results of expert_ffn_grad: either all seven positions (absent ones
/// without data) or only those whose forward operand exists.
struct FfnGradResults {
  const TensorView *dx, *dgates, *dw1, *db1, *dw2, *db2, *dw3;
};

FfnGradResults ffnGradResults(const KernelContext &ctx, const FfnOperands &o) {
  const TensorView *none = &KernelContext::absent();
  size_t count = ctx.outputs.size();
  if (count == 7)
    return {&ctx.out(0), &ctx.out(1), &ctx.out(2), &ctx.out(3),
            &ctx.out(4), &ctx.out(5), &ctx.out(6)};
  size_t expected = 4 + o.b1.present() + o.b2.present() + o.w3.present();
  if (count != expected)
    ctx.fail(fmt::format("expected {} results (dx, dgates, dw1, {}dw2{}{}), "
                         "the plan step has {}",
                         expected, o.b1.present() ? "db1, " : "",
                         o.b2.present() ? ", db2" : "",
                         o.w3.present() ? ", dw3" : "", count));
  size_t next = 3;
  FfnGradResults r{&ctx.out(0), &ctx.out(1), &ctx.out(2), none,
                   none,        none,        none};
  if (o.b1.present())
    r.db1 = &ctx.out(next++);
  r.dw2 = &ctx.out(next++);
  if (o.b2.present())
    r.db2 = &ctx.out(next++);
  if (o.w3.present())
    r.dw3 = &ctx.out(next++);
  return r;
}

template <typename T> void expertFfnGrad(KernelContext &ctx) {
  FfnOperands o = ffnOperands<T>(ctx);
  const TensorView &dy = requireInput(ctx, 9, "dy");
  Activation kind =
      enumAttr<Activation>(ctx, defs::ops::expert_ffn_grad::kActivation);
  DType dt = dtypeOf<T>();
  int64_t n = o.n, d = o.d, k = o.k, f = o.hidden;
  expectRows(ctx, dy, n, d, dt, "dy");
  FfnGradResults res = ffnGradResults(ctx, o);
  expectRows(ctx, *res.dx, n, d, dt, "dx");
  expectRows(ctx, *res.dgates, n, k, dt, "dgates");
  using Param = std::tuple<const TensorView *, const TensorView *, const char *,
                           const char *>;
  for (auto [grad, param, gradName, paramName] :
       {Param{res.dw1, &o.w1, "dw1", "w1"}, Param{res.db1, &o.b1, "db1", "b1"},
        Param{res.dw2, &o.w2, "dw2", "w2"}, Param{res.db2, &o.b2, "db2", "b2"},
        Param{res.dw3, &o.w3, "dw3", "w3"}}) {
    if (!grad->present())
      continue;
    if (!param->present())
      ctx.fail(fmt::format("the plan asks for {} but the operand {} is absent",
                           gradName, paramName));
    expectDType(ctx, *grad, dt, gradName);
    expectShape(ctx, *grad, param->shape, gradName);
  }

  bool glu = o.w3.present();
  T *dx = res.dx->as<T>(), *dgates = res.dgates->as<T>();
  T *dw1 = res.dw1->as<T>(), *db1 = res.db1->as<T>();
  T *dw2 = res.dw2->as<T>(), *db2 = res.db2->as<T>();
  T *dw3 = res.dw3->as<T>();
  const T *g = o.gates.as<T>();

  ExpertGroups groups = groupByExpert(o.expert, o.slot, o.numExperts);
  int64_t rows = groups.rows();
  bool needDh = dx || dw1 || db1 || dw3;
  Scratch scratch;
  PreActivations<T> pre;
  if (ctx.hidden) {
    std::vector<void *> saved = ctx.hidden->take(hiddenKey(ctx), kHiddenTag);
    if (!saved.empty()) {
      pre.a = static_cast<T *>(saved[0]);
      pre.u = saved.size() > 1 ? static_cast<T *>(saved[1]) : nullptr;
      pre.computed = true;
    }
  }
  Hidden<T> hid = computeHidden<T>(o, kind, groups, needDh, scratch, pre);
  const T *h = hid.hidden();
  // dyg: dy per grouped row; dys = g dy, the gradient of the expert output.
  T *dyg = scratch.get<T>(rows * d);
  T *dys = dw2 || db2 ? scratch.get<T>(rows * d) : nullptr;
  const T *dyData = dy.as<T>();
  parallelFor(rows, 2 * d, [&](int64_t r) {
    int64_t a = groups.assignments[r];
    const T *src = dyData + (a / k) * d;
    std::memcpy(dyg + r * d, src, d * sizeof(T));
    if (!dys)
      return;
    T gate = g[a];
    for (int64_t c = 0; c < d; ++c)
      dys[r * d + c] = gate * src[c];
  });

  // dhRaw = dy W2^T, the gradient of h before gating. It also gives
  // dgates = <dy, h W2 + b2> = <dhRaw, h> + <dy, b2> without recomputing
  // the expert output.
  T *dhRaw = dgates || needDh ? scratch.get<T>(rows * f) : nullptr;
  GemmBatch<T> batch;
  if (dw2)
    addWeightGrads(batch, groups, f, d, h, dys, dw2);
  if (dhRaw)
    addInputGrads(batch, groups, f, d, dyg, o.w2.as<T>(), T(0), dhRaw);
  batch.run();
  if (db2)
    expertColumnSums(dys, groups, d, db2);

  // Per grouped row: dgates, then dh = g dhRaw; da = dh [* u] * act'(a);
  // du = dh * act(a).
  T *da = needDh ? scratch.get<T>(rows * f) : nullptr;
  T *du = needDh && glu ? scratch.get<T>(rows * f) : nullptr;
  const T *u = hid.u, *actA = hid.actA, *dAct = hid.dAct;
  const int32_t *ex = o.expert.as<int32_t>();
  const T *b2 = o.b2.present() ? o.b2.as<T>() : nullptr;
  if (dgates)
    std::fill(dgates, dgates + n * k, T(0)); // dropped assignments
  parallelFor(rows, 2 * f + d, [&](int64_t r) {
    int64_t a = groups.assignments[r];
    if (dgates) {
      double s = dotInDouble(dhRaw + r * f, h + r * f, f);
      if (b2)
        s += dotInDouble(dyg + r * d, b2 + ex[a] * d, d);
      dgates[a] = static_cast<T>(s);
    }
    if (!needDh)
      return;
    T gate = g[a];
    for (int64_t i = r * f; i < (r + 1) * f; ++i) {
      T dh = gate * dhRaw[i];
      da[i] = (glu ? dh * u[i] : dh) * dAct[i];
      if (glu)
        du[i] = dh * actA[i];
    }
  });
  if (!needDh)
    return;
  if (db1)
    expertColumnSums(da, groups, f, db1);

  T *dxg = dx ? scratch.get<T>(rows * d) : nullptr;
  const T *xg = hid.xg;
  if (dw1)
    addWeightGrads(batch, groups, d, f, xg, da, dw1);
  if (dw3)
    addWeightGrads(batch, groups, d, f, xg, du, dw3);
  if (dx)
    addInputGrads(batch, groups, d, f, da, o.w1.as<T>(), T(0), dxg);
  batch.run();
  // The GLU branch adds into the same blocks of dxg, so after them.
  if (dx && glu) {
    addInputGrads(batch, groups, d, f, du, o.w3.as<T>(), T(1), dxg);
    batch.run();
  }
  if (dx)
    combineRows(
        o.n, o.k, o.d, groups, dxg, [](int64_t) { return 1.0; }, dx);
}

} // namespace

void expertFfnKernel(KernelContext &ctx) {
  checkArity(ctx, 9, 9, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { expertFfn<decltype(tag)>(ctx); });
}

void expertFfnGradKernel(KernelContext &ctx) {
  checkArity(ctx, 10, 10, 4, 7);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { expertFfnGrad<decltype(tag)>(ctx); });
}

} // namespace moec::cpu
