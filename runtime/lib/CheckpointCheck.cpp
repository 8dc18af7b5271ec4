//===- CheckpointCheck.cpp - matching a checkpoint to a model -------------===//
//
// A checkpoint that does not fit the model usually has several problems at
// once (a renamed layer, a changed width), so every one is reported together,
// and a missing tensor names the closest present one: most mismatches are
// typos or renames.
//
//===----------------------------------------------------------------------===//

#include "moec/Checkpoint.h"
#include "moec/Error.h"

#include <algorithm>
#include <fmt/format.h>
#include <set>

namespace moec {

namespace {

/// Levenshtein distance between `a` and `b`, or `limit + 1` once it is known
/// to exceed `limit`; the early exit keeps matching large models cheap.
size_t boundedEditDistance(const std::string &a, const std::string &b,
                           size_t limit) {
  size_t diff = a.size() > b.size() ? a.size() - b.size() : b.size() - a.size();
  if (diff > limit)
    return limit + 1;
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    size_t rowMin = row[0];
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({above + 1, row[j - 1] + 1,
                         diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
      rowMin = std::min(rowMin, row[j]);
    }
    if (rowMin > limit)
      return limit + 1;
  }
  return std::min(row[b.size()], limit + 1);
}

/// The present name closest to `missing`, or "" when none is close. Names the
/// model does not expect win ties: they are the likelier renames.
std::string nearestName(const std::string &missing,
                        const CheckpointContents &contents,
                        const std::set<std::string> &expectedNames) {
  size_t limit = std::max<size_t>(2, missing.size() / 3);
  std::string best;
  size_t bestDistance = limit + 1;
  bool bestExpected = true;
  for (const auto &[name, tensor] : contents.tensors) {
    size_t d = boundedEditDistance(missing, name, limit);
    bool isExpected = expectedNames.count(name) != 0;
    if (d < bestDistance ||
        (d == bestDistance && d <= limit && bestExpected && !isExpected)) {
      best = name;
      bestDistance = d;
      bestExpected = isExpected;
    }
  }
  return bestDistance <= limit ? best : "";
}

} // namespace

void checkCheckpoint(const std::string &path,
                     const CheckpointContents &contents,
                     const std::vector<TensorSpec> &expected,
                     bool allowUnexpected) {
  std::set<std::string> expectedNames;
  for (const TensorSpec &spec : expected)
    expectedNames.insert(spec.name);

  std::vector<std::string> problems;
  for (const TensorSpec &spec : expected) {
    auto it = contents.tensors.find(spec.name);
    if (it == contents.tensors.end()) {
      std::string near = nearestName(spec.name, contents, expectedNames);
      problems.push_back(
          near.empty()
              ? fmt::format("{}: missing tensor '{}'", path, spec.name)
              : fmt::format("{}: missing tensor '{}' (did you mean '{}'?)",
                            path, spec.name, near));
      continue;
    }
    const Tensor &tensor = it->second;
    if (tensor.dtype() != spec.dtype)
      problems.push_back(
          fmt::format("{}: tensor '{}' has dtype {}, the model expects {}",
                      path, spec.name, safetensorsDTypeName(tensor.dtype()),
                      safetensorsDTypeName(spec.dtype)));
    if (tensor.shape() != spec.shape)
      problems.push_back(fmt::format(
          "{}: tensor '{}' has shape {}, the model expects {}", path, spec.name,
          shapeString(tensor.shape()), shapeString(spec.shape)));
  }
  if (!allowUnexpected)
    for (const auto &[name, tensor] : contents.tensors)
      if (!expectedNames.count(name))
        problems.push_back(
            fmt::format("{}: unexpected tensor '{}'", path, name));

  if (!problems.empty())
    throw Error(fmt::format("{}", fmt::join(problems, "\n")));
}

} // namespace moec
