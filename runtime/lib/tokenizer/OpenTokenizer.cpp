//===- OpenTokenizer.cpp - the tokenizer a bundle was compiled with -------===//

#include "moec/Bundle.h"
#include "moec/Error.h"
#include "moec/Tokenizer.h"
#include "data/Sources.h"

#include <fmt/format.h>
#include <sys/stat.h>

namespace moec {

namespace {

bool isFile(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string baseName(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

} // namespace

std::unique_ptr<Tokenizer> openTokenizer(const Bundle &bundle,
                                         const std::string &bundlePath) {
  const ModelInfo &model = bundle.model();
  const DataSpec &data = bundle.data();
  std::unique_ptr<Tokenizer> tokenizer;
  if (data.kind == "synthetic" && data.task == "translate") {
    tokenizer = data::translateTokenizer(data);
  } else if (model.tokenizer.kind == "bytes") {
    tokenizer = byteTokenizer(model.vocab);
  } else {
    // Where the spec named it, else beside the bundle (bundles travel with
    // their tokenizer).
    std::string path = model.tokenizer.path;
    if (!isFile(path) && !bundlePath.empty()) {
      std::string beside =
          directoryOf(bundlePath) + "/" + baseName(model.tokenizer.path);
      if (isFile(beside))
        path = beside;
    }
    if (!isFile(path))
      throw Error(fmt::format(
          "{}: model.tokenizer: cannot find the SentencePiece model '{}'{}",
          bundlePath.empty() ? "<bundle>" : bundlePath, model.tokenizer.path,
          bundlePath.empty() ? "" : " (nor a file of that name beside the "
                                    "bundle)"));
    tokenizer = loadSentencePiece(path);
    std::string expected = "sentencepiece:" + model.tokenizer.sha256;
    if (tokenizer->fingerprint() != expected)
      throw Error(fmt::format(
          "{}: model.tokenizer: the SentencePiece model '{}' has changed "
          "since the model was compiled (SHA-256 {}, the bundle recorded {}); "
          "recompile the model",
          bundlePath.empty() ? "<bundle>" : bundlePath, path,
          tokenizer->fingerprint().substr(14), model.tokenizer.sha256));
  }
  if (tokenizer->size() > model.vocab)
    throw Error(fmt::format("model.tokenizer: {} has {} ids but the model's "
                            "vocabulary is {}; raise vocab to at least {}",
                            tokenizer->describe(), tokenizer->size(),
                            model.vocab, tokenizer->size()));
  return tokenizer;
}

} // namespace moec
