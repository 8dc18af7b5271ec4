//===- Tokenizer.h - text to token ids and back -----------------*- C++ -*-===//
//
// The byte tokenizer (every byte a token, special tokens after the bytes),
// SentencePiece models (BPE or unigram, trained by `moec tokenizer train`),
// and the word vocabularies of synthetic tasks. A model records which
// tokenizer it was compiled and trained with (its fingerprint), and bundles
// and checkpoints refuse a different one.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TOKENIZER_H
#define MOEC_TOKENIZER_H

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace moec {

class Bundle;

/// Ids of the special tokens; -1 where a tokenizer has none.
struct SpecialTokens {
  int32_t pad = -1, bos = -1, eos = -1, unk = -1, mask = -1, cls = -1,
          sep = -1;
  /// Whether `id` is one of them.
  bool contains(int32_t id) const;
};

class Tokenizer {
public:
  virtual ~Tokenizer();
  /// Ids range over [0, size()).
  virtual int64_t size() const = 0;
  /// Text to ids (no special tokens added).
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  /// Ids to text; special tokens are left out.
  virtual std::string decode(const std::vector<int32_t> &ids) const = 0;
  virtual const SpecialTokens &specials() const = 0;
  /// Whether `id` is an ordinary token (not special, not unknown): what
  /// masked language modelling draws random replacements from.
  virtual bool ordinary(int32_t id) const;
  /// One line for logs, e.g. "sentencepiece 'spm.model' (8000 pieces)".
  virtual std::string describe() const = 0;
  /// What identifies it in bundles and checkpoints: "bytes",
  /// "sentencepiece:<sha256 of the model file>", "synthetic:<task>:<seed>".
  virtual std::string fingerprint() const = 0;
};

/// Bytes are ids 0-255; with `vocab` >= 262 ids 256-261 are pad, bos, eos,
/// mask, cls and sep.
std::unique_ptr<Tokenizer> byteTokenizer(int64_t vocab);

/// Loads a SentencePiece model file. Its pad, bos, eos and unk pieces are
/// the specials of those names, and the pieces "[MASK]", "[CLS]" and "[SEP]"
/// (which `moec tokenizer train` adds) mask, cls and sep. Throws
/// moec::Error naming the file.
std::unique_ptr<Tokenizer> loadSentencePiece(const std::string &path);

/// A fixed word vocabulary: ids 0-3 are pad, bos, eos and unk, then the
/// words in order; text is words separated by spaces.
std::unique_ptr<Tokenizer> wordTokenizer(std::vector<std::string> words,
                                         std::string fingerprint);

/// The tokenizer a bundle's model was compiled with. A SentencePiece file
/// is looked for where the spec named it and, if it has moved, next to the
/// bundle file (`bundlePath`); its SHA-256 must match the one the bundle
/// recorded. Throws moec::Error when it cannot be found or has changed, or
/// when it has more ids than the model's vocabulary.
std::unique_ptr<Tokenizer> openTokenizer(const Bundle &bundle,
                                         const std::string &bundlePath = "");

struct TokenizerTrainOptions {
  /// Text files, one sentence per line.
  std::vector<std::string> inputs;
  /// The model file to write (atomically), e.g. "spm.model"; a
  /// "<name>.vocab" file with the pieces and scores is written next to it.
  std::string output;
  /// "bpe" or "unigram".
  std::string type = "bpe";
  int64_t vocabSize = 8000;
  /// Share of the characters the vocabulary must cover (1 for small
  /// alphabets, 0.9995 for large ones).
  double characterCoverage = 1.0;
  /// Sentences sampled for training (0: all).
  int64_t sentences = 0;
  uint64_t seed = 0;
};

/// Trains a SentencePiece model with pad (0), unk (1), bos (2), eos (3) and
/// the pieces [MASK], [CLS] and [SEP]. Throws moec::Error.
void trainSentencePiece(const TokenizerTrainOptions &options);

} // namespace moec

#endif // MOEC_TOKENIZER_H
