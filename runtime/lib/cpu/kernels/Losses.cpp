//===- Losses.cpp - balance, z and cross-entropy losses -------------------===//
//
// Per-token terms are computed in parallel into a buffer and summed over
// tokens serially in token order (in double), so the scalar losses do not
// depend on the thread count.
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "FastMath.h"
#include "Kernels.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>

namespace moec::cpu {

using defs::BalanceLoss;

namespace {

/// Max-shifted log-sum-exp of one row, in double.
template <typename T> double logSumExp(const T *row, int64_t width) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < width; ++c)
    m = std::max<double>(m, row[c]);
  if (!std::isfinite(m))
    return m; // all -inf (or a +inf / NaN that propagates)
  double sum = 0;
  for (int64_t c = 0; c < width; ++c)
    sum += std::exp(row[c] - m);
  return m + std::log(sum);
}

/// A vocabulary row's softmax through the vectorised exp (the scalar exp in
/// double was most of the loss's time), in the row's own type (f32 or f64,
/// what the cpu device computes in): exps[v] = exp(row[v] - max) and
/// their sum, in double. A row whose max is not finite (all -inf, or +inf)
/// leaves the row's values in exps and sum 0; its log-sum-exp is the max.
struct RowExps {
  double max = 0, sum = 0;
  double logSumExp() const {
    return std::isfinite(max) ? max + std::log(sum) : max;
  }
};

template <typename T> RowExps rowExps(const T *row, int64_t width, T *exps) {
  // Eight running maxima, so that the loop vectorises; `a < x ? x : a`
  // skips NaN as std::max does.
  constexpr int64_t kLanes = 8;
  T lanes[kLanes];
  std::fill(lanes, lanes + kLanes, -std::numeric_limits<T>::infinity());
  for (int64_t v = 0; v < width; ++v) {
    exps[v] = row[v];
    T &lane = lanes[v % kLanes];
    lane = lane < exps[v] ? exps[v] : lane;
  }
  T m = lanes[0];
  for (int64_t j = 1; j < kLanes; ++j)
    m = m < lanes[j] ? lanes[j] : m;
  if (!std::isfinite(m))
    return {static_cast<double>(m), 0};
  expShiftedInPlace(exps, width, m);
  return {static_cast<double>(m), laneSum(width, [&](int64_t v) {
            return static_cast<double>(exps[v]);
          })};
}

double sumInOrder(const std::vector<double> &terms) {
  double s = 0;
  for (double t : terms)
    s += t;
  return s;
}

template <typename T>
void writeScalar(const KernelContext &ctx, const TensorView &out,
                 std::string_view name, double value) {
  if (!out.present())
    return;
  expectNumel(ctx, out, 1, dtypeOf<T>(), name);
  *out.as<T>() = static_cast<T>(value);
}

/// The balance loss's routing shares f_e (counted before capacity drops,
/// over live assignments: probability > 0) and N', the tokens whose first
/// choice is live.
struct BalanceCounts {
  std::vector<double> f;
  int64_t liveTokens = 0;
};

template <typename T>
BalanceCounts balanceFractions(const KernelContext &ctx, const T *p,
                               const TensorView &expert, int64_t n, int64_t k,
                               int64_t numExperts) {
  // moe.switch_loss and moe.switch_loss_grad name the variant alike.
  BalanceLoss variant =
      enumAttr<BalanceLoss>(ctx, defs::ops::switch_loss::kVariant);
  checkExpertIndices(ctx, expert, nullptr, numExperts);
  const int32_t *ex = expert.as<int32_t>();
  auto live = [&](int64_t t, int64_t j) {
    return p[t * numExperts + ex[t * k + j]] > T(0);
  };
  BalanceCounts counts;
  std::vector<double> &count = counts.f;
  count.assign(numExperts, 0.0);
  int64_t liveSlots = 0;
  for (int64_t t = 0; t < n; ++t) {
    counts.liveTokens += live(t, 0);
    for (int64_t j = 0; j < k; ++j) {
      if (!live(t, j) || (variant == BalanceLoss::Top1 && j > 0))
        continue;
      // any_topk: an expert counts once per token (top-k picks distinct
      // experts, so every live choice does).
      count[ex[t * k + j]] += 1;
      ++liveSlots;
    }
  }
  double denom = variant == BalanceLoss::AllSlots
                     ? static_cast<double>(liveSlots)
                     : static_cast<double>(counts.liveTokens);
  for (double &c : count)
    c = denom > 0 ? c / denom : 0.0;
  return counts;
}

struct SwitchOperands {
  int64_t n, numExperts, k;
};

template <typename T>
SwitchOperands switchOperands(const KernelContext &ctx, const TensorView &probs,
                              const TensorView &expert) {
  if (probs.rank() == 0 || expert.rank() == 0)
    ctx.fail("probs must be [..., E] and expert [..., k]");
  RowShape rs = rowShape(probs);
  int64_t k = rowShape(expert).width;
  expectRows(ctx, expert, rs.rows, k, DType::I32, "expert");
  return {rs.rows, rs.width, k};
}

template <typename T> void switchLoss(KernelContext &ctx) {
  const TensorView &probs = requireInput(ctx, 0, "probs");
  const TensorView &expert = requireInput(ctx, 1, "expert");
  SwitchOperands s = switchOperands<T>(ctx, probs, expert);
  const T *p = probs.as<T>();
  BalanceCounts c =
      balanceFractions(ctx, p, expert, s.n, s.k, s.numExperts);
  std::vector<double> colSum(s.numExperts);
  int64_t numExperts = s.numExperts;
  columnReduce(s.n, numExperts, colSum.data(), [&](int64_t t, int64_t e) {
    return static_cast<double>(p[t * numExperts + e]);
  });
  double loss = 0;
  for (int64_t e = 0; e < numExperts; ++e)
    loss += c.f[e] * (c.liveTokens > 0 ? colSum[e] / c.liveTokens : 0.0);
  writeScalar<T>(ctx, ctx.out(0), "loss", numExperts * loss);
}

template <typename T> void switchLossGrad(KernelContext &ctx) {
  const TensorView &probs = requireInput(ctx, 0, "probs");
  const TensorView &expert = requireInput(ctx, 1, "expert");
  SwitchOperands s = switchOperands<T>(ctx, probs, expert);
  expectNumel(ctx, requireInput(ctx, 2, "dloss"), 1, dtypeOf<T>(), "dloss");
  double dloss = scalarFloat(ctx, ctx.in(2), "dloss");
  BalanceCounts c =
      balanceFractions(ctx, probs.as<T>(), expert, s.n, s.k, s.numExperts);
  const TensorView &dprobs = ctx.out(0);
  expectRows(ctx, dprobs, s.n, s.numExperts, dtypeOf<T>(), "dprobs");
  if (!dprobs.present())
    return;
  std::vector<T> row(s.numExperts);
  for (int64_t e = 0; e < s.numExperts; ++e)
    row[e] = static_cast<T>(dloss * s.numExperts * c.f[e] /
                            std::max<int64_t>(1, c.liveTokens));
  T *out = dprobs.as<T>();
  parallelFor(s.n, s.numExperts, [&](int64_t t) {
    std::copy(row.begin(), row.end(), out + t * s.numExperts);
  });
}

/// moe.cv_loss's importance statistics: q = I / max(sum I, 1e-12), its
/// mean m, unbiased variance v and D = m^2 + 1e-10.
struct CvStats {
  std::vector<double> q;
  double sum = 0, mean = 0, var = 0, denom = 0;
};

template <typename T>
CvStats cvStats(const KernelContext &ctx, const TensorView &gates,
                const TensorView &expert, int64_t numExperts) {
  if (gates.rank() == 0)
    ctx.fail("gates must be [..., k], got a scalar");
  RowShape rs = rowShape(gates);
  expectRows(ctx, expert, rs.rows, rs.width, DType::I32, "expert");
  checkExpertIndices(ctx, expert, nullptr, numExperts);
  const T *g = gates.as<T>();
  const int32_t *ex = expert.as<int32_t>();
  CvStats s;
  s.q.assign(numExperts, 0.0);
  for (int64_t a = 0; a < gates.numel(); ++a)
    s.q[ex[a]] += g[a];
  for (double i : s.q)
    s.sum += i;
  double norm = std::max(s.sum, 1e-12);
  for (double &q : s.q) {
    q /= norm;
    s.mean += q;
  }
  s.mean /= numExperts;
  for (double q : s.q)
    s.var += (q - s.mean) * (q - s.mean);
  s.var /= std::max<int64_t>(1, numExperts - 1);
  s.denom = s.mean * s.mean + 1e-10;
  return s;
}

template <typename T> void cvLoss(KernelContext &ctx) {
  int64_t numExperts = ctx.attrs.getInt(defs::ops::cv_loss::kNumExperts);
  CvStats s = cvStats<T>(ctx, requireInput(ctx, 0, "gates"),
                         requireInput(ctx, 1, "expert"), numExperts);
  writeScalar<T>(ctx, ctx.out(0), "loss",
                 numExperts == 1 ? 0.0 : s.var / s.denom);
}

template <typename T> void cvLossGrad(KernelContext &ctx) {
  int64_t numExperts = ctx.attrs.getInt(defs::ops::cv_loss_grad::kNumExperts);
  const TensorView &gates = requireInput(ctx, 0, "gates");
  const TensorView &expert = requireInput(ctx, 1, "expert");
  CvStats s = cvStats<T>(ctx, gates, expert, numExperts);
  expectNumel(ctx, requireInput(ctx, 2, "dloss"), 1, dtypeOf<T>(), "dloss");
  double dloss = scalarFloat(ctx, ctx.in(2), "dloss");
  const TensorView &dgates = ctx.out(0);
  expectRows(ctx, dgates, rowShape(gates).rows, rowShape(gates).width,
             dtypeOf<T>(), "dgates");
  if (!dgates.present())
    return;
  // dL/dq_e, then through the L1 normalisation to dL/dI_e.
  std::vector<double> dI(numExperts, 0.0);
  if (numExperts > 1 && s.sum > 1e-12) {
    std::vector<double> dq(numExperts);
    double qdq = 0;
    for (int64_t e = 0; e < numExperts; ++e) {
      dq[e] = 2 * (s.q[e] - s.mean) / ((numExperts - 1) * s.denom) -
              2 * s.var * s.mean / (numExperts * s.denom * s.denom);
      qdq += s.q[e] * dq[e];
    }
    for (int64_t e = 0; e < numExperts; ++e)
      dI[e] = (dq[e] - qdq) / s.sum;
  }
  const int32_t *ex = expert.as<int32_t>();
  T *out = dgates.as<T>();
  for (int64_t a = 0; a < gates.numel(); ++a)
    out[a] = static_cast<T>(dloss * dI[ex[a]]);
}

template <typename T> void zLoss(KernelContext &ctx) {
  const TensorView &logits = requireInput(ctx, 0, "logits");
  if (logits.rank() == 0)
    ctx.fail("logits must be [..., E], got a scalar");
  RowShape rs = rowShape(logits);
  const T *l = logits.as<T>();
  std::vector<double> terms(rs.rows);
  parallelFor(rs.rows, 20 * rs.width, [&](int64_t t) {
    double lse = logSumExp(l + t * rs.width, rs.width);
    terms[t] = lse * lse;
  });
  double loss = rs.rows > 0 ? sumInOrder(terms) / rs.rows : 0.0;
  writeScalar<T>(ctx, ctx.out(0), "loss", loss);
}

template <typename T> void zLossGrad(KernelContext &ctx) {
  const TensorView &logits = requireInput(ctx, 0, "logits");
  if (logits.rank() == 0)
    ctx.fail("logits must be [..., E], got a scalar");
  RowShape rs = rowShape(logits);
  expectNumel(ctx, requireInput(ctx, 1, "dloss"), 1, dtypeOf<T>(), "dloss");
  double dloss = scalarFloat(ctx, ctx.in(1), "dloss");
  const TensorView &dlogits = ctx.out(0);
  expectRows(ctx, dlogits, rs.rows, rs.width, dtypeOf<T>(), "dlogits");
  if (!dlogits.present())
    return;
  const T *l = logits.as<T>();
  T *out = dlogits.as<T>();
  int64_t width = rs.width;
  double scale = 2.0 * dloss / std::max<int64_t>(1, rs.rows);
  parallelFor(rs.rows, 40 * width, [&](int64_t t) {
    const T *row = l + t * width;
    double lse = logSumExp(row, width);
    for (int64_t e = 0; e < width; ++e)
      out[t * width + e] = static_cast<T>(scale * lse * std::exp(row[e] - lse));
  });
}

struct CrossEntropyOperands {
  int64_t n, vocab, counted;
  double smoothing;
};

template <typename T>
CrossEntropyOperands crossEntropyOperands(const KernelContext &ctx,
                                          const TensorView &logits,
                                          const TensorView &targets) {
  if (logits.rank() == 0)
    ctx.fail("logits must be [..., V], got a scalar");
  RowShape rs = rowShape(logits);
  expectNumel(ctx, targets, rs.rows, DType::I32, "targets");
  const int32_t *tg = targets.as<int32_t>();
  int64_t counted = 0;
  for (int64_t t = 0; t < rs.rows; ++t) {
    if (tg[t] >= rs.width)
      ctx.fail(fmt::format("targets{} = {} is outside the vocabulary [0, {}) "
                           "(negative targets are ignored)",
                           indexString(targets.shape, t), tg[t], rs.width));
    counted += tg[t] >= 0;
  }
  double a = ctx.attrs.getFloat(
      defs::ops::cross_entropy::kLabelSmoothing,
      defs::ops::cross_entropy::kLabelSmoothingDefault);
  // The device library takes the smoothing as a float; one that rounds to 0
  // there is 0 here too, for the forward and the gradient alike.
  if (static_cast<float>(a) == 0.0f)
    a = 0.0;
  return {rs.rows, rs.width, counted, a};
}

template <typename T> void crossEntropy(KernelContext &ctx) {
  const TensorView &logits = requireInput(ctx, 0, "logits");
  const TensorView &targets = requireInput(ctx, 1, "targets");
  CrossEntropyOperands ce = crossEntropyOperands<T>(ctx, logits, targets);
  const T *l = logits.as<T>();
  const int32_t *tg = targets.as<int32_t>();
  int64_t vocab = ce.vocab;
  const bool countCorrect = ctx.out(2).present();
  std::vector<double> terms(ce.n, 0.0);
  std::vector<char> hit(countCorrect ? ce.n : 0, 0);
  parallelFor(ce.n, 40 * vocab, [&](int64_t t) {
    if (tg[t] < 0)
      return;
    const T *row = l + t * vocab;
    Scratch scratch;
    RowExps r = rowExps(row, vocab, scratch.get<T>(vocab));
    double lse = r.logSumExp();
    double lpTarget = row[tg[t]] - lse;
    // Without smoothing the uniform term is left out, not multiplied by 0:
    // a masked (-inf) logit makes its sum -inf, and 0 * -inf is NaN.
    if (ce.smoothing == 0.0) {
      terms[t] = -lpTarget;
    } else {
      // sum_v lp[v] = sum_v logits[v] - V lse.
      double sumLogits = laneSum(
          vocab, [&](int64_t v) { return static_cast<double>(row[v]); });
      double lpSum = sumLogits - vocab * lse;
      terms[t] =
          -(1.0 - ce.smoothing) * lpTarget - ce.smoothing / vocab * lpSum;
    }
    // The prediction is the first index of the largest value above -3e38
    // (else 0), as the device library's blocks find it.
    if (countCorrect) {
      int64_t predicted = 0;
      if (r.max > static_cast<double>(static_cast<T>(-3.0e38f)))
        predicted =
            std::find_if(row, row + vocab,
                         [&](T x) { return static_cast<double>(x) == r.max; }) -
            row;
      hit[t] = predicted == tg[t];
    }
  });
  double loss = sumInOrder(terms) / std::max<int64_t>(1, ce.counted);
  writeScalar<T>(ctx, ctx.out(0), "loss", loss);
  writeScalar<T>(ctx, ctx.out(1), "count", static_cast<double>(ce.counted));
  writeScalar<T>(ctx, ctx.out(2), "correct",
                 static_cast<double>(std::count(hit.begin(), hit.end(), 1)));
}

template <typename T> void crossEntropyGrad(KernelContext &ctx) {
  const TensorView &logits = requireInput(ctx, 0, "logits");
  const TensorView &targets = requireInput(ctx, 1, "targets");
  CrossEntropyOperands ce = crossEntropyOperands<T>(ctx, logits, targets);
  expectNumel(ctx, requireInput(ctx, 2, "dloss"), 1, dtypeOf<T>(), "dloss");
  double dloss = scalarFloat(ctx, ctx.in(2), "dloss");
  const TensorView &dlogits = ctx.out(0);
  expectRows(ctx, dlogits, ce.n, ce.vocab, dtypeOf<T>(), "dlogits");
  if (!dlogits.present())
    return;
  const T *l = logits.as<T>();
  const int32_t *tg = targets.as<int32_t>();
  T *out = dlogits.as<T>();
  int64_t vocab = ce.vocab;
  double scale = dloss / std::max<int64_t>(1, ce.counted);
  double uniform = ce.smoothing / vocab;
  parallelFor(ce.n, 40 * vocab, [&](int64_t t) {
    T *o = out + t * vocab;
    if (tg[t] < 0) {
      std::fill(o, o + vocab, T(0));
      return;
    }
    const T *row = l + t * vocab;
    Scratch scratch;
    T *exps = scratch.get<T>(vocab);
    RowExps r = rowExps(row, vocab, exps);
    // softmax[v] = exps[v] / sum; a row without a finite max keeps the
    // definition exp(row[v] - lse), NaN where it has no value.
    const bool finite = std::isfinite(r.max);
    const double inverse = finite ? 1.0 / r.sum : 0.0, lse = r.logSumExp();
    auto softmax = [&](int64_t v) {
      return finite ? exps[v] * inverse : std::exp(row[v] - lse);
    };
    if (finite)
      for (int64_t v = 0; v < vocab; ++v)
        o[v] = static_cast<T>(scale * (exps[v] * inverse - uniform));
    else
      for (int64_t v = 0; v < vocab; ++v)
        o[v] = static_cast<T>(scale * (softmax(v) - uniform));
    o[tg[t]] = static_cast<T>(
        scale * (softmax(tg[t]) - (1.0 - ce.smoothing) - uniform));
  });
}

} // namespace

void switchLossKernel(KernelContext &ctx) {
  checkArity(ctx, 2, 2, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "probs"), "probs",
                [&](auto tag) { switchLoss<decltype(tag)>(ctx); });
}

void switchLossGradKernel(KernelContext &ctx) {
  checkArity(ctx, 3, 3, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "probs"), "probs",
                [&](auto tag) { switchLossGrad<decltype(tag)>(ctx); });
}

void cvLossKernel(KernelContext &ctx) {
  checkArity(ctx, 2, 2, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "gates"), "gates",
                [&](auto tag) { cvLoss<decltype(tag)>(ctx); });
}

void cvLossGradKernel(KernelContext &ctx) {
  checkArity(ctx, 3, 3, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "gates"), "gates",
                [&](auto tag) { cvLossGrad<decltype(tag)>(ctx); });
}

void zLossKernel(KernelContext &ctx) {
  checkArity(ctx, 1, 1, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "logits"), "logits",
                [&](auto tag) { zLoss<decltype(tag)>(ctx); });
}

void zLossGradKernel(KernelContext &ctx) {
  checkArity(ctx, 2, 2, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "logits"), "logits",
                [&](auto tag) { zLossGrad<decltype(tag)>(ctx); });
}

void crossEntropyKernel(KernelContext &ctx) {
  checkArity(ctx, 2, 2, 1, 3);
  dispatchFloat(ctx, requireInput(ctx, 0, "logits"), "logits",
                [&](auto tag) { crossEntropy<decltype(tag)>(ctx); });
}

void crossEntropyGradKernel(KernelContext &ctx) {
  checkArity(ctx, 3, 3, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "logits"), "logits",
                [&](auto tag) { crossEntropyGrad<decltype(tag)>(ctx); });
}

} // namespace moec::cpu
