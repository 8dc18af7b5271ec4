//===- Checkpoint.h - safetensors checkpoints ------------------*- C++ -*-===//
//
// Model parameters are saved in the safetensors format
// (https://github.com/huggingface/safetensors), so checkpoints move freely
// between moec and PyTorch: an 8-byte little-endian header length N, N bytes
// of JSON describing each tensor (dtype, shape, byte range), then the data.
// Loading validates everything before it allocates, so a damaged or hostile
// file yields a moec::Error naming the file and the field at fault.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_CHECKPOINT_H
#define MOEC_CHECKPOINT_H

#include "moec/Tensor.h"

#include <map>
#include <string>
#include <vector>

namespace moec {

/// Everything a checkpoint file holds.
struct CheckpointContents {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

/// Writes `tensors` (in name order) and `metadata` to `path` atomically: the
/// file is written to a temporary in the same directory, flushed to disk and
/// renamed over `path`, and the directory is flushed. On any failure the
/// temporary is removed, whatever was at `path` is untouched, and a
/// moec::Error is thrown.
void saveCheckpoint(const std::string &path,
                    const std::map<std::string, Tensor> &tensors,
                    const std::map<std::string, std::string> &metadata = {});

/// Reads and validates the whole checkpoint at `path`.
CheckpointContents loadCheckpoint(const std::string &path);

/// What a model expects of one tensor.
struct TensorSpec {
  std::string name;
  DType dtype;
  Shape shape;
};

/// Checks `contents` (read from `path`, which only names it in messages)
/// against the tensors a model expects: each must be present with the right
/// dtype and shape, and no other tensor may be present unless
/// `allowUnexpected`. Throws one moec::Error listing every problem, one per
/// line; a missing tensor suggests the nearest present name when one is close.
void checkCheckpoint(const std::string &path,
                     const CheckpointContents &contents,
                     const std::vector<TensorSpec> &expected,
                     bool allowUnexpected = false);

/// The safetensors name of a dtype: "F32", "F64", "BF16", "F16", "I32",
/// "I64".
const char *safetensorsDTypeName(DType dtype);

} // namespace moec

#endif // MOEC_CHECKPOINT_H
