//===- ModelData.cpp - a bundle's data and tokenizer ----------------------===//

#include "moec/ModelData.h"
#include "data/Sources.h"
#include "moec/Error.h"

#include <fmt/format.h>
#include <sys/stat.h>

namespace moec {

namespace {

bool isFile(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// `recorded` if it is a file, else the file of its name beside the bundle
/// at `bundlePath` if there is one, else "".
std::string locate(const std::string &recorded, const std::string &bundlePath) {
  if (isFile(recorded))
    return recorded;
  if (bundlePath.empty())
    return "";
  size_t slash = bundlePath.rfind('/');
  std::string beside =
      (slash == std::string::npos ? "." : bundlePath.substr(0, slash)) + "/" +
      recorded.substr(recorded.rfind('/') + 1);
  return isFile(beside) ? beside : "";
}

} // namespace

std::string tokenizerFingerprint(const Bundle &bundle) {
  const DataSpec &data = bundle.data();
  if (data.kind == "synthetic" && data.task == "translate")
    return fmt::format("synthetic:translate:{}", data.taskSeed);
  if (bundle.model().tokenizer.kind == "sentencepiece")
    return "sentencepiece:" + bundle.model().tokenizer.sha256;
  return "bytes";
}

std::unique_ptr<Tokenizer> openTokenizer(const Bundle &bundle,
                                         const std::string &bundlePath) {
  const ModelInfo &model = bundle.model();
  const DataSpec &data = bundle.data();
  std::string origin = bundlePath.empty() ? "<bundle>" : bundlePath;
  std::unique_ptr<Tokenizer> tokenizer;
  if (data.kind == "synthetic" && data.task == "translate") {
    tokenizer = data::translateTokenizer(data);
  } else if (model.tokenizer.kind == "bytes") {
    tokenizer = byteTokenizer(model.vocab);
  } else {
    // Bundles travel with their tokenizer.
    std::string path = locate(model.tokenizer.path, bundlePath);
    if (path.empty())
      throw Error(fmt::format(
          "{}: model.tokenizer: cannot find the SentencePiece model '{}'{}",
          origin, model.tokenizer.path,
          bundlePath.empty() ? "" : " (nor a file of that name beside the "
                                    "bundle)"));
    tokenizer = loadSentencePiece(path);
    std::string expected = tokenizerFingerprint(bundle);
    if (tokenizer->fingerprint() != expected)
      throw Error(fmt::format(
          "{}: model.tokenizer: the SentencePiece model '{}' has changed "
          "since the model was compiled (SHA-256 {}, the bundle recorded {}); "
          "recompile the model",
          origin, path, tokenizer->fingerprint().substr(14),
          model.tokenizer.sha256));
  }
  if (tokenizer->size() > model.vocab)
    throw Error(fmt::format("model.tokenizer: {} has {} ids but the model's "
                            "vocabulary is {}; raise vocab to at least {}",
                            tokenizer->describe(), tokenizer->size(),
                            model.vocab, tokenizer->size()));
  return tokenizer;
}

ModelData openModelData(const Bundle &bundle, const std::string &bundlePath,
                        uint64_t seed, Split split) {
  const ModelInfo &model = bundle.model();
  ModelData data;
  DataTarget target;
  target.vocab = model.vocab;
  target.kind = model.kind;
  target.objective = model.objective;
  target.classes = model.classes;
  target.segments = model.segments;
  target.mlm = model.mlm;
  if (model.objective != "lm") {
    data.tokenizer = openTokenizer(bundle, bundlePath);
    target.tokenizer = data.tokenizer.get();
  }
  // Data files that moved with the bundle; a file found nowhere keeps its
  // recorded path, which the source then names in its error.
  DataSpec spec = bundle.data();
  for (std::string &file : spec.paths)
    if (std::string found = locate(file, bundlePath); !found.empty())
      file = found;
  data.source = openDataSource(spec, target, seed, split);
  return data;
}

} // namespace moec
