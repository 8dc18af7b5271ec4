//===- TokenizerFuzzer.cpp - encode and decode any text -------------------===//
//
// The input is text (and, read as 32-bit words, token ids) for the byte,
// word and SentencePiece tokenizers. The byte tokenizer must give the text
// back exactly; the others must give ids inside their vocabulary and
// decode any ids without failing. The SentencePiece model is the small one
// in the sentencepiece corpus (MOEC_FUZZ_SPM_MODEL).
//
//===----------------------------------------------------------------------===//

#include "moec/Error.h"
#include "moec/Tokenizer.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

using namespace moec;

namespace {

[[noreturn]] void fail(const Tokenizer &tokenizer, const char *what) {
  std::fprintf(stderr, "%s: %s\n", tokenizer.describe().c_str(), what);
  std::abort();
}

void checkIds(const Tokenizer &tokenizer, const std::vector<int32_t> &ids) {
  for (int32_t id : ids)
    if (id < 0 || id >= tokenizer.size())
      fail(tokenizer, "encode gave an id outside the vocabulary");
}

/// Encodes `text`, checks the ids, and decodes them and `ids`; decoding
/// ignores what it does not know, so neither may fail.
std::string encodeDecode(const Tokenizer &tokenizer, std::string_view text,
                         const std::vector<int32_t> &ids) {
  std::vector<int32_t> encoded = tokenizer.encode(text);
  checkIds(tokenizer, encoded);
  for (int32_t id : ids)
    (void)tokenizer.ordinary(id);
  (void)tokenizer.decode(ids);
  return tokenizer.decode(encoded);
}

const Tokenizer &sentencePiece() {
  static std::unique_ptr<Tokenizer> tokenizer =
      loadSentencePiece(MOEC_FUZZ_SPM_MODEL);
  return *tokenizer;
}

const Tokenizer &words() {
  static std::unique_ptr<Tokenizer> tokenizer =
      wordTokenizer({"the", "small", "cat", "sat", "a"}, "synthetic:fuzz:0");
  return *tokenizer;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  std::vector<int32_t> ids(size / sizeof(int32_t));
  if (!ids.empty())
    std::memcpy(ids.data(), data, ids.size() * sizeof(int32_t));

  for (int64_t vocab : {256, 262}) {
    std::unique_ptr<Tokenizer> bytes = byteTokenizer(vocab);
    if (encodeDecode(*bytes, text, ids) != text)
      fail(*bytes, "decode(encode(text)) is not the text");
  }
  (void)encodeDecode(words(), text, ids);
  try {
    (void)encodeDecode(sentencePiece(), text, ids);
  } catch (const Error &) {
    // SentencePiece refuses some text (e.g. invalid UTF-8) with a status.
  }
  return 0;
}
