//===- CacheDirectory.h - where compiled kernels are kept -------*- C++ -*-===//

#ifndef MOEC_RUNTIME_CUDA_CACHEDIRECTORY_H
#define MOEC_RUNTIME_CUDA_CACHEDIRECTORY_H

#include <string>

namespace moec::detail::cuda {

/// The directory for compiled CUDA kernels: $MOEC_CACHE_DIR/cuda, else
/// $XDG_CACHE_HOME/moec/cuda, else $HOME/.cache/moec/cuda; empty when none
/// of these variables is set. Read from the environment on every call.
std::string defaultKernelCacheDirectory();

/// Creates `path` and its missing parents (mode 0755). Returns an empty
/// string on success, else what went wrong.
std::string makeDirectories(const std::string &path);

/// `name` (a kernel name) made safe as a file name: at most 100 characters
/// of [A-Za-z0-9_.-], anything else replaced by '_'.
std::string fileStem(const std::string &name);

} // namespace moec::detail::cuda

#endif // MOEC_RUNTIME_CUDA_CACHEDIRECTORY_H
