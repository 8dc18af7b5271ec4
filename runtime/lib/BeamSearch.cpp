//===- BeamSearch.cpp - beam search over a step function ------------------===//

#include "BeamSearch.h"
#include "moec/Error.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace moec::detail {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct Hypothesis {
  std::vector<int32_t> tokens;
  double logProb = 0;
};

/// log_softmax of one row.
std::vector<double> logSoftmax(const std::vector<double> &logits) {
  double top = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (double x : logits)
    sum += std::exp(x - top);
  double shift = top + std::log(sum);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i)
    out[i] = logits[i] - shift;
  return out;
}

struct Sentence {
  std::vector<Hypothesis> live;
  std::vector<std::pair<double, std::vector<int32_t>>> finished;
  bool done = false;
};

double normalized(double logProb, size_t length, double alpha) {
  return logProb / std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

} // namespace

std::vector<std::vector<int32_t>>
beamSearch(const std::vector<int64_t> &maxLengths, const BeamSettings &s,
           const BeamStep &step) {
  if (s.beam < 1)
    throw Error("beam search needs a beam of at least 1");
  const auto sentences = static_cast<int64_t>(maxLengths.size());
  const int64_t beam = s.beam, rows = sentences * beam;
  std::vector<Sentence> state(sentences);
  for (Sentence &st : state)
    st.live.assign(1, Hypothesis{});
  std::vector<int32_t> last(rows, s.bos);
  std::vector<int64_t> parents(rows);
  for (int64_t r = 0; r < rows; ++r)
    parents[r] = r;
  int64_t longest = *std::max_element(maxLengths.begin(), maxLengths.end());

  for (int64_t t = 0; t <= longest; ++t) {
    std::vector<std::vector<double>> logits = step(last, parents);
    if (static_cast<int64_t>(logits.size()) != rows)
      throw Error("beam search: the step returned the wrong number of rows");
    for (int64_t r = 0; r < rows; ++r)
      parents[r] = r;
    for (int64_t si = 0; si < sentences; ++si) {
      Sentence &st = state[si];
      if (st.done)
        continue;
      // (score, hypothesis, token) candidates over every live hypothesis.
      struct Candidate {
        double logProb;
        int64_t hyp;
        int32_t token;
      };
      std::vector<Candidate> candidates;
      bool lastStep = t == maxLengths[si];
      for (size_t h = 0; h < st.live.size(); ++h) {
        std::vector<double> lp = logSoftmax(logits[si * beam + h]);
        for (int32_t b : s.banned)
          if (b >= 0 && b < static_cast<int32_t>(lp.size()))
            lp[b] = kNegInf;
        if (lastStep) {
          // Out of room: only the end of the sentence is left.
          candidates.push_back({st.live[h].logProb + lp[s.eos],
                                static_cast<int64_t>(h), s.eos});
          continue;
        }
        for (int32_t v = 0; v < static_cast<int32_t>(lp.size()); ++v)
          if (lp[v] > kNegInf)
            candidates.push_back({st.live[h].logProb + lp[v],
                                  static_cast<int64_t>(h), v});
      }
      size_t keep = std::min<size_t>(candidates.size(), 2 * beam);
      std::partial_sort(candidates.begin(), candidates.begin() + keep,
                        candidates.end(),
                        [](const Candidate &a, const Candidate &b) {
                          return a.logProb > b.logProb;
                        });
      std::vector<Hypothesis> next;
      for (size_t c = 0; c < keep && static_cast<int64_t>(next.size()) < beam;
           ++c) {
        const Candidate &cand = candidates[c];
        const Hypothesis &from = st.live[cand.hyp];
        if (cand.token == s.eos) {
          if (static_cast<int64_t>(st.finished.size()) < beam)
            st.finished.push_back(
                {normalized(cand.logProb, from.tokens.size() + 1,
                            s.lengthPenalty),
                 from.tokens});
          continue;
        }
        Hypothesis h = from;
        h.tokens.push_back(cand.token);
        h.logProb = cand.logProb;
        parents[si * beam + next.size()] = si * beam + cand.hyp;
        last[si * beam + next.size()] = cand.token;
        next.push_back(std::move(h));
      }
      st.live = std::move(next);
      // Done when beam hypotheses ended, or none is left to extend.
      st.done = static_cast<int64_t>(st.finished.size()) >= beam ||
                st.live.empty();
    }
    if (std::all_of(state.begin(), state.end(),
                    [](const Sentence &st) { return st.done; }))
      break;
  }

  std::vector<std::vector<int32_t>> best(sentences);
  for (int64_t si = 0; si < sentences; ++si) {
    Sentence &st = state[si];
    for (const Hypothesis &h : st.live)
      st.finished.push_back(
          {normalized(h.logProb, h.tokens.size(), s.lengthPenalty), h.tokens});
    auto top = std::max_element(
        st.finished.begin(), st.finished.end(),
        [](const auto &a, const auto &b) { return a.first < b.first; });
    if (top != st.finished.end())
      best[si] = top->second;
  }
  return best;
}

} // namespace moec::detail
