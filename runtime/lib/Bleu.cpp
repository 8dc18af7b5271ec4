//===- Bleu.cpp - corpus BLEU as sacreBLEU computes it --------------------===//

#include "moec/Bleu.h"
#include "moec/Error.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <regex>
#include <sstream>

namespace moec {

namespace {

std::string replaceAll(std::string text, const std::string &from,
                       const std::string &to) {
  size_t at = 0;
  while ((at = text.find(from, at)) != std::string::npos) {
    text.replace(at, from.size(), to);
    at += to.size();
  }
  return text;
}

std::vector<std::string> words(const std::string &line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;)
    out.push_back(w);
  return out;
}

using NGramCounts = std::map<std::vector<std::string>, int64_t>;

NGramCounts ngrams(const std::vector<std::string> &tokens, size_t n) {
  NGramCounts counts;
  for (size_t i = 0; i + n <= tokens.size(); ++i)
    ++counts[std::vector<std::string>(tokens.begin() + i,
                                      tokens.begin() + i + n)];
  return counts;
}

} // namespace

std::string tokenize13a(const std::string &line) {
  // mteval-v13a.pl's rules, in its order.
  std::string s = replaceAll(line, "<skipped>", "");
  s = replaceAll(s, "-\n", "");
  s = replaceAll(s, "\n", " ");
  if (s.find('&') != std::string::npos) {
    s = replaceAll(s, "&quot;", "\"");
    s = replaceAll(s, "&amp;", "&");
    s = replaceAll(s, "&lt;", "<");
    s = replaceAll(s, "&gt;", ">");
  }
  s = " " + s + " ";
  static const std::regex punctuation(R"(([\{-\~\[-\` -\&\(-\+\:-\@\/]))");
  static const std::regex periodCommaBefore(R"(([^0-9])([\.,]))");
  static const std::regex periodCommaAfter(R"(([\.,])([^0-9]))");
  static const std::regex dashAfterDigit(R"(([0-9])(-))");
  s = std::regex_replace(s, punctuation, " $1 ");
  s = std::regex_replace(s, periodCommaBefore, "$1 $2 ");
  s = std::regex_replace(s, periodCommaAfter, " $1 $2");
  s = std::regex_replace(s, dashAfterDigit, "$1 $2 ");
  std::vector<std::string> tokens = words(s);
  std::string out;
  for (const std::string &t : tokens)
    out += (out.empty() ? "" : " ") + t;
  return out;
}

BleuScore corpusBleu(const std::vector<std::string> &hypotheses,
                     const std::vector<std::string> &references) {
  if (hypotheses.size() != references.size())
    throw Error(fmt::format("BLEU needs one reference per hypothesis, got {} "
                            "hypotheses and {} references",
                            hypotheses.size(), references.size()));
  int64_t matches[4] = {0, 0, 0, 0}, totals[4] = {0, 0, 0, 0};
  BleuScore result;
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    std::vector<std::string> hyp = words(tokenize13a(hypotheses[i]));
    std::vector<std::string> ref = words(tokenize13a(references[i]));
    result.hypothesisLength += static_cast<int64_t>(hyp.size());
    result.referenceLength += static_cast<int64_t>(ref.size());
    for (size_t n = 1; n <= 4; ++n) {
      NGramCounts h = ngrams(hyp, n), r = ngrams(ref, n);
      for (const auto &[gram, count] : h) {
        auto it = r.find(gram);
        if (it != r.end())
          matches[n - 1] += std::min(count, it->second);
      }
      if (hyp.size() >= n)
        totals[n - 1] += static_cast<int64_t>(hyp.size() - n + 1);
    }
  }
  // As sacreBLEU: no match of any order scores 0 (before smoothing).
  if (result.hypothesisLength == 0 ||
      std::all_of(std::begin(matches), std::end(matches),
                  [](int64_t m) { return m == 0; }))
    return result;
  // "exp" smoothing: the k-th order with no match counts 1 / 2^k matches.
  double logSum = 0;
  double smooth = 1;
  for (int n = 0; n < 4; ++n) {
    double precision;
    if (totals[n] == 0) {
      precision = 0;
    } else if (matches[n] == 0) {
      smooth *= 2;
      precision = 100.0 / (smooth * static_cast<double>(totals[n]));
    } else {
      precision = 100.0 * static_cast<double>(matches[n]) /
                  static_cast<double>(totals[n]);
    }
    result.precisions[n] = precision;
    logSum += precision > 0 ? std::log(precision) : -INFINITY;
  }
  double h = static_cast<double>(result.hypothesisLength);
  double r = static_cast<double>(result.referenceLength);
  result.brevityPenalty = h < r ? std::exp(1.0 - r / h) : 1.0;
  result.score = std::isinf(logSum)
                     ? 0.0
                     : result.brevityPenalty * std::exp(logSum / 4.0);
  return result;
}

} // namespace moec
