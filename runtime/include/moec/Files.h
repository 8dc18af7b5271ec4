//===- Files.h - reading inputs and writing outputs safely ------*- C++ -*-===//
//
// Nothing a user saved may be lost or half-written. Every file moec writes
// (bundles, checkpoints, metrics, cached kernels, tokenizer models) goes
// through OutputFile:
//
//  - a regular file (or a path that does not exist yet) is written to a
//    temporary sibling whose every write, flush and close is checked, then
//    renamed over the target, and the directory is flushed; on any failure
//    the old file is untouched;
//  - a symbolic link is followed, and its target replaced the same way;
//  - a character device or a FIFO (/dev/null, `-o >(gzip)`) is written
//    through, with every write checked;
//  - anything else (a directory, a block device, a socket) is refused.
//
// Temporaries left behind by a killed writer of the same output are removed
// on the next write. Readers refuse anything but a regular file before
// reading, so a FIFO never blocks them.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_FILES_H
#define MOEC_FILES_H

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace moec {

/// One output being written. Nothing is visible at the target until
/// commit(); destroying an uncommitted OutputFile discards what was written.
/// Every method throws moec::Error naming the path on failure.
class OutputFile {
public:
  /// Opens `path` for writing. With `append`, an existing regular file's
  /// contents are copied first, so the result is the old file plus what is
  /// written (still replaced atomically).
  explicit OutputFile(const std::string &path, bool append = false);
  ~OutputFile();
  OutputFile(const OutputFile &) = delete;
  OutputFile &operator=(const OutputFile &) = delete;

  void write(const void *data, size_t size);
  void write(std::string_view text) { write(text.data(), text.size()); }
  /// Makes what was written visible at the target (for a device or FIFO:
  /// closes it, checking the close).
  void commit();

  /// The path as given.
  const std::string &path() const { return requested; }

private:
  std::string requested;
  /// The file renamed over: `requested` with symbolic links resolved.
  std::string target;
  /// The temporary written; empty when writing through to a device.
  std::string temporary;
  int fd = -1;
  bool committed = false;
};

/// Writes `text` to `path` as one OutputFile.
void writeFile(const std::string &path, std::string_view text);

/// A part of a file written from several buffers.
struct ByteChunk {
  const void *data;
  size_t size;
};
/// Writes the concatenation of `chunks` to `path` as one OutputFile.
void writeFile(const std::string &path, const std::vector<ByteChunk> &chunks);

/// The whole of a regular file; throws moec::Error naming `path` when it
/// cannot be read, is not a regular file (a FIFO or process substitution is
/// refused at once, never waited on) or is larger than `maxBytes`.
std::string readRegularFile(const std::string &path, size_t maxBytes);

/// A file named on a command line, and the flag that named it ("the spec",
/// "--save").
struct NamedPath {
  std::string role;
  std::string path;
};

/// Refuses, before any work is done, an output that is the same file as an
/// input or as another output (`compile a.moe -o a.moe`, `--metrics
/// bundle.json`). Empty paths and "-" (standard output) are ignored;
/// character devices may be named more than once.
void checkOutputsAreDistinct(const std::vector<NamedPath> &inputs,
                             const std::vector<NamedPath> &outputs);

} // namespace moec

#endif // MOEC_FILES_H
