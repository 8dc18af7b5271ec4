//===- AtomicFile.h - whole-file reads and atomic writes --------*- C++ -*-===//
//
// Nothing a user saved may be lost or half-written: every file the runtime
// writes (checkpoints, bundles, cached kernels) goes to a temporary sibling,
// is flushed, renamed over its target and the directory is flushed.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_ATOMICFILE_H
#define MOEC_RUNTIME_ATOMICFILE_H

#include <cstddef>
#include <string>
#include <vector>

namespace moec::detail {

struct ByteChunk {
  const void *data;
  size_t size;
};

/// Writes the concatenation of `chunks` to `path` atomically. On failure the
/// temporary is removed, `path` is untouched and a moec::Error naming `path`
/// is thrown.
void writeFileAtomically(const std::string &path,
                         const std::vector<ByteChunk> &chunks);

/// The whole file; throws moec::Error naming `path` when it cannot be read
/// or is larger than `maxBytes`.
std::string readWholeFile(const std::string &path, size_t maxBytes);

} // namespace moec::detail

#endif // MOEC_RUNTIME_ATOMICFILE_H
