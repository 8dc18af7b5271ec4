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

} // namespace moec::detail::cuda

#endif // MOEC_RUNTIME_CUDA_CACHEDIRECTORY_H
