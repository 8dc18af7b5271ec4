//===- KernelCacheFiles.h - where compiled kernels are kept -----*- C++ -*-===//
//
// One place for what the cuda device (CUBINs) and the emu device (host
// libraries) share about their disk caches: the directory, its one
// fallback rule, and safe file names.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_KERNELCACHEFILES_H
#define MOEC_RUNTIME_KERNELCACHEFILES_H

#include <string>
#include <string_view>

namespace moec::detail {

/// The directory of `device`'s compiled kernels ("cuda", "emu"), read from
/// the environment on every call: $MOEC_CACHE_DIR/<device>, else
/// $XDG_CACHE_HOME/moec/<device>, else $HOME/.cache/moec/<device>, else
/// /tmp/moec-cache-<uid>/<device>.
std::string kernelCacheDirectory(std::string_view device);

/// Creates `path` and its missing parents (mode 0755). Returns an empty
/// string on success, else what went wrong.
std::string makeDirectories(const std::string &path);

/// `name` (a kernel name) made safe as a file name: at most 100 characters
/// of [A-Za-z0-9_.-], anything else replaced by '_'.
std::string fileStem(const std::string &name);

} // namespace moec::detail

#endif // MOEC_RUNTIME_KERNELCACHEFILES_H
