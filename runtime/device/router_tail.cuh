//===- router_tail.cuh - priority order and capacity slots -----*- CUDA -*-===//
//
// The router's tail after routerKernel (router.cuh), as launches over many
// blocks built on sort.cuh's stable counting sort instead of work in one
// block.
//
// Batch-priority order: the tokens by descending top-1 probability, ties to
// the lower token. A probability is >= 0 (never -0), so 0x7FFFFFFF minus
// its bits orders tokens as the descending probability does; an LSD radix
// sort of those 31 bits, three stable counting sorts of 11-bit digits,
// leaves equal keys in token order. Pass p sorts the tokens in the order
// the passes before it left them: its digits kernel composes that order
// with the last pass's permutation.
//
// Capacity slots: assignment (token, choice j) is at position q = j T + x
// of the choice-major priority order (x: the token's place in it). A
// stable counting sort of the positions by expert, dead assignments left
// out, ranks q among its expert's live assignments before it: that count
// (the tiles before plus the rank within its tile) is the slot, so the
// sort needs neither its offsets nor its scatter.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_ROUTER_TAIL_CUH
#define MOEC_DEVICE_ROUTER_TAIL_CUH

namespace moec {

constexpr int kPriorityDigitBits = 11;
constexpr int kPriorityDigits = 1 << kPriorityDigitBits;
constexpr int kPriorityPasses = 3;

/// Ascending in this key is descending in the probability.
MOEC_DEVICE uint32_t priorityKey(float top1) {
  return 0x7FFFFFFFu - __float_as_uint(top1);
}

/// The token at priority position x: cur[perm[x]] after the radix passes,
/// or x in token order (both null).
struct PriorityOrder {
  gptr<const int32_t> cur, perm;
  MOEC_DEVICE int64_t token(int64_t x) const {
    return perm ? static_cast<int64_t>(cur[perm[x]]) : x;
  }
};

/// Radix pass `pass`, grid ceil(n / THREADS): the tokens as the earlier
/// passes left them, cur[i] = prev[perm[i]] (perm null: the identity, pass
/// 0; prev null: the identity, pass 1), and each one's digit of its key.
template <int THREADS>
MOEC_DEVICE void priorityDigits(int64_t n, int pass, gptr<const float> top1,
                                gptr<const int32_t> prev,
                                gptr<const int32_t> perm, gptr<int32_t> cur,
                                gptr<int32_t> digits) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(THREADS) + threadIdx.x;
  if (i >= n)
    return;
  const int32_t at = perm ? perm[i] : static_cast<int32_t>(i);
  const int32_t token = prev ? prev[at] : at;
  if (cur)
    cur[i] = token;
  digits[i] = static_cast<int32_t>(
      (priorityKey(top1[token]) >> (pass * kPriorityDigitBits)) &
      (kPriorityDigits - 1));
}

/// The assignment at position q of the choice-major priority order.
template <int K>
MOEC_DEVICE int64_t slotAssignment(int64_t tokens, const PriorityOrder &order,
                                   int64_t q) {
  return order.token(q % tokens) * K + q / tokens;
}

/// Grid ceil(T K / THREADS): the expert of each position's assignment, -1
/// for a dead one (probability 0), which takes no slot.
template <int K, int THREADS>
MOEC_DEVICE void slotKeys(int64_t tokens, PriorityOrder order,
                          gptr<const int32_t> expert,
                          gptr<const int32_t> live, gptr<int32_t> keys) {
  const int64_t q = blockIdx.x * static_cast<int64_t>(THREADS) + threadIdx.x;
  if (q >= tokens * K)
    return;
  const int64_t a = slotAssignment<K>(tokens, order, q);
  keys[q] = live[a] != 0 ? expert[a] : -1;
}

/// Grid ceil(T K / THREADS), after sortRank and sortCount of the slot keys:
/// each assignment's slot, -1 (and gate 0) when dead or past the capacity;
/// block 0 writes the load (kept assignments per expert: the live ones up
/// to the capacity).
template <int E, int K, int TILES, int THREADS, Capacity Cap>
MOEC_DEVICE void applySlots(const RouterParams &r, PriorityOrder order,
                            gptr<const int32_t> keys,
                            gptr<const int32_t> counts,
                            gptr<const int32_t> rank,
                            gptr<const int32_t> totals) {
  const int64_t n = r.tokens, assignments = n * K;
  const int64_t capacity =
      Cap == Capacity::None
          ? (int64_t(1) << 62)
          : routerCapacity<E, K, Cap>(n, r.capacityFactor, r.minCapacity);
  if (blockIdx.x == 0 && r.load)
    for (int e = threadIdx.x; e < E; e += THREADS)
      r.load[e] = static_cast<float>(totals[e] < capacity ? totals[e]
                                                          : capacity);
  const int64_t q = blockIdx.x * static_cast<int64_t>(THREADS) + threadIdx.x;
  if (q >= assignments)
    return;
  const int64_t a = slotAssignment<K>(n, order, q);
  const int32_t key = keys[q];
  const int64_t length = (assignments + TILES - 1) / TILES;
  const int64_t slot =
      key >= 0 ? counts[q / length * E + key] + static_cast<int64_t>(rank[q])
               : capacity;
  const bool keep = slot < capacity;
  if (r.slot)
    r.slot[a] = keep ? static_cast<int32_t>(slot) : -1;
  if (!keep && r.gates)
    r.gates[a] = 0.0f;
}

} // namespace moec

#endif // MOEC_DEVICE_ROUTER_TAIL_CUH
