//===- Suggest.cpp - "did you mean" for misspelt names --------------------===//

#include "moec/support/Suggest.h"

#include <algorithm>
#include <cctype>

namespace moec::support {

static bool sameLetter(char a, char b) {
  return std::tolower(static_cast<unsigned char>(a)) ==
         std::tolower(static_cast<unsigned char>(b));
}

unsigned typoDistance(std::string_view a, std::string_view b) {
  // Three rows of the dynamic programme suffice for adjacent swaps.
  std::vector<unsigned> before(b.size() + 1), previous(b.size() + 1),
      current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    previous[j] = static_cast<unsigned>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = static_cast<unsigned>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      unsigned cost = sameLetter(a[i - 1], b[j - 1]) ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1,
                             previous[j - 1] + cost});
      if (i > 1 && j > 1 && sameLetter(a[i - 1], b[j - 2]) &&
          sameLetter(a[i - 2], b[j - 1]))
        current[j] = std::min(current[j], before[j - 2] + 1);
    }
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::string nearestName(std::string_view name,
                        const std::vector<std::string> &candidates) {
  if (std::find(candidates.begin(), candidates.end(), name) != candidates.end())
    return "";
  // One edit in a name of three letters or fewer is a different word
  // ("gpu" is not "cpu").
  unsigned threshold =
      name.size() > 3 ? std::max<unsigned>(1, name.size() / 3) : 0;
  std::string best;
  unsigned bestDistance = threshold + 1;
  for (const std::string &candidate : candidates) {
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
