//===- InputCheck.cpp - token inputs checked before any kernel ------------===//

#include "InputCheck.h"
#include "moec/Error.h"

#include <algorithm>
#include <fmt/format.h>

namespace moec::detail {

namespace {

/// "[1, 2]" for flat element `i` of `shape`.
std::string indexOf(const Shape &shape, int64_t i) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = i % shape[d];
    i /= shape[d];
  }
  return fmt::format("[{}]", fmt::join(index, ", "));
}

/// Checks that the ids of `t` lie in [0, limit), `range` naming that range
/// in errors.
void checkIds(const std::string &program, const std::string &name,
              const Tensor &t, int64_t limit, bool negativeIgnored,
              const char *range = "the vocabulary") {
  const int64_t vocab = limit;
  if (t.dtype() != DType::I32)
    return; // the runner reports the dtype
  const int32_t *ids = t.data<int32_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (ids[i] < vocab && (ids[i] >= 0 || negativeIgnored))
      continue;
    throw Error(fmt::format("program '{}': {}{} = {} is outside {} [0, {}){}",
                            program, name, indexOf(t.shape(), i), ids[i],
                            range, vocab,
                            negativeIgnored ? " (negative targets are ignored)"
                                            : ""));
  }
}

} // namespace

void checkTokenInputs(const BundleData &bundle, const std::string &program,
                      const std::map<std::string, Tensor> &inputs) {
  const int64_t vocab = bundle.model.vocab;
  auto tokens = inputs.find("tokens");
  if (vocab > 0 && tokens != inputs.end())
    checkIds(program, "tokens", tokens->second, vocab, false);
  if (auto source = inputs.find("source"); vocab > 0 && source != inputs.end())
    checkIds(program, "source", source->second, vocab, false);
  // Classifiers predict classes, not tokens.
  int64_t targetRange =
      bundle.model.objective == "classify" ? bundle.model.classes : vocab;
  auto targets = inputs.find("targets");
  if (targetRange > 0 && targets != inputs.end())
    checkIds(program, "targets", targets->second, targetRange, true,
             targetRange == vocab ? "the vocabulary" : "the classes");
  for (const char *mask : {"mask", "source_mask"})
    if (auto m = inputs.find(mask); m != inputs.end())
      checkIds(program, mask, m->second, 2, false, "the mask values");
  if (auto segments = inputs.find("segments"); segments != inputs.end())
    checkIds(program, "segments", segments->second,
             std::max<int64_t>(bundle.model.segments, 1), false,
             "the segments");
  if (auto source = inputs.find("source_mask");
      source != inputs.end() && source->second.shape().size() == 2 &&
      bundle.model.maxSeq > 0 && source->second.shape()[1] > bundle.model.maxSeq)
    throw Error(fmt::format("program '{}': the source has {} positions, "
                            "beyond the model's max_seq of {}",
                            program, source->second.shape()[1],
                            bundle.model.maxSeq));

  const int64_t maxSeq = bundle.model.maxSeq;
  if (maxSeq <= 0 || tokens == inputs.end() || tokens->second.shape().size() < 2)
    return;
  const int64_t seq = tokens->second.shape()[1];
  int64_t past = 0;
  auto pastInput = inputs.find("past");
  if (pastInput != inputs.end() && pastInput->second.numel() == 1 &&
      pastInput->second.dtype() == DType::I64) {
    past = pastInput->second.data<int64_t>()[0];
    if (past < 0)
      throw Error(fmt::format("program '{}': past = {} must not be negative",
                              program, past));
  }
  if (past + seq > maxSeq)
    throw Error(fmt::format(
        "program '{}': {} positions{} reach beyond the model's max_seq of {}",
        program, seq,
        past ? fmt::format(" after {} cached ones", past) : std::string(),
        maxSeq));
}

} // namespace moec::detail
