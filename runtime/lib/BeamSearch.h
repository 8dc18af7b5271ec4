//===- BeamSearch.h - beam search over a step function ----------*- C++ -*-===//
//
// Internal to the runtime. Sentences are searched together: row
// s * beam + i holds hypothesis i of sentence s. The step function is given
// each row's last token and the row it continues (so the caller can reorder
// its caches) and returns each row's next-token logits.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_BEAMSEARCH_H
#define MOEC_RUNTIME_BEAMSEARCH_H

#include <cstdint>
#include <functional>
#include <vector>

namespace moec::detail {

struct BeamSettings {
  /// Hypotheses kept per sentence; 1 is greedy search.
  int64_t beam = 4;
  /// GNMT: finished hypotheses rank by logprob / ((5 + length) / 6)^alpha.
  double lengthPenalty = 0.6;
  int32_t bos = 1, eos = 2;
  /// Tokens never generated (padding, bos).
  std::vector<int32_t> banned;
};

/// logits[row][token] of the next token of every row, after moving row
/// parents[row]'s state to row `row`.
using BeamStep = std::function<std::vector<std::vector<double>>(
    const std::vector<int32_t> &lastTokens,
    const std::vector<int64_t> &parents)>;

/// The best hypothesis of each sentence (without bos and eos); sentence s
/// generates at most maxLengths[s] tokens before its eos. The step is
/// called once per position, at most max(maxLengths) + 1 times.
std::vector<std::vector<int32_t>>
beamSearch(const std::vector<int64_t> &maxLengths, const BeamSettings &settings,
           const BeamStep &step);

} // namespace moec::detail

#endif // MOEC_RUNTIME_BEAMSEARCH_H
