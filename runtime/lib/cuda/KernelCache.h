//===- KernelCache.h - compiled kernels, in memory and on disk --*- C++ -*-===//
//
// NVRTC takes a noticeable time per kernel and a model has dozens, so every
// compiled kernel is kept: in memory for the process, on disk across runs.
// The key covers everything that decides the CUBIN (source, options, arch,
// NVRTC build, moec version); an entry that fails any check is recompiled
// and rewritten, never trusted. Kernels compiled together in one NVRTC
// program share one CUBIN: on disk a module file named by its SHA-256,
// which each of their entries references and a reader verifies.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CUDA_KERNELCACHE_H
#define MOEC_RUNTIME_CUDA_KERNELCACHE_H

#include "Nvrtc.h"

#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace moec::detail::cuda {

/// Everything that decides a compiled kernel, as text: the moec version,
/// the NVRTC identity, arch, kernel name, options and the source's SHA-256.
std::string kernelKeyText(const std::string &source, const std::string &name,
                          const std::string &arch,
                          const std::vector<std::string> &options,
                          const std::string &nvrtcIdentity);

/// A kernel to fetch or compile: its name, the translation unit it compiles
/// from on its own, and the key that unit and name give (see
/// KernelCache::request).
struct KernelRequest {
  std::string name;
  /// The translation unit, or with `afterLibrary` what follows the device
  /// library in it (a warm start need not copy the library for each kernel).
  std::string unit;
  bool afterLibrary = false;
  std::string keyText;
  std::string keyHash;

  /// The whole translation unit.
  std::string translationUnit() const;
};

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

  /// The request for kernel `name` compiled from `unit` for `arch`; hashes
  /// the unit once, for find() and compileTogether() to share.
  static KernelRequest request(std::string unit, std::string name,
                               const std::string &arch);
  /// request() for the unit of the device library followed by `rest`
  /// (kernelTextAfterLibrary): the same key, without building the unit.
  static KernelRequest requestAfterLibrary(std::string rest, std::string name,
                                           const std::string &arch);

  /// The kernel from memory (waiting for a compile under way) or from
  /// disk; nullopt when it must be compiled.
  std::optional<CompiledKernel> find(const KernelRequest &request,
                                     const std::string &arch, bool wantPtx);

  /// compile() for several kernels: those neither in memory nor on disk
  /// are compiled as one NVRTC program whose translation unit
  /// `unitOf(indices)` builds for the requests at those indices (it must
  /// define each of their kernels, as each one's own unit would). Results
  /// in the order of `requests`.
  std::vector<CompiledKernel> compileTogether(
      const std::vector<const KernelRequest *> &requests,
      const std::string &arch, bool wantPtx,
      const std::function<std::string(const std::vector<size_t> &)> &unitOf);

  /// The file an entry for these inputs is kept in ("" when memory only).
  std::string entryPath(const std::string &source, const std::string &name,
                        const std::string &arch) const;

  const std::string &directory() const { return dir; }
  /// False when memory only: no directory, or it proved unwritable.
  bool onDisk() const;
  Stats stats() const;

private:
  using Entry = std::shared_ptr<const CompiledKernel>;

  Entry readEntry(const std::string &path, const std::string &keyText,
                  const std::string &name, const std::string &arch,
                  bool wantPtx);
  /// The shared CUBIN with this SHA-256, from memory or its verified file;
  /// null (with the reason in `why`) when missing or damaged.
  Cubin readModule(const std::string &hash, std::string &why);
  /// Writes the entry of `kernel`; `module` is the SHA-256 of its shared
  /// module file, or empty to keep the CUBIN in the entry.
  void writeEntry(const std::string &path, const std::string &keyText,
                  const CompiledKernel &kernel, const std::string &module);
  /// Writes a CUBIN shared by several kernels; returns its SHA-256, or ""
  /// when the disk is not usable.
  std::string writeModule(const Cubin &cubin);
  /// Creates the directory at the first write; false when unusable.
  bool prepareDirectory();
  void disableDisk(const std::string &why);
  std::string pathFor(const std::string &name,
                      const std::string &keyHash) const;
  std::string modulePath(const std::string &hash) const;

  const std::string dir;
  mutable std::mutex mutex;
  bool diskUsable;
  bool directoryMade = false;
  Stats counters;
  /// By key hash (+ "+ptx" when PTX was asked for); shared futures let
  /// concurrent callers wait for a compile already under way.
  std::map<std::string, std::shared_future<Entry>> memory;
  /// Shared CUBINs read or written, by SHA-256.
  std::map<std::string, Cubin> modules;
};

/// KernelCache::global().compile(source, name, arch, wantPtx).
CompiledKernel compileCached(const std::string &source, const std::string &name,
                             const std::string &arch, bool wantPtx);

} // namespace moec::detail::cuda

#endif // MOEC_RUNTIME_CUDA_KERNELCACHE_H
