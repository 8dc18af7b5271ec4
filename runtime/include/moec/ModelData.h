//===- ModelData.h - a bundle's data and tokenizer --------------*- C++ -*-===//
//
// What the tools and embedders open to feed a compiled model: its data
// section through its tokenizer. Files a bundle recorded are looked for
// where the spec named them and, when they have moved, beside the bundle.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_MODELDATA_H
#define MOEC_MODELDATA_H

#include "moec/Bundle.h"
#include "moec/Data.h"
#include "moec/Tokenizer.h"

#include <memory>
#include <string>

namespace moec {

/// A model's data for one split and the tokenizer it reads through (null
/// for language models, whose sources bring their own tokens).
struct ModelData {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<DataSource> source;
};

/// Opens the data section of `bundle`, loaded from `bundlePath` (empty for
/// a bundle compiled in-process). Throws moec::Error naming the file at
/// fault.
ModelData openModelData(const Bundle &bundle, const std::string &bundlePath,
                        uint64_t seed, Split split = Split::Train);

/// The fingerprint (Tokenizer::fingerprint()) of the tokenizer `bundle`
/// reads through: checkpoints record it and openTokenizer checks it.
std::string tokenizerFingerprint(const Bundle &bundle);

} // namespace moec

#endif // MOEC_MODELDATA_H
