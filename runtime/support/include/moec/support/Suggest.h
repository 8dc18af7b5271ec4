//===- Suggest.h - "did you mean" for misspelt names ------------*- C++ -*-===//
//
// One rule for every suggestion moec makes (command-line flags, settings,
// layers, names, functions): the candidate nearest to the misspelt name by
// edit distance, where one swap of neighbours counts as one edit and a
// change of case as none, within a third of the name's length (at least
// one); a name of up to three letters only matches candidates that start
// with the same letter. Plain C++, shared by the runtime and
// the compiler.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_SUPPORT_SUGGEST_H
#define MOEC_SUPPORT_SUGGEST_H

#include <string>
#include <string_view>
#include <vector>

namespace moec::support {

/// The edit distance from `a` to `b`, or one more than the distance after
/// one swap of neighbours in `a`, whichever is less; a letter and the same
/// letter in the other case are equal ("adamW" is 0 away from "adamw").
unsigned typoDistance(std::string_view a, std::string_view b);

/// The candidate nearest to `name` within max(1, |name| / 3) edits (see
/// above), ties to the first; failing that, a candidate that `name`
/// qualifies with a prefix ("num_experts" -> "experts"). Empty when none
/// fits or `name` is itself a candidate.
std::string nearestName(std::string_view name,
                        const std::vector<std::string> &candidates);

} // namespace moec::support

#endif // MOEC_SUPPORT_SUGGEST_H
