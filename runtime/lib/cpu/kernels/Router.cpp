//===- Router.cpp - tokens-choose top-k routing and its gradient ----------===//
//
// Probabilities are a max-shifted softmax computed in double and stored in
// the logits' dtype; top-k selection and BPR ordering compare those stored
// values, so they see exactly the probabilities the op returns.
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "KernelStatus.h"
#include "Kernels.h"
#include "Philox.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <numeric>

namespace moec::cpu {

namespace {

using defs::Capacity;
using defs::GateWeighting;
using defs::Priority;
namespace router = defs::ops::topk_router;

/// Python's round(): halves go to the even neighbour, whatever the fenv.
double roundHalfEven(double x) {
  double lo = std::floor(x), frac = x - lo;
  if (frac > 0.5)
    return lo + 1;
  if (frac < 0.5)
    return lo;
  return std::fmod(lo, 2.0) == 0.0 ? lo : lo + 1;
}

/// The floor of renorm's denominator: float32's machine epsilon, as Tutel
/// takes torch.finfo(float32).eps.
constexpr double kRenormEpsilon = 1.1920928955078125e-07;

int64_t toCapacity(double c) {
  if (!(c < 9.0e18))
    return std::numeric_limits<int64_t>::max();
  return c < 0 ? 0 : static_cast<int64_t>(c);
}

/// The per-expert capacity of `#moe.capacity` for N tokens; the products are
/// evaluated left to right as written in MoeBase.td.
int64_t capacityOf(Capacity kind, double cf, int64_t minCapacity, int64_t n,
                   int64_t k, int64_t e) {
  double c = 0;
  switch (kind) {
  case Capacity::None:
    return std::numeric_limits<int64_t>::max();
  case Capacity::Switch:
    c = std::ceil(cf * k * n / e);
    break;
  case Capacity::Tutel:
    c = k * std::floor(cf * ((n + e - 1) / e));
    break;
  case Capacity::SparseMixer:
    c = roundHalfEven(cf * n / e);
    break;
  case Capacity::Fraction:
    c = std::ceil(cf * n);
    break;
  }
  return std::max(toCapacity(c), minCapacity);
}

/// MoA's sample_topk: appends `sample` experts to the `chosen` ones of token
/// t, drawn without replacement with weights p + 1e-6 (see moe.topk_router).
template <typename T>
void sampleExtraExperts(const T *p, int64_t numExperts, int64_t k,
                        int64_t sample, uint64_t seed, uint64_t stream,
                        int64_t t, int32_t *ex) {
  std::vector<char> taken(numExperts, 0);
  for (int64_t j = 0; j < k - sample; ++j)
    taken[ex[j]] = 1;
  for (int64_t j = k - sample; j < k; ++j) {
    double total = 0;
    for (int64_t e = 0; e < numExperts; ++e)
      if (!taken[e])
        total += static_cast<double>(p[e]) + 1e-6;
    double target =
        philoxUniform(seed, stream, static_cast<uint64_t>(t * k + j)) * total;
    double running = 0;
    int32_t pick = -1;
    for (int64_t e = 0; e < numExperts; ++e) {
      if (taken[e])
        continue;
      pick = static_cast<int32_t>(e); // the last one if rounding runs out
      running += static_cast<double>(p[e]) + 1e-6;
      if (running > target)
        break;
    }
    ex[j] = pick;
    taken[pick] = 1;
  }
}

template <typename T> void topkRouter(KernelContext &ctx) {
  const TensorView &logits = requireInput(ctx, 0, "logits");
  if (logits.rank() == 0)
    ctx.fail("logits must be [..., E], got a scalar");
  RowShape rs = rowShape(logits);
  int64_t n = rs.rows, numExperts = rs.width;
  int64_t k = ctx.attrs.getInt(router::kK);
  if (k < 1 || k > numExperts)
    ctx.fail(fmt::format("k = {} must be in [1, E = {}]", k, numExperts));
  const TensorView &maskIn = ctx.in(1), &seedIn = ctx.in(2);
  if (maskIn.present())
    expectNumel(ctx, maskIn, n, DType::I32, "mask");
  const int32_t *mask = maskIn.present() ? maskIn.as<int32_t>() : nullptr;
  int64_t sample = ctx.attrs.getInt(router::kSample, router::kSampleDefault);
  if (sample < 0 || sample > k)
    ctx.fail(fmt::format("sample = {} must be in [0, k = {}]", sample, k));
  if (sample > 0 && !seedIn.present())
    ctx.fail("sample > 0 needs the seed operand");
  uint64_t seed = sample > 0 ? static_cast<uint64_t>(scalarInt(ctx, seedIn,
                                                               "seed"))
                             : 0;
  uint64_t stream = static_cast<uint64_t>(
      ctx.attrs.getInt(router::kStream, router::kStreamDefault));
  if (n * k > std::numeric_limits<int32_t>::max())
    ctx.fail(fmt::format("{} tokens x k = {} overflow the i32 slots", n, k));
  GateWeighting weighting = enumAttr<GateWeighting>(ctx, router::kGate);
  Capacity capacity = enumAttr<Capacity>(ctx, router::kCapacity);
  double cf = ctx.attrs.getFloat(router::kCapacityFactor,
                                 router::kCapacityFactorDefault);
  int64_t minCapacity = ctx.attrs.getInt(router::kMinCapacity,
                                         router::kMinCapacityDefault);
  bool bpr = enumAttr<Priority>(ctx, router::kPriority) == Priority::Bpr;
  const TensorView &probsOut = ctx.out(0), &expertOut = ctx.out(1);
  const TensorView &gatesOut = ctx.out(2), &slotOut = ctx.out(3);
  expectRows(ctx, probsOut, n, numExperts, dtypeOf<T>(), "probs");
  expectRows(ctx, expertOut, n, k, DType::I32, "expert");
  expectRows(ctx, gatesOut, n, k, dtypeOf<T>(), "gates");
  expectRows(ctx, slotOut, n, k, DType::I32, "slot");

  // Results nobody reads still feed the others: compute them into scratch.
  std::vector<T> probsBuf, gatesBuf;
  std::vector<int32_t> expertBuf, slotBuf;
  T *probs = probsOut.present()
                 ? probsOut.as<T>()
                 : (probsBuf.resize(n * numExperts), probsBuf.data());
  int32_t *expert = expertOut.present()
                        ? expertOut.as<int32_t>()
                        : (expertBuf.resize(n * k), expertBuf.data());
  T *gates = gatesOut.present() ? gatesOut.as<T>()
                                : (gatesBuf.resize(n * k), gatesBuf.data());
  int32_t *slot = slotOut.present() ? slotOut.as<int32_t>()
                                    : (slotBuf.resize(n * k), slotBuf.data());

  const T *lg = logits.as<T>();
  std::vector<char> finite(n, 1);
#pragma omp parallel if (n * numExperts * 20 >= kMinParallelWork)
  {
    std::vector<int32_t> order(numExperts);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < n; ++t) {
      const T *l = lg + t * numExperts;
      T *p = probs + t * numExperts;
      double m = -std::numeric_limits<double>::infinity();
      bool nan = false;
      for (int64_t e = 0; e < numExperts; ++e) {
        nan |= std::isnan(l[e]);
        m = std::max<double>(m, l[e]);
      }
      if (nan || !std::isfinite(m)) {
        finite[t] = 0;
        continue;
      }
      double sum = 0;
      for (int64_t e = 0; e < numExperts; ++e)
        sum += std::exp(l[e] - m);
      bool masked = mask && mask[t] == 0;
      for (int64_t e = 0; e < numExperts; ++e)
        p[e] = masked ? T(0) : static_cast<T>(std::exp(l[e] - m) / sum);

      // Descending probability, ties to the lower expert index; the last
      // `sample` choices drawn at random.
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int32_t a, int32_t b) {
                          return p[a] > p[b] || (p[a] == p[b] && a < b);
                        });
      int32_t *ex = expert + t * k;
      std::copy(order.begin(), order.begin() + k, ex);
      if (sample > 0)
        sampleExtraExperts(p, numExperts, k, sample, seed, stream, t, ex);

      T *g = gates + t * k;
      double selSum = 0, selMax = l[ex[0]], expSum = 0;
      for (int64_t j = 0; j < k; ++j) {
        selSum += p[ex[j]];
        selMax = std::max<double>(selMax, l[ex[j]]);
      }
      for (int64_t j = 0; j < k; ++j)
        expSum += std::exp(l[ex[j]] - selMax);
      for (int64_t j = 0; j < k; ++j) {
        switch (weighting) {
        case GateWeighting::Raw:
          g[j] = p[ex[j]];
          break;
        case GateWeighting::RenormDetached:
          g[j] = selSum > 0 ? static_cast<T>(p[ex[j]] / selSum) : T(0);
          break;
        case GateWeighting::SoftmaxTopK:
          g[j] = static_cast<T>(std::exp(l[ex[j]] - selMax) / expSum);
          break;
        case GateWeighting::Unit:
          g[j] = T(1);
          break;
        case GateWeighting::Renorm:
          g[j] = k > 1 ? static_cast<T>(p[ex[j]] /
                                        std::max(selSum, kRenormEpsilon))
                       : p[ex[j]];
          break;
        }
      }
    }
  }
  for (int64_t t = 0; t < n; ++t)
    if (!finite[t])
      ctx.fail(detail::unrankedLogitsMessage(
          indexString(Shape(logits.shape.begin(), logits.shape.end() - 1), t)));

  // Capacity slots: choice-major, tokens in order or by descending top-1
  // probability (stable, so ties keep the lower token first).
  std::vector<int64_t> tokens(n);
  std::iota(tokens.begin(), tokens.end(), 0);
  if (bpr)
    std::stable_sort(tokens.begin(), tokens.end(), [&](int64_t a, int64_t b) {
      return probs[a * numExperts + expert[a * k]] >
             probs[b * numExperts + expert[b * k]];
    });
  int64_t cap = capacityOf(capacity, cf, minCapacity, n, k, numExperts);
  std::vector<int64_t> count(numExperts, 0);
  for (int64_t j = 0; j < k; ++j) {
    for (int64_t t : tokens) {
      int64_t a = t * k + j;
      if (probs[t * numExperts + expert[a]] == T(0)) {
        // Masked or underflowed: not routed, takes no capacity.
        slot[a] = -1;
        gates[a] = T(0);
        continue;
      }
      int64_t c = count[expert[a]]++;
      if (c >= cap) {
        slot[a] = -1;
        gates[a] = T(0);
      } else {
        slot[a] = static_cast<int32_t>(c);
      }
    }
  }
}

template <typename T> void topkRouterGrad(KernelContext &ctx) {
  const TensorView &probs = requireInput(ctx, 0, "probs");
  const TensorView &expert = requireInput(ctx, 1, "expert");
  const TensorView &gates = requireInput(ctx, 2, "gates");
  const TensorView &slot = requireInput(ctx, 3, "slot");
  const TensorView &dgates = ctx.in(4), &dprobs = ctx.in(5);
  if (probs.rank() == 0 || expert.rank() == 0)
    ctx.fail("probs must be [..., E] and expert [..., k]");
  RowShape rs = rowShape(probs);
  int64_t n = rs.rows, numExperts = rs.width, k = rowShape(expert).width;
  expectRows(ctx, expert, n, k, DType::I32, "expert");
  expectRows(ctx, gates, n, k, dtypeOf<T>(), "gates");
  expectRows(ctx, slot, n, k, DType::I32, "slot");
  expectRows(ctx, dgates, n, k, dtypeOf<T>(), "dgates");
  expectRows(ctx, dprobs, n, numExperts, dtypeOf<T>(), "dprobs");
  const TensorView &dlogits = ctx.out(0);
  expectRows(ctx, dlogits, n, numExperts, dtypeOf<T>(), "dlogits");
  GateWeighting weighting =
      enumAttr<GateWeighting>(ctx, defs::ops::topk_router_grad::kGate);
  checkExpertIndices(ctx, expert, nullptr, numExperts);
  if (!dlogits.present())
    return;

  const T *p = probs.as<T>(), *dg = dgates.as<T>(), *dp0 = dprobs.as<T>();
  const int32_t *ex = expert.as<int32_t>(), *sl = slot.as<int32_t>();
  T *out = dlogits.as<T>();
#pragma omp parallel if (n * numExperts * 8 >= kMinParallelWork)
  {
    std::vector<double> dp(numExperts), direct(numExperts);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < n; ++t) {
      const T *pt = p + t * numExperts;
      for (int64_t e = 0; e < numExperts; ++e)
        dp[e] = dp0 ? static_cast<double>(dp0[t * numExperts + e]) : 0.0;
      std::fill(direct.begin(), direct.end(), 0.0);
      if (dg) {
        const int32_t *et = ex + t * k, *st = sl + t * k;
        const T *dgt = dg + t * k;
        // The sum of the selected probabilities, dropped ones included; 0
        // only for a masked token, which has no kept choice.
        double selSum = 0;
        for (int64_t j = 0; j < k; ++j)
          selSum += pt[et[j]];
        GateWeighting rowWeighting =
            selSum > 0 ? weighting : GateWeighting::Unit; // nothing flows
        switch (rowWeighting) {
        case GateWeighting::Raw:
          for (int64_t j = 0; j < k; ++j)
            if (st[j] >= 0)
              dp[et[j]] += dgt[j];
          break;
        case GateWeighting::RenormDetached:
          for (int64_t j = 0; j < k; ++j)
            if (st[j] >= 0)
              dp[et[j]] += dgt[j] / selSum;
          break;
        case GateWeighting::SoftmaxTopK: {
          // g_j = p_j / selSum equals the softmax over the selected logits;
          // its backward goes straight to those logits. Dropped gates are
          // constant 0, but their g still depends on the other logits.
          double dotGd = 0;
          for (int64_t j = 0; j < k; ++j)
            if (st[j] >= 0)
              dotGd += pt[et[j]] / selSum * dgt[j];
          for (int64_t j = 0; j < k; ++j) {
            double gj = pt[et[j]] / selSum;
            double dgj = st[j] >= 0 ? static_cast<double>(dgt[j]) : 0.0;
            direct[et[j]] += gj * (dgj - dotGd);
          }
          break;
        }
        case GateWeighting::Unit:
          break;
        case GateWeighting::Renorm: {
          if (k == 1) {
            if (st[0] >= 0)
              dp[et[0]] += dgt[0];
            break;
          }
          // g_j = p_j / D with D = max(selSum, eps): the kept gates pull on
          // their own p, and through D on every selected p.
          double denominator = std::max(selSum, kRenormEpsilon), dotGd = 0;
          for (int64_t j = 0; j < k; ++j)
            if (st[j] >= 0) {
              dp[et[j]] += dgt[j] / denominator;
              dotGd += dgt[j] * pt[et[j]];
            }
          if (selSum > kRenormEpsilon)
            for (int64_t j = 0; j < k; ++j)
              dp[et[j]] -= dotGd / (denominator * denominator);
          break;
        }
        }
      }
      double dotDp = 0;
      for (int64_t e = 0; e < numExperts; ++e)
        dotDp += dp[e] * pt[e];
      for (int64_t e = 0; e < numExperts; ++e)
        out[t * numExperts + e] =
            static_cast<T>(pt[e] * (dp[e] - dotDp) + direct[e]);
    }
  }
}

} // namespace

void topkRouterKernel(KernelContext &ctx) {
  checkArity(ctx, 1, 3, 4, 4);
  dispatchFloat(ctx, requireInput(ctx, 0, "logits"), "logits",
                [&](auto tag) { topkRouter<decltype(tag)>(ctx); });
}

void topkRouterGradKernel(KernelContext &ctx) {
  checkArity(ctx, 4, 6, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "probs"), "probs",
                [&](auto tag) { topkRouterGrad<decltype(tag)>(ctx); });
}

void expertLoadKernel(KernelContext &ctx) {
  checkArity(ctx, 2, 2, 1, 1);
  const TensorView &expert = requireInput(ctx, 0, "expert");
  const TensorView &slot = requireInput(ctx, 1, "slot");
  expectDType(ctx, expert, DType::I32, "expert");
  expectNumel(ctx, slot, expert.numel(), DType::I32, "slot");
  int64_t numExperts = ctx.attrs.getInt(defs::ops::expert_load::kNumExperts);
  const TensorView &load = ctx.out(0);
  expectNumel(ctx, load, numExperts, DType::F32, "load");
  checkExpertIndices(ctx, expert, &slot, numExperts);
  if (!load.present())
    return;
  std::vector<int64_t> count(numExperts, 0);
  const int32_t *ex = expert.as<int32_t>(), *sl = slot.as<int32_t>();
  for (int64_t a = 0; a < expert.numel(); ++a)
    if (sl[a] >= 0)
      ++count[ex[a]];
  for (int64_t e = 0; e < numExperts; ++e)
    load.as<float>()[e] = static_cast<float>(count[e]);
}

void routingStatsKernel(KernelContext &ctx) {
  checkArity(ctx, 2, 2, 1, 1);
  const TensorView &expert = requireInput(ctx, 0, "expert");
  const TensorView &slot = requireInput(ctx, 1, "slot");
  expectDType(ctx, expert, DType::I32, "expert");
  expectNumel(ctx, slot, expert.numel(), DType::I32, "slot");
  int64_t parts = ctx.attrs.getInt(defs::ops::routing_stats::kParts);
  int64_t numExperts =
      ctx.attrs.getInt(defs::ops::routing_stats::kNumExperts);
  const TensorView &stats = ctx.out(0);
  expectNumel(ctx, stats, 6, DType::F32, "stats");
  checkExpertIndices(ctx, expert, &slot, numExperts);
  if (expert.shape.size() < 2 || expert.shape.back() < 1)
    ctx.fail("expert must be [..., k] with k >= 1");
  const int64_t k = expert.shape.back(), rows = expert.numel() / k;
  if (rows % parts != 0)
    ctx.fail(fmt::format("{} rows are not a multiple of parts = {}", rows,
                         parts));
  if (!stats.present())
    return;
  const int32_t *ex = expert.as<int32_t>(), *sl = slot.as<int32_t>();
  int64_t kept = 0, activeRows = 0, reached = 0;
  std::vector<char> seen(numExperts);
  for (int64_t t = 0; t < rows / parts; ++t) {
    std::fill(seen.begin(), seen.end(), 0);
    for (int64_t r = t * parts; r < (t + 1) * parts; ++r) {
      bool active = false;
      for (int64_t j = 0; j < k; ++j) {
        if (sl[r * k + j] < 0)
          continue;
        ++kept;
        active = true;
        if (!seen[ex[r * k + j]]) {
          seen[ex[r * k + j]] = 1;
          ++reached;
        }
      }
      activeRows += active ? 1 : 0;
    }
  }
  float *out = stats.as<float>();
  out[0] = static_cast<float>(rows * k);
  out[1] = static_cast<float>(kept);
  out[2] = static_cast<float>(rows);
  out[3] = static_cast<float>(activeRows);
  out[4] = static_cast<float>(rows / parts * numExperts);
  out[5] = static_cast<float>(reached);
}

} // namespace moec::cpu
