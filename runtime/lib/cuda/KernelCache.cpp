//===- KernelCache.cpp - compiled kernels, in memory and on disk ----------===//

#include "KernelCache.h"
#include "KernelCacheFiles.h"
#include "CacheEntry.h"
#include "Sha256.h"
#include "moec/Error.h"
#include "moec/Files.h"
#include "moec/Version.h"

#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <unistd.h>

namespace moec::detail::cuda {

namespace {

/// No real kernel comes near this; anything larger is not ours.
constexpr size_t kMaxEntryBytes = size_t(1) << 30;

} // namespace

std::string kernelKeyText(const std::string &source, const std::string &name,
                          const std::string &arch,
                          const std::vector<std::string> &options,
                          const std::string &nvrtcIdentity) {
  std::string text =
      fmt::format("moec kernel cache key, format {}\n"
                  "moec {}\nnvrtc {}\narch {}\nname {}\n",
                  kCacheEntryFormat, kVersion, nvrtcIdentity, arch, name);
  for (const std::string &option : options)
    text += "option " + option + "\n";
  text +=
      fmt::format("source {} ({} bytes)\n", sha256Hex(source), source.size());
  return text;
}

KernelCache::KernelCache(std::string directory)
    : dir(std::move(directory)), diskUsable(!dir.empty()) {}

KernelCache &KernelCache::global() {
  static KernelCache cache(kernelCacheDirectory("cuda"));
  return cache;
}

bool KernelCache::onDisk() const {
  std::lock_guard<std::mutex> lock(mutex);
  return diskUsable;
}

KernelCache::Stats KernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex);
  return counters;
}

std::string KernelCache::pathFor(const std::string &name,
                                 const std::string &keyHash) const {
  if (dir.empty())
    return "";
  return fmt::format("{}/{}-{}.kernel", dir, fileStem(name),
                     keyHash.substr(0, 32));
}

std::string KernelCache::entryPath(const std::string &source,
                                   const std::string &name,
                                   const std::string &arch) const {
  const Nvrtc &nvrtc = Nvrtc::get();
  return pathFor(
      name, sha256Hex(kernelKeyText(source, name, arch, nvrtc.options(arch),
                                    nvrtc.identity())));
}

CompiledKernel KernelCache::compile(const std::string &source,
                                    const std::string &name,
                                    const std::string &arch, bool wantPtx) {
  auto start = std::chrono::steady_clock::now();
  archNumber(arch);
  const Nvrtc &nvrtc = Nvrtc::get();
  std::string keyText =
      kernelKeyText(source, name, arch, nvrtc.options(arch), nvrtc.identity());
  std::string keyHash = sha256Hex(keyText);
  std::string memoryKey = keyHash + (wantPtx ? "+ptx" : "");

  std::promise<Entry> promise;
  std::shared_future<Entry> future;
  bool owner = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = memory.find(memoryKey);
    if (it == memory.end()) {
      future = promise.get_future().share();
      memory.emplace(memoryKey, future);
      owner = true;
    } else {
      future = it->second;
      ++counters.memoryHits;
    }
  }

  Entry entry;
  bool compiled = false;
  if (owner) {
    try {
      std::string path = pathFor(name, keyHash);
      entry = path.empty() ? nullptr
                           : readEntry(path, keyText, name, arch, wantPtx);
      if (!entry) {
        CompiledKernel kernel = nvrtc.compile(
            source, name, arch, wantPtx, dir.empty() ? "" : dir + "/failed");
        {
          std::lock_guard<std::mutex> lock(mutex);
          ++counters.compiles;
        }
        if (!path.empty())
          writeEntry(path, keyText, kernel);
        entry = std::make_shared<const CompiledKernel>(std::move(kernel));
        compiled = true;
      }
      promise.set_value(entry);
    } catch (...) {
      // Forget the failure so that a later call tries again.
      {
        std::lock_guard<std::mutex> lock(mutex);
        memory.erase(memoryKey);
      }
      promise.set_exception(std::current_exception());
      throw;
    }
  } else {
    entry = future.get();
  }

  CompiledKernel result = *entry;
  result.cacheHit = !compiled;
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return result;
}

KernelCache::Entry KernelCache::readEntry(const std::string &path,
                                          const std::string &keyText,
                                          const std::string &name,
                                          const std::string &arch,
                                          bool wantPtx) {
  if (::access(path.c_str(), F_OK) != 0)
    return nullptr;
  std::string why;
  std::optional<CacheEntry> entry;
  try {
    entry = decodeCacheEntry(readRegularFile(path, kMaxEntryBytes), why);
  } catch (const Error &e) {
    why = e.what();
  }
  if (entry && entry->key != keyText) {
    why = "its key differs from the kernel's";
    entry.reset();
  }
  if (entry && entry->cubin.empty()) {
    why = "it holds no CUBIN";
    entry.reset();
  }
  if (!entry) {
    fmt::print(stderr,
               "moec: warning: ignoring the kernel cache entry '{}' ({}); "
               "recompiling\n",
               path, why);
    std::lock_guard<std::mutex> lock(mutex);
    ++counters.rejectedEntries;
    return nullptr;
  }
  // A sound entry without PTX cannot serve a request for PTX; the compile
  // that follows rewrites it with both.
  if (wantPtx && entry->ptx.empty())
    return nullptr;
  auto kernel = std::make_shared<CompiledKernel>();
  kernel->name = name;
  kernel->arch = arch;
  kernel->cubin = std::move(entry->cubin);
  kernel->ptx = std::move(entry->ptx);
  kernel->log = std::move(entry->log);
  kernel->usage = parsePtxasLog(kernel->log, name);
  std::lock_guard<std::mutex> lock(mutex);
  ++counters.diskHits;
  return kernel;
}

void KernelCache::writeEntry(const std::string &path,
                             const std::string &keyText,
                             const CompiledKernel &kernel) {
  bool needDirectory;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!diskUsable)
      return;
    needDirectory = !directoryMade;
  }
  if (needDirectory) {
    std::string problem = makeDirectories(dir);
    if (!problem.empty())
      return disableDisk(problem);
    std::lock_guard<std::mutex> lock(mutex);
    directoryMade = true;
  }
  std::string bytes =
      encodeCacheEntry({keyText, kernel.cubin, kernel.ptx, kernel.log});
  try {
    writeFile(path, {{bytes.data(), bytes.size()}});
  } catch (const Error &e) {
    disableDisk(e.what());
  }
}

void KernelCache::disableDisk(const std::string &why) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!diskUsable)
    return;
  diskUsable = false;
  fmt::print(stderr,
             "moec: warning: the kernel cache directory '{}' is not usable "
             "({}); compiled kernels are kept in memory only until moec "
             "exits. Set $MOEC_CACHE_DIR to a writable directory.\n",
             dir, why);
}

CompiledKernel compileCached(const std::string &source, const std::string &name,
                             const std::string &arch, bool wantPtx) {
  return KernelCache::global().compile(source, name, arch, wantPtx);
}

} // namespace moec::detail::cuda
