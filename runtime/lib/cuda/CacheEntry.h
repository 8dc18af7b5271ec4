//===- CacheEntry.h - the on-disk format of a cached kernel -----*- C++ -*-===//
//
// One file per compiled kernel: a fixed header (magic, format version, the
// section sizes and a SHA-256 of everything after the header), then the full
// key text, the CUBIN, the PTX, NVRTC's log and the module reference. A
// kernel compiled together with others keeps no CUBIN of its own: the
// reference names the shared module file by the SHA-256 of its bytes. A
// reader trusts an entry only if every check passes; anything else is
// recompiled.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CUDA_CACHEENTRY_H
#define MOEC_RUNTIME_CUDA_CACHEENTRY_H

#include <optional>
#include <string>

namespace moec::detail::cuda {

struct CacheEntry {
  /// The key text the entry was compiled for (see kernelKeyText).
  std::string key;
  std::string cubin;
  std::string ptx;
  std::string log;
  /// Empty, or the SHA-256 (hex) of the module file holding the CUBIN, when
  /// `cubin` is empty.
  std::string module;
};

/// Bumped whenever the layout changes; older entries are then recompiled.
constexpr unsigned kCacheEntryFormat = 2;

/// The file contents for `entry`.
std::string encodeCacheEntry(const CacheEntry &entry);

/// The entry in `bytes`, or nullopt with the reason in `why` (bad magic,
/// other format version, truncated, checksum mismatch).
std::optional<CacheEntry> decodeCacheEntry(const std::string &bytes,
                                           std::string &why);

} // namespace moec::detail::cuda

#endif // MOEC_RUNTIME_CUDA_CACHEENTRY_H
