//===- CheckpointFuzzer.cpp - the safetensors reader on any bytes ---------===//
//
// The input is a checkpoint file, handed to loadCheckpoint through a memfd
// (the reader takes only a path). A checkpoint that reads is then matched
// against a small model, which exercises the mismatch report. A moec::Error
// is the expected outcome; anything else is a finding.
//
//===----------------------------------------------------------------------===//

#include "MemoryFile.h"
#include "moec/Checkpoint.h"
#include "moec/Error.h"

#include <cstdio>
#include <cstdlib>

using namespace moec;

namespace {

/// A few tensors of a small decoder, as checkCheckpoint wants them.
const std::vector<TensorSpec> &expectedTensors() {
  static const std::vector<TensorSpec> specs = {
      {"embed.weight", DType::F32, {256, 16}},
      {"layers.0.attention.wq", DType::F32, {16, 16}},
      {"layers.1.moe.router", DType::F32, {16, 4}},
      {"norm.scale", DType::BF16, {16}},
      {"step", DType::I64, {}},
  };
  return specs;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static fuzz::MemoryFile file("checkpoint.safetensors");
  file.assign(data, size);
  CheckpointContents contents;
  try {
    contents = loadCheckpoint(file.path());
  } catch (const Error &) {
    return 0;
  }
  // The reader checked every byte range against the file.
  size_t bytes = 0;
  for (const auto &[name, tensor] : contents.tensors)
    bytes += tensor.nbytes();
  if (bytes > size) {
    std::fprintf(stderr, "%zu bytes of tensors from a %zu-byte file\n", bytes,
                 size);
    std::abort();
  }
  for (bool allowUnexpected : {false, true}) {
    try {
      checkCheckpoint(file.path(), contents, expectedTensors(),
                      allowUnexpected);
    } catch (const Error &) {
    }
  }
  return 0;
}
