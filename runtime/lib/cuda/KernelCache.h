//===- KernelCache.h - compiled kernels, in memory and on disk --*- C++ -*-===//
//
// NVRTC takes a noticeable time per kernel and a model has dozens, so every
// compiled kernel is kept: in memory for the process, on disk across runs.
// The key covers everything that decides the CUBIN (source, options, arch,
// NVRTC build, moec version); an entry that fails any check is recompiled
// and rewritten, never trusted.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CUDA_KERNELCACHE_H
#define MOEC_RUNTIME_CUDA_KERNELCACHE_H

#include "Nvrtc.h"

#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace moec::detail::cuda {

/// Everything that decides a compiled kernel, as text: the moec version,
/// the NVRTC identity, arch, kernel name, options and the source's SHA-256.
std::string kernelKeyText(const std::string &source, const std::string &name,
                          const std::string &arch,
                          const std::vector<std::string> &options,
                          const std::string &nvrtcIdentity);

/// A cache of compiled kernels. Thread-safe; concurrent requests for the
/// same kernel compile it once.
class KernelCache {
public:
  /// Counters, for tests and reports.
  struct Stats {
    int64_t memoryHits = 0;
    int64_t diskHits = 0;
    int64_t compiles = 0;
    /// Disk entries that failed a check and were recompiled.
    int64_t rejectedEntries = 0;
  };

  /// A cache kept in `directory` (created when first written); an empty
  /// `directory` keeps kernels in memory only.
  explicit KernelCache(std::string directory);

  /// The process-wide cache, in kernelCacheDirectory("cuda") as it was at
  /// the first call.
  static KernelCache &global();

  /// The kernel compiled by NVRTC (see Nvrtc::compile) for these inputs:
  /// from memory, else from disk, else compiled now and stored in both.
  /// Sets cacheHit and seconds. Throws what Nvrtc::get and compile throw.
  CompiledKernel compile(const std::string &source, const std::string &name,
                         const std::string &arch, bool wantPtx);

  /// The file an entry for these inputs is kept in ("" when memory only).
  std::string entryPath(const std::string &source, const std::string &name,
                        const std::string &arch) const;

  const std::string &directory() const { return dir; }
  /// False when memory only: no directory, or it proved unwritable.
  bool onDisk() const;
  Stats stats() const;

private:
  using Entry = std::shared_ptr<const CompiledKernel>;

  Entry loadOrCompile(const std::string &source, const std::string &name,
                      const std::string &arch, bool wantPtx,
                      const std::string &keyText, const std::string &path);
  Entry readEntry(const std::string &path, const std::string &keyText,
                  const std::string &name, const std::string &arch,
                  bool wantPtx);
  void writeEntry(const std::string &path, const std::string &keyText,
                  const CompiledKernel &kernel);
  void disableDisk(const std::string &why);
  std::string pathFor(const std::string &name,
                      const std::string &keyHash) const;

  const std::string dir;
  mutable std::mutex mutex;
  bool diskUsable;
  bool directoryMade = false;
  Stats counters;
  /// By key hash (+ "+ptx" when PTX was asked for); shared futures let
  /// concurrent callers wait for a compile already under way.
  std::map<std::string, std::shared_future<Entry>> memory;
};

/// KernelCache::global().compile(source, name, arch, wantPtx).
CompiledKernel compileCached(const std::string &source, const std::string &name,
                             const std::string &arch, bool wantPtx);

} // namespace moec::detail::cuda

#endif // MOEC_RUNTIME_CUDA_KERNELCACHE_H
