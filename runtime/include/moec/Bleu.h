//===- Bleu.h - corpus BLEU as sacreBLEU computes it -------------*- C++ -*-===//
//
// sacreBLEU's default: both sides tokenized with the 13a tokenizer (mteval
// v13a), n-grams up to 4 counted over the whole corpus, the brevity
// penalty, and "exp" smoothing for n-gram orders with no match.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_BLEU_H
#define MOEC_BLEU_H

#include <cstdint>
#include <string>
#include <vector>

namespace moec {

struct BleuScore {
  /// 0-100.
  double score = 0;
  /// Modified n-gram precisions (0-100), n = 1..4.
  double precisions[4] = {0, 0, 0, 0};
  double brevityPenalty = 0;
  int64_t hypothesisLength = 0, referenceLength = 0;
};

/// The 13a tokenization of one line, tokens separated by single spaces.
std::string tokenize13a(const std::string &line);

/// Corpus BLEU of `hypotheses` against one reference each (same count;
/// throws moec::Error otherwise).
BleuScore corpusBleu(const std::vector<std::string> &hypotheses,
                     const std::vector<std::string> &references);

} // namespace moec

#endif // MOEC_BLEU_H
