//===- KernelCache.cpp - compiled kernels, in memory and on disk ----------===//

#include "KernelCache.h"
#include "CacheEntry.h"
#include "KernelCacheFiles.h"
#include "Sha256.h"
#include "moec/Error.h"
#include "moec/Files.h"
#include "moec/Version.h"
#include "moec/support/DeviceLibrary.h"
#include "moec/support/Stopwatch.h"

#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <unistd.h>

namespace moec::detail::cuda {

namespace {

/// No real kernel comes near this; anything larger is not ours.
constexpr size_t kMaxEntryBytes = size_t(1) << 30;

/// The SHA-256 state after the device library, which generated units begin
/// with (most of their bytes): computed once per process, so that a warm
/// start hashes only each kernel's own source.
const Sha256 &libraryHash() {
  static const Sha256 hash = [] {
    Sha256 h;
    h.update(deviceLibrarySource());
    return h;
  }();
  return hash;
}

/// SHA-256 of the unit the device library followed by `rest` forms, in hex.
std::string digestAfterLibrary(std::string_view rest) {
  Sha256 hash = libraryHash();
  hash.update(rest);
  return hexDigest(hash.digest());
}

/// SHA-256 of a translation unit, in hex.
std::string unitDigest(const std::string &unit) {
  std::string_view library = deviceLibrarySource();
  if (unit.compare(0, library.size(), library) != 0)
    return sha256Hex(unit);
  return digestAfterLibrary(std::string_view(unit).substr(library.size()));
}

std::string keyText(const std::string &digest, size_t unitBytes,
                    const std::string &name, const std::string &arch,
                    const std::vector<std::string> &options,
                    const std::string &nvrtcIdentity) {
  std::string text =
      fmt::format("moec kernel cache key, format {}\n"
                  "moec {}\nnvrtc {}\narch {}\nname {}\n",
                  kCacheEntryFormat, kVersion, nvrtcIdentity, arch, name);
  for (const std::string &option : options)
    text += "option " + option + "\n";
  text += fmt::format("source {} ({} bytes)\n", digest, unitBytes);
  return text;
}

} // namespace

std::string kernelKeyText(const std::string &source, const std::string &name,
                          const std::string &arch,
                          const std::vector<std::string> &options,
                          const std::string &nvrtcIdentity) {
  return keyText(unitDigest(source), source.size(), name, arch, options,
                 nvrtcIdentity);
}

std::string KernelRequest::translationUnit() const {
  if (!afterLibrary)
    return unit;
  std::string_view library = deviceLibrarySource();
  std::string text;
  text.reserve(library.size() + unit.size());
  text.append(library);
  text += unit;
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

std::string KernelCache::modulePath(const std::string &hash) const {
  return fmt::format("{}/module-{}.cubin", dir, hash);
}

std::string KernelCache::entryPath(const std::string &source,
                                   const std::string &name,
                                   const std::string &arch) const {
  return pathFor(name, request(source, name, arch).keyHash);
}

namespace {

/// A request for `name` from `text`: the whole unit, or with `afterLibrary`
/// what follows the device library, keyed by its digest after the
/// library's hash state (the same key as the whole unit's).
KernelRequest makeRequest(std::string text, std::string name,
                          const std::string &arch, bool afterLibrary) {
  archNumber(arch);
  const Nvrtc &nvrtc = Nvrtc::get();
  KernelRequest r;
  r.keyText = afterLibrary
                  ? keyText(digestAfterLibrary(text),
                            deviceLibrarySource().size() + text.size(), name,
                            arch, nvrtc.options(arch), nvrtc.identity())
                  : kernelKeyText(text, name, arch, nvrtc.options(arch),
                                  nvrtc.identity());
  r.keyHash = sha256Hex(r.keyText);
  r.name = std::move(name);
  r.unit = std::move(text);
  r.afterLibrary = afterLibrary;
  return r;
}

} // namespace

KernelRequest KernelCache::request(std::string unit, std::string name,
                                   const std::string &arch) {
  return makeRequest(std::move(unit), std::move(name), arch, false);
}

KernelRequest KernelCache::requestAfterLibrary(std::string rest,
                                               std::string name,
                                               const std::string &arch) {
  return makeRequest(std::move(rest), std::move(name), arch, true);
}

CompiledKernel KernelCache::compile(const std::string &source,
                                    const std::string &name,
                                    const std::string &arch, bool wantPtx) {
  KernelRequest r = request(source, name, arch);
  return std::move(
      compileTogether({&r}, arch, wantPtx,
                      [&](const std::vector<size_t> &) { return r.unit; })[0]);
}

namespace {

std::string memoryKeyOf(const KernelRequest &r, bool wantPtx) {
  return r.keyHash + (wantPtx ? "+ptx" : "");
}

} // namespace

std::optional<CompiledKernel> KernelCache::find(const KernelRequest &r,
                                                const std::string &arch,
                                                bool wantPtx) {
  auto start = std::chrono::steady_clock::now();
  std::string memoryKey = memoryKeyOf(r, wantPtx);
  std::shared_future<Entry> future;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = memory.find(memoryKey); it != memory.end()) {
      future = it->second;
      ++counters.memoryHits;
    }
  }
  Entry entry;
  if (future.valid()) {
    entry = future.get();
  } else {
    std::string path = pathFor(r.name, r.keyHash);
    entry = path.empty() ? nullptr
                         : readEntry(path, r.keyText, r.name, arch, wantPtx);
    if (!entry)
      return std::nullopt;
    std::promise<Entry> ready;
    ready.set_value(entry);
    std::lock_guard<std::mutex> lock(mutex);
    memory.emplace(memoryKey, ready.get_future().share());
  }
  CompiledKernel result = *entry;
  result.cacheHit = true;
  result.seconds = support::secondsSince(start);
  return result;
}

std::vector<CompiledKernel> KernelCache::compileTogether(
    const std::vector<const KernelRequest *> &requests, const std::string &arch,
    bool wantPtx,
    const std::function<std::string(const std::vector<size_t> &)> &unitOf) {
  auto start = std::chrono::steady_clock::now();
  const size_t n = requests.size();
  std::vector<std::shared_future<Entry>> futures(n);
  std::vector<std::promise<Entry>> promises(n);
  std::vector<size_t> owned;
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (size_t i = 0; i < n; ++i) {
      std::string memoryKey = memoryKeyOf(*requests[i], wantPtx);
      if (auto it = memory.find(memoryKey); it != memory.end()) {
        futures[i] = it->second;
        ++counters.memoryHits;
        continue;
      }
      futures[i] = promises[i].get_future().share();
      memory.emplace(memoryKey, futures[i]);
      owned.push_back(i);
    }
  }

  // What this call owns comes from disk where it can, else from NVRTC.
  std::vector<size_t> missing;
  std::vector<bool> compiledHere(n, false);
  for (size_t i : owned) {
    const KernelRequest &r = *requests[i];
    std::string path = pathFor(r.name, r.keyHash);
    Entry entry = path.empty()
                      ? nullptr
                      : readEntry(path, r.keyText, r.name, arch, wantPtx);
    if (entry)
      promises[i].set_value(entry);
    else
      missing.push_back(i);
  }
  if (!missing.empty()) {
    try {
      std::vector<std::string> names;
      for (size_t i : missing)
        names.push_back(requests[i]->name);
      const Nvrtc &nvrtc = Nvrtc::get();
      std::vector<CompiledKernel> kernels = nvrtc.compileTogether(
          missing.size() == 1 ? requests[missing[0]]->translationUnit()
                              : unitOf(missing),
          names, arch, wantPtx, dir.empty() ? "" : dir + "/failed");
      {
        std::lock_guard<std::mutex> lock(mutex);
        counters.compiles += static_cast<int64_t>(missing.size());
      }
      std::string module =
          missing.size() > 1 ? writeModule(kernels[0].cubin) : "";
      bool shared = missing.size() == 1 || !module.empty();
      for (size_t m = 0; m < missing.size(); ++m) {
        const KernelRequest &r = *requests[missing[m]];
        std::string path = pathFor(r.name, r.keyHash);
        if (!path.empty() && shared)
          writeEntry(path, r.keyText, kernels[m], module);
        compiledHere[missing[m]] = true;
        promises[missing[m]].set_value(
            std::make_shared<const CompiledKernel>(std::move(kernels[m])));
      }
    } catch (...) {
      // Forget the failure so that a later call tries again.
      {
        std::lock_guard<std::mutex> lock(mutex);
        for (size_t i : missing)
          memory.erase(memoryKeyOf(*requests[i], wantPtx));
      }
      for (size_t i : missing)
        promises[i].set_exception(std::current_exception());
      throw;
    }
  }

  std::vector<CompiledKernel> results;
  results.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    CompiledKernel result = *futures[i].get();
    result.cacheHit = !compiledHere[i];
    if (result.cacheHit)
      result.seconds = support::secondsSince(start);
    results.push_back(std::move(result));
  }
  return results;
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
  Cubin cubin;
  if (entry && !entry->module.empty()) {
    if (!entry->cubin.empty()) {
      why = "it holds a CUBIN and a module reference";
      entry.reset();
    } else if (!(cubin = readModule(entry->module, why))) {
      entry.reset();
    }
  } else if (entry && entry->cubin.empty()) {
    why = "it holds no CUBIN";
    entry.reset();
  } else if (entry) {
    cubin = std::make_shared<const std::string>(std::move(entry->cubin));
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
  kernel->cubin = std::move(cubin);
  kernel->ptx = std::move(entry->ptx);
  kernel->log = std::move(entry->log);
  kernel->usage = parsePtxasLog(kernel->log, name);
  std::lock_guard<std::mutex> lock(mutex);
  ++counters.diskHits;
  return kernel;
}

Cubin KernelCache::readModule(const std::string &hash, std::string &why) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = modules.find(hash); it != modules.end())
      return it->second;
  }
  bool named = hash.size() == 64 &&
               hash.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!named) {
    why = "its module reference is not a SHA-256";
    return nullptr;
  }
  std::string path = modulePath(hash);
  std::string bytes;
  try {
    bytes = readRegularFile(path, kMaxEntryBytes);
  } catch (const Error &e) {
    why = fmt::format("its module: {}", e.what());
    return nullptr;
  }
  if (sha256Hex(bytes) != hash) {
    why = fmt::format("its module '{}' does not match its SHA-256", path);
    return nullptr;
  }
  auto cubin = std::make_shared<const std::string>(std::move(bytes));
  std::lock_guard<std::mutex> lock(mutex);
  return modules.emplace(hash, cubin).first->second;
}

bool KernelCache::prepareDirectory() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!diskUsable)
      return false;
    if (directoryMade)
      return true;
  }
  std::string problem = makeDirectories(dir);
  if (!problem.empty()) {
    disableDisk(problem);
    return false;
  }
  std::lock_guard<std::mutex> lock(mutex);
  directoryMade = true;
  return diskUsable;
}

std::string KernelCache::writeModule(const Cubin &cubin) {
  if (dir.empty() || !prepareDirectory())
    return "";
  std::string hash = sha256Hex(*cubin);
  try {
    writeFile(modulePath(hash), {{cubin->data(), cubin->size()}});
  } catch (const Error &e) {
    disableDisk(e.what());
    return "";
  }
  std::lock_guard<std::mutex> lock(mutex);
  modules.emplace(hash, cubin);
  return hash;
}

void KernelCache::writeEntry(const std::string &path,
                             const std::string &keyText,
                             const CompiledKernel &kernel,
                             const std::string &module) {
  if (!prepareDirectory())
    return;
  std::string bytes =
      encodeCacheEntry({keyText, module.empty() ? *kernel.cubin : "",
                        kernel.ptx, kernel.log, module});
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
