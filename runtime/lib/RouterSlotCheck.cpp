//===- RouterSlotCheck.cpp - router slots up to near-tied ranks -----------===//

#include "RouterSlotCheck.h"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>

namespace moec::detail {

namespace {

/// "0, 1, 2" or, for long lists, the first eight and a count.
std::string listed(const std::vector<int32_t> &values) {
  if (values.size() <= 8)
    return fmt::format("{}", fmt::join(values, ", "));
  return fmt::format("{}, ... ({} in all)",
                     fmt::join(values.begin(), values.begin() + 8, ", "),
                     values.size());
}

} // namespace

std::string nearTiedSlotMismatch(const int32_t *got, const int32_t *want,
                                 const int32_t *expert,
                                 const std::vector<double> &key, int64_t k,
                                 int64_t numExperts, double tolerance) {
  const int64_t n = static_cast<int64_t>(key.size());
  for (int64_t a = 0; a < n * k; ++a)
    if (expert[a] < 0 || expert[a] >= numExperts)
      return fmt::format("assignment {} chose expert {}", a, expert[a]);
  for (int64_t e = 0; e < numExperts; ++e) {
    std::vector<int32_t> gotSlots, wantSlots;
    // Per choice: (slot, token) of the routed assignments, and the largest
    // key among the dropped ones (they rank after every routed one).
    std::vector<std::vector<std::pair<int32_t, int64_t>>> routed(k);
    std::vector<double> droppedKey(k, -std::numeric_limits<double>::infinity());
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < k; ++j) {
        int64_t a = t * k + j;
        if (expert[a] != e)
          continue;
        if (want[a] >= 0)
          wantSlots.push_back(want[a]);
        if (got[a] >= 0) {
          gotSlots.push_back(got[a]);
          routed[j].push_back({got[a], t});
        } else {
          droppedKey[j] = std::max(droppedKey[j], key[t]);
        }
      }
    std::sort(gotSlots.begin(), gotSlots.end());
    std::sort(wantSlots.begin(), wantSlots.end());
    if (gotSlots != wantSlots)
      return fmt::format("expert {} hands out slots {}; the cpu {}", e,
                         listed(gotSlots), listed(wantSlots));
    int32_t lastOfPrevious = -1;
    for (int64_t j = 0; j < k; ++j) {
      auto &order = routed[j];
      std::sort(order.begin(), order.end());
      if (!order.empty() && order.front().first <= lastOfPrevious)
        return fmt::format("expert {}: choice {} of token {} takes slot {} "
                           "before an earlier choice's",
                           e, j, order.front().second, order.front().first);
      if (!order.empty())
        lastOfPrevious = order.back().first;
      // Walking from the last-ranked: the largest key ranked later.
      double later = droppedKey[j];
      for (auto it = order.rbegin(); it != order.rend(); ++it) {
        double mine = key[it->second];
        if (later > mine + tolerance * std::max(std::abs(mine),
                                                std::abs(later)))
          return fmt::format("expert {}: token {} (top-1 probability {:.9g}) "
                             "takes slot {} ahead of a token whose "
                             "probability {:.9g} is clearly higher",
                             e, it->second, mine, it->first, later);
        later = std::max(later, mine);
      }
    }
  }
  return "";
}

} // namespace moec::detail
