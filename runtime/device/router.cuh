//===- router.cuh - the fused tokens-choose router -------------*- CUDA -*-===//
//
// One kernel for moe.linear (router logits) + moe.topk_router + moe.z_loss +
// moe.switch_loss + moe.expert_load. One warp per token computes the logits,
// each lane holding experts lane, lane + 32, ... (E / 32 rounded up, at
// most 32 per lane, so E <= 1024),
// the softmax (zero for masked tokens), the top-k (ties to the lower expert;
// MoA's sampled extra choices drawn from the Philox stream) and the gate
// weights, and each block leaves its loss partial sums in scratch. The last
// block to finish (integer ticket) adds the partials in block order. The
// priority order and the capacity slots follow in launches of their own
// (router_tail.cuh). Everything is in a fixed order: results do not depend
// on timing.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_ROUTER_CUH
#define MOEC_DEVICE_ROUTER_CUH

namespace moec {

struct RouterParams {
  int64_t tokens;
  // Inputs: h [T, D] and w [D, E] (+ bias [E]) when the logits are computed
  // here, else logitsIn [T, E]; the padding mask [T] (0: masked) and the
  // sampling seed [1], both optional.
  gptr<const float> h, w, bias, logitsIn;
  gptr<const int32_t> mask;
  gptr<const int64_t> seed;
  uint64_t stream;
  // Outputs (null when nobody reads them).
  gptr<float> logits, probs, gates, load, balance, zloss;
  gptr<int32_t> expert, slot;
  // Scratch: zPart [blocks], pPart [blocks * E], top1 [T], live [T * K]
  // (1: the assignment's probability is > 0), ticket [1].
  gptr<float> zPart, pPart, top1;
  gptr<int32_t> live;
  gptr<unsigned> ticket;
  double capacityFactor;
  int64_t minCapacity;
  /// Where a token whose logits cannot be ranked is reported.
  KernelReport report;
};

/// Experts per lane when a warp holds one token's E probabilities. Host and
/// device: nvcc, unlike NVRTC's -default-device, needs it said.
__host__ __device__ constexpr int routerPerLane(int experts) {
  return (experts + 31) / 32;
}

/// The most experts a warp holds: a lane's taken experts are the bits of
/// one 32-bit mask.
constexpr int kRouterMaxExperts = 32 * 32;

/// The floor of the renorm gate's denominator: float32's epsilon (Tutel).
constexpr float kRenormEpsilon = 1.1920928955078125e-07f;

template <int E, int K, Capacity Cap>
MOEC_DEVICE int64_t routerCapacity(int64_t n, double cf, int64_t minimum) {
  int64_t c = 0;
  if (Cap == Capacity::Switch)
    c = static_cast<int64_t>(ceil(cf * K * static_cast<double>(n) / E));
  else if (Cap == Capacity::Tutel)
    c = K * static_cast<int64_t>(floor(cf * static_cast<double>((n + E - 1) / E)));
  else if (Cap == Capacity::SparseMixer)
    c = static_cast<int64_t>(rint(cf * static_cast<double>(n) / E));
  else if (Cap == Capacity::Fraction)
    c = static_cast<int64_t>(ceil(cf * static_cast<double>(n)));
  return c > minimum ? c : minimum;
}

/// Phase 1, one warp per token: the logits (computed from h and w, or read),
/// the softmax into p (expert lane + 32 s in p[s]) and the token's z-loss
/// term. The loops over a lane's slots are unrolled, so that l and p stay
/// in registers (a rolled loop indexes them at run time: a stack frame).
/// Logits with a NaN or +inf, or all -inf, have no ranking: the token is
/// reported (the host then stops, as the cpu device does) and routed as a
/// masked token meanwhile, so that every later kernel reads valid experts.
template <int D, int E, bool Linear>
MOEC_DEVICE float routerSoftmax(const RouterParams &r, int64_t t, int lane,
                                float (&p)[routerPerLane(E)]) {
  constexpr int kPer = routerPerLane(E);
  float l[kPer];
  const float negInf = __uint_as_float(0xff800000u);
  float mine = negInf;
  bool nan = false;
#pragma unroll
  for (int s = 0; s < kPer; ++s) {
    l[s] = negInf;
    int e = lane + 32 * s;
    if (e >= E)
      continue;
    float v;
    if (Linear) {
      v = r.bias ? r.bias[e] : 0.0f;
      float acc = 0.0f;
      for (int d = 0; d < D; ++d)
        acc += r.h[t * D + d] * r.w[d * E + e];
      v += acc;
    } else {
      v = r.logitsIn[t * E + e];
    }
    l[s] = v;
    nan |= isNanValue(v);
    mine = v > mine ? v : mine;
    if (r.logits)
      r.logits[t * E + e] = v;
  }
  float mx = warpMax(mine);
  const bool unranked = __any_sync(kFullMask, nan) || !isFiniteValue(mx);
  if (unranked && lane == 0)
    reportBadItem(r.report, kStatusRouterLogits, t);
  float sum = 0.0f;
#pragma unroll
  for (int s = 0; s < kPer; ++s)
    if (lane + 32 * s < E) {
      p[s] = expf(l[s] - mx);
      sum += p[s];
    }
  sum = warpSum(sum);
  const bool masked = unranked || (r.mask && r.mask[t] == 0);
#pragma unroll
  for (int s = 0; s < kPer; ++s)
    if (lane + 32 * s < E) {
      p[s] = masked ? 0.0f : p[s] / sum;
      if (r.probs)
        r.probs[t * E + lane + 32 * s] = p[s];
    }
  float lse = mx + logf(sum);
  return unranked ? 0.0f : lse * lse;
}

/// Expert e's value of p (e uniform over the warp) on every lane: a select
/// over p's slots rather than p[e / 32], which would put p in local memory.
template <int E>
MOEC_DEVICE float routerExpertValue(const float (&p)[routerPerLane(E)],
                                    int e) {
  float mine = 0.0f;
  for (int s = 0; s < routerPerLane(E); ++s)
    if (s == e / 32)
      mine = p[s];
  return __shfl_sync(kFullMask, mine, e % 32);
}

/// Whether expert e (uniform over the warp) is taken, on every lane.
MOEC_DEVICE bool routerExpertTaken(unsigned taken, int e) {
  return __shfl_sync(kFullMask, static_cast<int>((taken >> (e / 32)) & 1u),
                     e % 32) != 0;
}

/// MoA's sample_topk draw of choice j: the first untaken expert (index
/// order) whose running weight p + 1e-6 exceeds u * (the total), in double,
/// as the cpu kernel does; every lane computes the same pick. Bit s of
/// `taken` is expert lane + 32 s.
template <int E, int K>
MOEC_DEVICE int routerSample(const RouterParams &r, int64_t t, int j,
                             const float (&p)[routerPerLane(E)],
                             unsigned taken) {
  double total = 0.0;
  for (int e = 0; e < E; ++e)
    if (!routerExpertTaken(taken, e))
      total += static_cast<double>(routerExpertValue<E>(p, e)) + 1e-6;
  const double target =
      philoxUniform(static_cast<uint64_t>(r.seed[0]), r.stream,
                    static_cast<uint64_t>(t * K + j)) *
      total;
  double running = 0.0;
  int pick = -1;
  for (int e = 0; e < E; ++e) {
    const float pe = routerExpertValue<E>(p, e);
    if (routerExpertTaken(taken, e) || (pick >= 0 && running > target))
      continue;
    pick = e;
    running += static_cast<double>(pe) + 1e-6;
  }
  return pick;
}

/// Phase 2, one warp per token: K - S rounds of a warp argmax over p (ties
/// to the lower expert) and S sampled choices, then lane 0 writes the
/// experts, the gate weights, which choices are live (p > 0) and (for
/// batch-priority routing) the top-1 probability.
template <int E, int K, int S, GateWeighting Gate, bool Bpr>
MOEC_DEVICE void routerTopK(const RouterParams &r, int64_t t, int lane,
                            const float (&p)[routerPerLane(E)]) {
  constexpr int kPer = routerPerLane(E);
  unsigned taken = 0; // bit s: expert lane + 32 s
  float chosen[K];
  int chosenExpert[K];
  float selSum = 0.0f;
#pragma unroll
  for (int j = 0; j < K; ++j) {
    if (j >= K - S) {
      const int e = routerSample<E, K>(r, t, j, p, taken);
      if (lane == e % 32)
        taken |= 1u << (e / 32);
      chosen[j] = routerExpertValue<E>(p, e);
      chosenExpert[j] = e;
      selSum += chosen[j];
      continue;
    }
    float best = -1.0f;
    int bestE = 1 << 30;
#pragma unroll
    for (int s = 0; s < kPer; ++s) {
      int e = lane + 32 * s;
      if (e < E && !((taken >> s) & 1u) &&
          (p[s] > best || (p[s] == best && e < bestE))) {
        best = p[s];
        bestE = e;
      }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
      float ob = __shfl_xor_sync(kFullMask, best, offset);
      int oe = __shfl_xor_sync(kFullMask, bestE, offset);
      if (ob > best || (ob == best && oe < bestE)) {
        best = ob;
        bestE = oe;
      }
    }
    if (lane == bestE % 32)
      taken |= 1u << (bestE / 32);
    chosen[j] = best;
    chosenExpert[j] = bestE;
    selSum += best;
  }
  if (lane != 0)
    return;
#pragma unroll
  for (int j = 0; j < K; ++j) {
    float g = chosen[j];
    if (Gate == GateWeighting::RenormDetached ||
        Gate == GateWeighting::SoftmaxTopK)
      g = selSum > 0.0f ? chosen[j] / selSum : 0.0f;
    else if (Gate == GateWeighting::Unit)
      g = 1.0f;
    else if (Gate == GateWeighting::Renorm && K > 1)
      g = chosen[j] / fmaxf(selSum, kRenormEpsilon);
    r.expert[t * K + j] = chosenExpert[j];
    r.live[t * K + j] = chosen[j] > 0.0f ? 1 : 0;
    if (r.gates)
      r.gates[t * K + j] = chosen[j] > 0.0f ? g : 0.0f;
  }
  if (Bpr)
    r.top1[t] = chosen[0];
}

/// Phase 3, every block: its z-loss sum and probability mass per expert,
/// in warp order, into zPart / pPart. The experts go through shared memory
/// 32 at a time (p[s] of every warp), so it does not grow with E.
template <int E, int THREADS>
MOEC_DEVICE void routerBlockPartials(const RouterParams &r, int lane, int warp,
                                     float z,
                                     const float (&p)[routerPerLane(E)]) {
  constexpr int kWarps = THREADS / 32;
  MOEC_SHARED(float, zWarp, kWarps);
  MOEC_SHARED(float, pWarp, kWarps * 32);
  if (lane == 0)
    zWarp[warp] = z;
  const int64_t block = blockIdx.x;
  for (int s = 0; s < routerPerLane(E); ++s) {
    pWarp[warp * 32 + lane] = p[s];
    __syncthreads();
    const int e = 32 * s + static_cast<int>(threadIdx.x);
    if (threadIdx.x < 32 && e < E) {
      float ps = 0.0f;
      for (int w = 0; w < kWarps; ++w)
        ps += pWarp[w * 32 + threadIdx.x];
      r.pPart[block * E + e] = ps;
    }
    __syncthreads(); // pWarp is read before the next experts overwrite it
  }
  if (threadIdx.x == 0) {
    float zs = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      zs += zWarp[w];
    r.zPart[block] = zs;
  }
}

/// Whether assignment a is live: from the router's `live` scratch, or from
/// the probabilities (p[t, expert[a]] > 0) after the fact.
struct BalanceLiveFn {
  gptr<const int32_t> live;
  gptr<const float> probs;
  int experts;
  gptr<const int32_t> expert;
  int k;
  MOEC_DEVICE bool operator()(int64_t a) const {
    if (live)
      return live[a] != 0;
    return probs[(a / k) * experts + expert[a]] > 0.0f;
  }
};

/// Counts the live assignments per expert (for Top1, first choices only)
/// into `counts` [E + 2]: then the live assignments counted and the live
/// tokens (first choice live). One block; integer atomics are order-free.
template <int E, int K, int THREADS, BalanceLoss Balance>
MOEC_DEVICE void countLiveChoices(int64_t tokens, gptr<const int32_t> expert,
                                  const BalanceLiveFn &isLive,
                                  sptr<int> counts) {
  for (int e = threadIdx.x; e < E + 2; e += THREADS)
    counts[e] = 0;
  __syncthreads();
  for (int64_t a = threadIdx.x; a < tokens * K; a += THREADS) {
    const int j = static_cast<int>(a % K);
    if (!isLive(a))
      continue;
    if (j == 0)
      atomicAdd(&counts[E + 1], 1);
    if (Balance == BalanceLoss::Top1 && j != 0)
      continue;
    atomicAdd(&counts[expert[a]], 1);
    atomicAdd(&counts[E], 1);
  }
  __syncthreads();
}

/// f_e from countLiveChoices's counts.
template <int E, BalanceLoss Balance>
MOEC_DEVICE float balanceShare(sptr<int> counts, int e) {
  const int denom = Balance == BalanceLoss::AllSlots ? counts[E] : counts[E + 1];
  return denom > 0 ? static_cast<float>(counts[e]) / static_cast<float>(denom)
                   : 0.0f;
}

/// Phase 4, the last block: the z-loss and balance loss from the block
/// partials (in block order) and the routing counts f over live
/// assignments, before capacity drops.
template <int E, int K, int THREADS, BalanceLoss Balance>
MOEC_DEVICE void routerLosses(const RouterParams &r, sptr<int> counts,
                              sptr<float> pMean) {
  const int64_t n = r.tokens;
  const int64_t blocks = gridDim.x;
  const gptr<const int32_t> live = r.live;
  countLiveChoices<E, K, THREADS, Balance>(
      n, r.expert, BalanceLiveFn{live, gptr<const float>(), E, r.expert, K}, counts);
  const int liveTokens = counts[E + 1];
  for (int e = threadIdx.x; e < E; e += THREADS) {
    float ps = 0.0f;
    for (int64_t b = 0; b < blocks; ++b)
      ps += r.pPart[b * E + e];
    pMean[e] = liveTokens > 0 ? ps / static_cast<float>(liveTokens) : 0.0f;
  }
  __syncthreads();
  if (threadIdx.x != 0)
    return;
  float zs = 0.0f;
  for (int64_t b = 0; b < blocks; ++b)
    zs += r.zPart[b];
  if (r.zloss)
    r.zloss[0] = zs / static_cast<float>(n);
  if (r.balance) {
    float sum = 0.0f;
    for (int e = 0; e < E; ++e)
      sum += balanceShare<E, Balance>(counts, e) * pMean[e];
    r.balance[0] = E * sum;
  }
}

/// grid ceil(T / (THREADS / 32)); one warp per token for phases 1-3, then
/// the last block to finish (integer ticket) runs phase 4.
template <int D, int E, int K, int S, int THREADS, bool Linear,
          GateWeighting Gate, bool Bpr, BalanceLoss Balance>
MOEC_DEVICE void routerKernel(const RouterParams r) {
  static_assert(E <= kRouterMaxExperts,
                "a lane marks its taken experts in one 32-bit mask");
  constexpr int kWarps = THREADS / 32;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  float z = 0.0f;
  float p[routerPerLane(E)] = {};
  if (t < r.tokens) {
    z = routerSoftmax<D, E, Linear>(r, t, lane, p);
    routerTopK<E, K, S, Gate, Bpr>(r, t, lane, p);
  }
  routerBlockPartials<E, THREADS>(r, lane, warp, z, p);
  if (!isLastBlock(r.ticket))
    return;
  MOEC_SHARED(int, counts, E + 2);
  MOEC_SHARED(float, pMean, E);
  routerLosses<E, K, THREADS, Balance>(r, counts, pMean);
}

/// d logits of moe.topk_router for one token per warp (grid ceil(T /
/// warps)). dgates and dprobs may be null.
template <int E, int K, int THREADS, GateWeighting Gate>
MOEC_DEVICE void routerGradRows(int64_t tokens, gptr<const float> probs,
                                gptr<const int32_t> expert,
                                gptr<const int32_t> slot,
                                gptr<const float> dgates,
                                gptr<const float> dprobs, gptr<float> dlogits) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * (THREADS / 32) + warp;
  if (t >= tokens)
    return;
  constexpr int kPer = routerPerLane(E);
  float p[kPer] = {}, dp[kPer] = {}, direct[kPer] = {};
  for (int s = 0; s < kPer; ++s) {
    int e = lane + 32 * s;
    if (e < E) {
      p[s] = probs[t * E + e];
      dp[s] = dprobs ? dprobs[t * E + e] : 0.0f;
    }
  }
  float sel = 0.0f;
  for (int j = 0; j < K; ++j)
    sel += probs[t * E + expert[t * K + j]];
  // A masked token (sel = 0) has no kept choice: nothing flows back.
  if (dgates && Gate != GateWeighting::Unit && sel > 0.0f) {
    // Every lane walks the k choices; the lane owning expert e adds its part.
    float gdg = 0.0f;
    for (int j = 0; j < K; ++j)
      if (slot[t * K + j] >= 0)
        gdg += probs[t * E + expert[t * K + j]] / sel * dgates[t * K + j];
    for (int j = 0; j < K; ++j) {
      int e = expert[t * K + j];
      bool kept = slot[t * K + j] >= 0;
      float dg = kept ? dgates[t * K + j] : 0.0f;
      for (int s = 0; s < kPer; ++s) {
        if (lane + 32 * s != e)
          continue;
        if (Gate == GateWeighting::Raw)
          dp[s] += dg;
        else if (Gate == GateWeighting::RenormDetached)
          dp[s] += dg / sel;
        else if (Gate == GateWeighting::Renorm && K == 1)
          dp[s] += dg;
        else if (Gate == GateWeighting::Renorm) {
          // g = p / D, D = max(sel, eps) differentiated (for sel > eps).
          float denominator = fmaxf(sel, kRenormEpsilon);
          dp[s] += dg / denominator;
          if (sel > kRenormEpsilon)
            dp[s] -= gdg * sel / (denominator * denominator);
        } else // SoftmaxTopK: softmax over the selected logits
          direct[s] += p[s] / sel * (dg - gdg);
      }
    }
  }
  float mine = 0.0f;
  for (int s = 0; s < kPer; ++s)
    mine += dp[s] * p[s];
  float dot = warpSum(mine);
  for (int s = 0; s < kPer; ++s) {
    int e = lane + 32 * s;
    if (e < E)
      dlogits[t * E + e] = p[s] * (dp[s] - dot) + direct[s];
  }
}

/// d logits of moe.z_loss: dloss * 2 lse_t softmax(logits_t) / N.
template <int E, int THREADS>
MOEC_DEVICE void zLossGradRows(int64_t tokens, gptr<const float> logits,
                               gptr<const float> dloss, gptr<float> dlogits) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * (THREADS / 32) + warp;
  if (t >= tokens)
    return;
  constexpr int kPer = routerPerLane(E);
  float l[kPer];
  float mine = -3.0e38f;
  for (int s = 0; s < kPer; ++s) {
    l[s] = lane + 32 * s < E ? logits[t * E + lane + 32 * s] : -3.0e38f;
    mine = l[s] > mine ? l[s] : mine;
  }
  float mx = warpMax(mine);
  float sum = 0.0f;
  for (int s = 0; s < kPer; ++s)
    if (lane + 32 * s < E)
      sum += expf(l[s] - mx);
  sum = warpSum(sum);
  const float lse = mx + logf(sum);
  const float scale = dloss[0] * 2.0f * lse / static_cast<float>(tokens);
  for (int s = 0; s < kPer; ++s)
    if (lane + 32 * s < E)
      dlogits[t * E + lane + 32 * s] = scale * expf(l[s] - mx) / sum;
}

/// The f_e of moe.switch_loss (live assignments, counted before drops) into
/// `f` [E + 1], then N' (the live tokens) in f[E]; one block.
template <int E, int K, int THREADS, BalanceLoss Balance>
MOEC_DEVICE void switchLossFractions(int64_t tokens, gptr<const float> probs,
                                     gptr<const int32_t> expert,
                                     gptr<float> f) {
  MOEC_SHARED(int, counts, E + 2);
  countLiveChoices<E, K, THREADS, Balance>(
      tokens, expert, BalanceLiveFn{gptr<const int32_t>(), probs, E, expert, K}, counts);
  for (int e = threadIdx.x; e < E; e += THREADS)
    f[e] = balanceShare<E, Balance>(counts, e);
  if (threadIdx.x == 0)
    f[E] = static_cast<float>(counts[E + 1]);
}

/// moe.routing_stats in one block: each thread counts whole tokens (PARTS
/// rows of K assignments), and integer sums make the result exact.
template <int K, int PARTS, int E, int THREADS>
MOEC_DEVICE void routingStats(int64_t rows, gptr<const int32_t> expert,
                              gptr<const int32_t> slot, gptr<float> stats) {
  MOEC_SHARED(int, scratch, THREADS / 32);
  int kept = 0, activeRows = 0, reached = 0;
  const int64_t tokens = rows / PARTS;
  for (int64_t t = threadIdx.x; t < tokens; t += THREADS) {
    const int64_t first = t * PARTS * K;
    for (int a = 0; a < PARTS * K; ++a) {
      if (slot[first + a] < 0)
        continue;
      ++kept;
      // A row is active at its first kept choice; an expert is reached at
      // its first kept assignment among the token's.
      bool rowSeen = false, expertSeen = false;
      for (int b = a - a % K; b < a; ++b)
        rowSeen |= slot[first + b] >= 0;
      for (int b = 0; b < a; ++b)
        expertSeen |= slot[first + b] >= 0 &&
                      expert[first + b] == expert[first + a];
      activeRows += rowSeen ? 0 : 1;
      reached += expertSeen ? 0 : 1;
    }
  }
  kept = blockSum<THREADS>(kept, scratch);
  activeRows = blockSum<THREADS>(activeRows, scratch);
  reached = blockSum<THREADS>(reached, scratch);
  if (threadIdx.x != 0)
    return;
  stats[0] = static_cast<float>(rows * K);
  stats[1] = static_cast<float>(kept);
  stats[2] = static_cast<float>(rows);
  stats[3] = static_cast<float>(activeRows);
  stats[4] = static_cast<float>(tokens * E);
  stats[5] = static_cast<float>(reached);
}

} // namespace moec

#endif // MOEC_DEVICE_ROUTER_CUH
