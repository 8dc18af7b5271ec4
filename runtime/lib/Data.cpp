//===- Data.cpp - choosing a training data source -------------------------===//

#include "moec/Data.h"
#include "data/Sources.h"
#include "moec/Error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace moec {

DataSource::~DataSource() = default;

/// Byte-level sources emit every byte value, so the model must embed all 256.
static void requireByteVocab(const std::string &what, int64_t modelVocab) {
  if (modelVocab < 256)
    throw Error(fmt::format("data {} is byte-level and needs a model "
                            "vocabulary of at least 256, but the model's is "
                            "{}; raise the model's vocab or use a synthetic "
                            "markov or copy task",
                            what, modelVocab));
}

std::unique_ptr<DataSource> openDataSource(const DataSpec &spec,
                                           int64_t modelVocab, uint64_t seed,
                                           Split split) {
  if (modelVocab < 1)
    throw Error(fmt::format("data: the model's vocabulary size is {}, "
                            "expected at least 1",
                            modelVocab));
  if (spec.kind == "text") {
    requireByteVocab(fmt::format("text '{}'", fmt::join(spec.paths, ", ")),
                     modelVocab);
    return data::openTextSource(spec, seed, split);
  }
  if (spec.kind != "synthetic")
    throw Error(fmt::format("data: unknown kind '{}' (expected 'synthetic' or "
                            "'text')",
                            spec.kind));
  if (spec.task == "grammar") {
    requireByteVocab("synthetic grammar", modelVocab);
    return data::openGrammarSource(seed, split);
  }
  if (spec.task == "markov")
    return data::openMarkovSource(spec, modelVocab, seed, split);
  if (spec.task == "copy")
    return data::openCopySource(modelVocab, seed, split);
  throw Error(fmt::format("data: unknown synthetic task '{}' (expected "
                          "'grammar', 'markov' or 'copy')",
                          spec.task));
}

std::unique_ptr<DataSource> openDataSource(const DataSpec &spec,
                                           const DataTarget &target,
                                           uint64_t seed, Split split) {
  bool fileKind = spec.kind == "lines" || spec.kind == "labelled" ||
                  spec.kind == "parallel" ||
                  (spec.kind == "text" && target.objective == "mlm");
  if (fileKind && !target.tokenizer)
    throw Error(fmt::format("data: kind '{}' needs the model's tokenizer",
                            spec.kind));
  if (target.objective == "mlm" &&
      (spec.kind == "lines" || spec.kind == "text"))
    return data::openMlmSource(spec, target, seed, split);
  if (target.objective == "classify" && spec.kind == "labelled")
    return data::openLabelledSource(spec, target, seed, split);
  if (target.objective == "translate") {
    if (spec.kind == "parallel")
      return data::openParallelSource(spec, target, seed, split);
    if (spec.kind == "synthetic" && spec.task == "translate")
      return data::openTranslateSource(spec, target, seed, split);
  }
  if (target.objective == "lm" &&
      (spec.kind == "text" ||
       (spec.kind == "synthetic" && spec.task != "translate")))
    return openDataSource(spec, target.vocab, seed, split);
  throw Error(fmt::format("data: a {} model with objective '{}' cannot read "
                          "{} data",
                          target.kind, target.objective,
                          spec.kind == "synthetic"
                              ? "synthetic '" + spec.task + "'"
                              : "'" + spec.kind + "'"));
}

} // namespace moec
