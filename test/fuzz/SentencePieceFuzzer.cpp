//===- SentencePieceFuzzer.cpp - load any bytes as a tokenizer model ------===//
//
// The input is a SentencePiece model file, handed to loadSentencePiece
// through a memfd. A model that loads then encodes and decodes a fixed
// text. A moec::Error is the expected outcome; anything else is a finding
// (in moec, or in the SentencePiece library it links).
//
//===----------------------------------------------------------------------===//

#include "MemoryFile.h"
#include "moec/Error.h"
#include "moec/Tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

using namespace moec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static fuzz::MemoryFile file("tokenizer.model");
  file.assign(data, size);
  std::unique_ptr<Tokenizer> tokenizer;
  try {
    tokenizer = loadSentencePiece(file.path());
  } catch (const Error &) {
    return 0;
  }
  try {
    std::vector<int32_t> ids = tokenizer->encode("The small cat sat. [MASK]");
    for (int32_t id : ids)
      if (id < 0 || id >= tokenizer->size()) {
        std::fprintf(stderr, "encode gave id %d of %lld\n", id,
                     static_cast<long long>(tokenizer->size()));
        std::abort();
      }
    ids.push_back(-1);
    ids.push_back(static_cast<int32_t>(tokenizer->size()));
    (void)tokenizer->decode(ids);
    (void)tokenizer->describe();
    (void)tokenizer->fingerprint();
    for (int32_t id = 0; id < std::min<int64_t>(tokenizer->size(), 64); ++id)
      (void)tokenizer->ordinary(id);
  } catch (const Error &) {
  }
  return 0;
}
