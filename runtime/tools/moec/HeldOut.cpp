//===- HeldOut.cpp - the objective over a held-out split ------------------===//

#include "HeldOut.h"
#include "moec/support/Stopwatch.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstring>
#include <map>

namespace moec::driver {
namespace {

/// Rows [first, first + size) of a source, as one batch of `size` rows:
/// batch index b of batch size `size` holds rows b * size ..., so the tail
/// is read one row at a time and stacked.
Batch tailBatch(const DataSource &source, int64_t first, int64_t size,
                int64_t seqLen) {
  std::vector<Batch> rows;
  for (int64_t r = 0; r < size; ++r)
    rows.push_back(source.batch(first + r, 1, seqLen));
  auto stack = [&](auto get) {
    const Tensor &one = get(rows.front());
    Shape shape = one.shape();
    shape[0] = size;
    Tensor out(one.dtype(), shape);
    for (int64_t r = 0; r < size; ++r)
      std::memcpy(static_cast<char *>(out.raw()) + r * one.nbytes(),
                  get(rows[r]).raw(), one.nbytes());
    return out;
  };
  Batch batch{stack([](const Batch &b) -> const Tensor & { return b.tokens; }),
              stack([](const Batch &b) -> const Tensor & { return b.targets; }),
              {}};
  for (const auto &[name, tensor] : rows.front().inputs)
    batch.inputs[name] = stack(
        [&](const Batch &b) -> const Tensor & { return b.inputs.at(name); });
  return batch;
}

} // namespace

bool countsPredictions(const Session &session) {
  std::vector<std::string> outputs =
      session.bundle().programOutputs(session.evaluationProgram());
  return std::count(outputs.begin(), outputs.end(), "correct") > 0 &&
         std::count(outputs.begin(), outputs.end(), "predicted") > 0;
}

HeldOutResult evaluateHeldOut(Session &session, const DataSource &source,
                              int64_t batches) {
  assert(batches > 0 && "callers skip held-out evaluation for 0 batches");
  const TrainingConfig &config = session.bundle().training();
  HeldOutResult result;
  result.rows = batches * config.batch;
  if (int64_t held = source.examples(); held > 0)
    result.rows = std::min(result.rows, held);
  result.batches = (result.rows + config.batch - 1) / config.batch;
  if (countsPredictions(session))
    result.accuracy.emplace();
  for (int64_t i = 0; i < result.batches; ++i) {
    int64_t size = std::min(config.batch, result.rows - i * config.batch);
    // Batch i of size `size` starts at row i * size: keep rows contiguous
    // by asking for full batches and the tail as its own index.
    Batch batch =
        size == config.batch
            ? source.batch(i, config.batch, config.seqLen)
            : tailBatch(source, i * config.batch, size, config.seqLen);
    auto start = std::chrono::steady_clock::now();
    std::map<std::string, double> scalars = session.evaluate(batch);
    double seconds = support::secondsSince(start);
    result.ce += scalars.at("ce") * static_cast<double>(size) /
                 static_cast<double>(result.rows);
    if (i == 0) {
      result.firstSeconds = seconds;
      result.firstRows = size;
    } else if (size == config.batch) {
      result.laterSeconds.push_back(seconds);
    }
    if (result.accuracy)
      result.accuracy->add(scalars);
  }
  return result;
}

} // namespace moec::driver
