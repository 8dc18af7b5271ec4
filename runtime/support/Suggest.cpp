//===- Suggest.cpp - "did you mean" for misspelt names --------------------===//

#include "moec/support/Suggest.h"

#include <algorithm>
#include <cctype>

namespace moec::support {

static bool sameLetter(char a, char b) {
  return std::tolower(static_cast<unsigned char>(a)) ==
         std::tolower(static_cast<unsigned char>(b));
}

namespace {

/// Levenshtein distance, letters compared without case.
unsigned editDistance(std::string_view a, std::string_view b) {
  std::vector<unsigned> previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    previous[j] = static_cast<unsigned>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = static_cast<unsigned>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      unsigned cost = sameLetter(a[i - 1], b[j - 1]) ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1,
                             previous[j - 1] + cost});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

} // namespace

unsigned typoDistance(std::string_view a, std::string_view b) {
  unsigned best = editDistance(a, b);
  // One swap of neighbours, the most common typo, counts as one edit.
  std::string swapped(a);
  for (size_t i = 0; i + 1 < swapped.size() && best > 1; ++i) {
    if (sameLetter(swapped[i], swapped[i + 1]))
      continue;
    std::swap(swapped[i], swapped[i + 1]);
    best = std::min(best, 1 + editDistance(swapped, b));
    std::swap(swapped[i], swapped[i + 1]);
  }
  return best;
}

std::string nearestName(std::string_view name,
                        const std::vector<std::string> &candidates) {
  if (std::find(candidates.begin(), candidates.end(), name) != candidates.end())
    return "";
  unsigned threshold = std::max<unsigned>(1, name.size() / 3);
  std::string best;
  unsigned bestDistance = threshold + 1;
  for (const std::string &candidate : candidates) {
    // A short name that starts differently is another word ("gpu" is not
    // "cpu"), not a typo.
    if (name.size() <= 3 &&
        (candidate.empty() || name.empty() ||
         !sameLetter(name.front(), candidate.front())))
      continue;
    unsigned distance = typoDistance(name, candidate);
    if (distance < bestDistance) {
      bestDistance = distance;
      best = candidate;
    }
  }
  if (!best.empty())
    return best;
  // A qualified spelling of a candidate: "num_experts" for "experts".
  for (const std::string &candidate : candidates)
    if (candidate.size() >= 3 && name.size() > candidate.size() + 1 &&
        name.substr(name.size() - candidate.size()) == candidate &&
        name[name.size() - candidate.size() - 1] == '_')
      return candidate;
  return "";
}

} // namespace moec::support
