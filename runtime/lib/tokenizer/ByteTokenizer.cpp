//===- ByteTokenizer.cpp - bytes, and word vocabularies -------------------===//

#include "moec/Tokenizer.h"
#include "moec/Error.h"

#include <fmt/format.h>
#include <map>

namespace moec {

Tokenizer::~Tokenizer() = default;

bool SpecialTokens::contains(int32_t id) const {
  for (int32_t s : {pad, bos, eos, unk, mask, cls, sep})
    if (s >= 0 && s == id)
      return true;
  return false;
}

bool Tokenizer::ordinary(int32_t id) const {
  return id >= 0 && id < size() && !specials().contains(id);
}

namespace {

class ByteTokenizer : public Tokenizer {
public:
  explicit ByteTokenizer(int64_t vocab) {
    if (vocab >= 262)
      specials_ = {256, 257, 258, -1, 259, 260, 261};
    size_ = vocab >= 262 ? 262 : 256;
  }
  int64_t size() const override { return size_; }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    ids.reserve(text.size());
    for (unsigned char c : text)
      ids.push_back(c);
    return ids;
  }
  std::string decode(const std::vector<int32_t> &ids) const override {
    std::string text;
    for (int32_t id : ids)
      if (id >= 0 && id < 256)
        text += static_cast<char>(id);
    return text;
  }
  const SpecialTokens &specials() const override { return specials_; }
  std::string describe() const override {
    return size_ == 262 ? "bytes (256 ids, then pad, bos, eos, mask, cls, sep)"
                        : "bytes (256 ids)";
  }
  std::string fingerprint() const override { return "bytes"; }

private:
  SpecialTokens specials_;
  int64_t size_;
};

class WordTokenizer : public Tokenizer {
public:
  WordTokenizer(std::vector<std::string> words, std::string fingerprint)
      : words_(std::move(words)), fingerprint_(std::move(fingerprint)) {
    specials_ = {0, 1, 2, 3, -1, -1, -1};
    for (size_t i = 0; i < words_.size(); ++i)
      index_.emplace(words_[i], static_cast<int32_t>(i + kFirstWord));
  }
  int64_t size() const override {
    return static_cast<int64_t>(words_.size()) + kFirstWord;
  }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    size_t i = 0;
    while (i < text.size()) {
      while (i < text.size() && text[i] == ' ')
        ++i;
      size_t start = i;
      while (i < text.size() && text[i] != ' ')
        ++i;
      if (i > start) {
        auto it = index_.find(std::string(text.substr(start, i - start)));
        ids.push_back(it == index_.end() ? specials_.unk : it->second);
      }
    }
    return ids;
  }
  std::string decode(const std::vector<int32_t> &ids) const override {
    std::string text;
    for (int32_t id : ids) {
      if (id < kFirstWord || id >= size())
        continue;
      if (!text.empty())
        text += ' ';
      text += words_[id - kFirstWord];
    }
    return text;
  }
  const SpecialTokens &specials() const override { return specials_; }
  std::string describe() const override {
    return fmt::format("words ({} words and pad, bos, eos, unk)",
                       words_.size());
  }
  std::string fingerprint() const override { return fingerprint_; }

private:
  static constexpr int32_t kFirstWord = 4;
  std::vector<std::string> words_;
  std::map<std::string, int32_t> index_;
  std::string fingerprint_;
  SpecialTokens specials_;
};

} // namespace

std::unique_ptr<Tokenizer> byteTokenizer(int64_t vocab) {
  if (vocab < 256)
    throw Error(fmt::format("the byte tokenizer needs a vocabulary of at least "
                            "256, the model's is {}",
                            vocab));
  return std::make_unique<ByteTokenizer>(vocab);
}

std::unique_ptr<Tokenizer> wordTokenizer(std::vector<std::string> words,
                                         std::string fingerprint) {
  return std::make_unique<WordTokenizer>(std::move(words),
                                         std::move(fingerprint));
}

} // namespace moec
