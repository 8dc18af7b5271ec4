//===- SentencePiece.cpp - SentencePiece models: load and train -----------===//
//
// Models are read and written by moec itself (whole-file reads with clear
// errors, atomic writes); SentencePiece parses and trains them.
//
//===----------------------------------------------------------------------===//

#include "moec/Tokenizer.h"
#include "Sha256.h"
#include "moec/Error.h"
#include "moec/Files.h"

#include <fmt/format.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <sys/stat.h>
#include <unordered_map>

namespace moec {

namespace {

/// A model file is a few MB at most; refuse anything absurd.
constexpr size_t kMaxModelBytes = size_t(1) << 30;

class SentencePieceTokenizer : public Tokenizer {
public:
  SentencePieceTokenizer(std::string path, const std::string &bytes)
      : path_(std::move(path)), sha256_(detail::sha256Hex(bytes)) {
    sentencepiece::util::Status status;
    try {
      status = processor_.LoadFromSerializedProto(bytes);
    } catch (const std::exception &e) {
      // The library's trie builder throws on some damaged models (a piece
      // starting with a NUL byte) instead of returning a status.
      throw Error(fmt::format("{}: not a SentencePiece model: {}", path_,
                              e.what()));
    }
    if (!status.ok())
      throw Error(fmt::format("{}: not a SentencePiece model: {}", path_,
                              status.ToString()));
    specials_.pad = processor_.pad_id();
    specials_.bos = processor_.bos_id();
    specials_.eos = processor_.eos_id();
    specials_.unk = processor_.unk_id();
    specials_.mask = known("[MASK]");
    specials_.cls = known("[CLS]");
    specials_.sep = known("[SEP]");
  }

  int64_t size() const override { return processor_.GetPieceSize(); }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int> ids;
    auto status = processor_.Encode(text, &ids);
    if (!status.ok())
      throw Error(fmt::format("{}: cannot encode text: {}", path_,
                              status.ToString()));
    return std::vector<int32_t>(ids.begin(), ids.end());
  }
  std::string decode(const std::vector<int32_t> &ids) const override {
    std::vector<int> kept;
    for (int32_t id : ids)
      if (id >= 0 && id < size() && !specials_.contains(id))
        kept.push_back(id);
    std::string text;
    auto status = processor_.Decode(kept, &text);
    if (!status.ok())
      throw Error(fmt::format("{}: cannot decode ids: {}", path_,
                              status.ToString()));
    return text;
  }
  const SpecialTokens &specials() const override { return specials_; }
  bool ordinary(int32_t id) const override {
    return Tokenizer::ordinary(id) && !processor_.IsControl(id) &&
           !processor_.IsUnknown(id) && !processor_.IsUnused(id);
  }
  std::string describe() const override {
    return fmt::format("sentencepiece '{}' ({} pieces)", path_, size());
  }
  std::string fingerprint() const override {
    return "sentencepiece:" + sha256_;
  }

private:
  /// The id of `piece`, or -1 when the model lacks it.
  int32_t known(const char *piece) const {
    int id = processor_.PieceToId(piece);
    return id == processor_.unk_id() ? -1 : id;
  }

  std::string path_, sha256_;
  sentencepiece::SentencePieceProcessor processor_;
  SpecialTokens specials_;
};

} // namespace

std::unique_ptr<Tokenizer> loadSentencePiece(const std::string &path) {
  std::string bytes = readRegularFile(path, kMaxModelBytes);
  if (bytes.empty())
    throw Error(fmt::format("{}: the SentencePiece model file is empty", path));
  return std::make_unique<SentencePieceTokenizer>(path, bytes);
}

void trainSentencePiece(const TokenizerTrainOptions &o) {
  if (o.inputs.empty())
    throw Error("tokenizer training needs at least one input text file");
  for (const std::string &input : o.inputs) {
    struct stat st;
    if (::stat(input.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      throw Error(fmt::format("{}: not a readable text file", input));
  }
  std::string stem = o.output;
  if (stem.size() > 6 && stem.compare(stem.size() - 6, 6, ".model") == 0)
    stem.resize(stem.size() - 6);
  std::vector<NamedPath> texts;
  for (const std::string &input : o.inputs)
    texts.push_back({"the text", input});
  checkOutputsAreDistinct(texts, {{"the model", o.output},
                                  {"the vocabulary", stem + ".vocab"}});
  if (o.type != "bpe" && o.type != "unigram")
    throw Error(fmt::format("unknown tokenizer type '{}' (bpe or unigram)",
                            o.type));
  if (o.vocabSize < 8)
    throw Error(fmt::format("a vocabulary of {} pieces is too small (at "
                            "least 8: the special tokens and some text)",
                            o.vocabSize));
  std::string inputs;
  for (const std::string &input : o.inputs)
    inputs += (inputs.empty() ? "" : ",") + input;
  std::unordered_map<std::string, std::string> args = {
      {"input", inputs},
      {"model_type", o.type},
      {"vocab_size", std::to_string(o.vocabSize)},
      {"character_coverage", fmt::format("{}", o.characterCoverage)},
      {"pad_id", "0"},
      {"unk_id", "1"},
      {"bos_id", "2"},
      {"eos_id", "3"},
      {"user_defined_symbols", "[MASK],[CLS],[SEP]"},
      {"minloglevel", "2"},
  };
  if (o.sentences > 0) {
    args["input_sentence_size"] = std::to_string(o.sentences);
    args["shuffle_input_sentence"] = "true";
  }
  // The library's one generator drives sentence sampling; 0 is reserved
  // (it means "seed from the clock"), so seeds are shifted by one.
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned>(o.seed) + 1);
  std::string model;
  auto status =
      sentencepiece::SentencePieceTrainer::Train(args, nullptr, &model);
  if (!status.ok())
    throw Error(fmt::format("training the tokenizer failed: {}",
                            status.ToString()));
  // The vocabulary listing first, so a model file never exists without it.
  sentencepiece::SentencePieceProcessor processor;
  if (!processor.LoadFromSerializedProto(model).ok())
    throw Error("the trained tokenizer could not be read back");
  std::string vocab;
  for (int id = 0; id < processor.GetPieceSize(); ++id)
    vocab += fmt::format("{}\t{}\n", processor.IdToPiece(id),
                         processor.GetScore(id));
  writeFile(stem + ".vocab", {{vocab.data(), vocab.size()}});
  writeFile(o.output, {{model.data(), model.size()}});
}

} // namespace moec
