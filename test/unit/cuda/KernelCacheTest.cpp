//===- KernelCacheTest.cpp - compiled kernels in memory and on disk -------===//

#include "cuda/KernelCache.h"
#include "CudaTestUtil.h"
#include "Sha256.h"
#include "cuda/CacheEntry.h"
#include "moec/support/DeviceLibrary.h"

#include <algorithm>
#include <atomic>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <thread>

using namespace moec;
using namespace moec::detail::cuda;
using ::testing::HasSubstr;

namespace {

const char *const kName = "moek_test_mma";

/// A cache in a fresh directory, primed with one compiled kernel.
class KernelCacheTest : public ::testing::Test {
protected:
  std::string source = test::mmaKernelSource(kName);
  test::TempDir root;
  std::string dir() const { return root.path() + "/cuda"; }
};

TEST_F(KernelCacheTest, ASecondCompileIsAHitAndMuchFaster) {
  MOEC_REQUIRE_NVRTC();
  KernelCache cache(dir());
  CompiledKernel cold = cache.compile(source, kName, "sm_90", false);
  CompiledKernel warm = cache.compile(source, kName, "sm_90", false);
  EXPECT_FALSE(cold.cacheHit);
  EXPECT_TRUE(warm.cacheHit);
  EXPECT_EQ(*warm.cubin, *cold.cubin);
  EXPECT_EQ(warm.usage.registers, cold.usage.registers);
  EXPECT_LT(warm.seconds, cold.seconds / 10)
      << "cold " << cold.seconds << " s, warm " << warm.seconds << " s";
  EXPECT_EQ(cache.stats().compiles, 1);
  EXPECT_EQ(cache.stats().memoryHits, 1);

  // A new process (here: a new cache) finds it on disk.
  KernelCache fresh(dir());
  CompiledKernel disk = fresh.compile(source, kName, "sm_90", false);
  EXPECT_TRUE(disk.cacheHit);
  EXPECT_EQ(*disk.cubin, *cold.cubin);
  EXPECT_EQ(disk.log, cold.log);
  EXPECT_EQ(disk.usage.registers, cold.usage.registers);
  EXPECT_EQ(disk.usage.spillStoreBytes, cold.usage.spillStoreBytes);
  EXPECT_LT(disk.seconds, cold.seconds / 10)
      << "cold " << cold.seconds << " s, from disk " << disk.seconds << " s";
  EXPECT_EQ(fresh.stats().diskHits, 1);
  EXPECT_EQ(fresh.stats().compiles, 0);
}

TEST_F(KernelCacheTest, ChangedSourceArchOrNameMisses) {
  MOEC_REQUIRE_NVRTC();
  KernelCache cache(dir());
  std::string scale = test::scaleKernelSource("moek_test_scale", "one");
  EXPECT_FALSE(
      cache.compile(scale, "moek_test_scale", "sm_80", false).cacheHit);
  EXPECT_TRUE(cache.compile(scale, "moek_test_scale", "sm_80", false).cacheHit);
  std::string changed = test::scaleKernelSource("moek_test_scale", "two");
  EXPECT_FALSE(
      cache.compile(changed, "moek_test_scale", "sm_80", false).cacheHit);
  EXPECT_FALSE(
      cache.compile(scale, "moek_test_scale", "sm_90", false).cacheHit);
  EXPECT_EQ(cache.stats().compiles, 3);
  EXPECT_NE(cache.entryPath(scale, "moek_test_scale", "sm_80"),
            cache.entryPath(changed, "moek_test_scale", "sm_80"));
  EXPECT_NE(cache.entryPath(scale, "moek_test_scale", "sm_80"),
            cache.entryPath(scale, "moek_test_scale", "sm_90"));
  EXPECT_EQ(test::filesIn(dir()).size(), 3u);
}

TEST(KernelKey, CoversEveryInput) {
  std::vector<std::string> options = {"--std=c++17",
                                      "--gpu-architecture=sm_90"};
  std::string base = kernelKeyText("src", "k", "sm_90", options, "13.0 (1)");
  EXPECT_THAT(base, HasSubstr("moec "));
  EXPECT_THAT(base, HasSubstr("nvrtc 13.0 (1)"));
  EXPECT_THAT(base, HasSubstr("option --gpu-architecture=sm_90"));
  EXPECT_THAT(base, HasSubstr(detail::sha256Hex("src")));
  std::vector<std::string> other = options;
  other.push_back("--maxrregcount=64");
  for (const std::string &changed :
       {kernelKeyText("src ", "k", "sm_90", options, "13.0 (1)"),
        kernelKeyText("src", "k2", "sm_90", options, "13.0 (1)"),
        kernelKeyText("src", "k", "sm_80", options, "13.0 (1)"),
        kernelKeyText("src", "k", "sm_90", other, "13.0 (1)"),
        kernelKeyText("src", "k", "sm_90", options, "13.0 (2)")})
    EXPECT_NE(changed, base);
}

TEST(KernelKey, HashesAUnitAfterTheDeviceLibraryAsAWhole) {
  std::vector<std::string> options = {"--std=c++17"};
  std::string unit = std::string(deviceLibrarySource()) + "\nkernel text\n";
  EXPECT_THAT(kernelKeyText(unit, "k", "sm_90", options, "13.0 (1)"),
              HasSubstr(detail::sha256Hex(unit)));
  std::string other = unit;
  other[10] ^= 1; // not the library any more
  EXPECT_THAT(kernelKeyText(other, "k", "sm_90", options, "13.0 (1)"),
              HasSubstr(detail::sha256Hex(other)));
}

// The warm path's request (the kernel's own source only) keys and builds
// the same unit as a request for the whole unit.
TEST(KernelKey, ARequestAfterTheLibraryMatchesTheWholeUnit) {
  std::string source = "extern \"C\" __global__ void k() {}\n";
  std::string unit = std::string(deviceLibrarySource()) + "\n" + source;
  KernelRequest whole = KernelCache::request(unit, "k", "sm_90");
  KernelRequest after =
      KernelCache::requestAfterLibrary("\n" + source, "k", "sm_90");
  EXPECT_EQ(after.keyText, whole.keyText);
  EXPECT_EQ(after.keyHash, whole.keyHash);
  EXPECT_THAT(after.keyText, HasSubstr(detail::sha256Hex(unit)));
  EXPECT_THAT(after.keyText,
              HasSubstr("(" + std::to_string(unit.size()) + " bytes)"));
  EXPECT_EQ(after.translationUnit(), unit);
  EXPECT_EQ(whole.translationUnit(), unit);
  EXPECT_NE(KernelCache::requestAfterLibrary("\n" + source + " ", "k", "sm_90")
                .keyHash,
            whole.keyHash);
}

/// Damages the entry on disk with `damage`, then checks that a fresh cache
/// rejects it, recompiles, and rewrites a sound entry.
void expectDamageIsRepaired(const std::string &source, const std::string &dir,
                            void (*damage)(std::string &)) {
  KernelCache first(dir);
  CompiledKernel original = first.compile(source, kName, "sm_80", false);
  std::string path = first.entryPath(source, kName, "sm_80");
  const std::string sound = test::readFile(path);
  ASSERT_FALSE(sound.empty());
  std::string bytes = sound;
  damage(bytes);
  test::writeFile(path, bytes);

  KernelCache second(dir);
  ::testing::internal::CaptureStderr();
  CompiledKernel again = second.compile(source, kName, "sm_80", false);
  std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(again.cacheHit);
  EXPECT_EQ(*again.cubin, *original.cubin);
  EXPECT_EQ(second.stats().rejectedEntries, 1);
  EXPECT_EQ(second.stats().compiles, 1);
  EXPECT_THAT(warnings, HasSubstr("ignoring the kernel cache entry"));

  KernelCache third(dir);
  EXPECT_TRUE(third.compile(source, kName, "sm_80", false).cacheHit);
  EXPECT_EQ(third.stats().rejectedEntries, 0);
  // Rewritten: sound again, for the same key (the log's compile time
  // differs from run to run).
  std::string why;
  std::optional<CacheEntry> before = decodeCacheEntry(sound, why);
  std::optional<CacheEntry> after = decodeCacheEntry(test::readFile(path), why);
  ASSERT_TRUE(before && after) << why;
  EXPECT_EQ(after->key, before->key);
  EXPECT_TRUE(after->cubin == before->cubin);
}

TEST_F(KernelCacheTest, ATruncatedEntryIsRecompiledAndRewritten) {
  MOEC_REQUIRE_NVRTC();
  expectDamageIsRepaired(source, dir(),
                         [](std::string &b) { b.resize(b.size() / 2); });
}

TEST_F(KernelCacheTest, ABitFlipIsRecompiledAndRewritten) {
  MOEC_REQUIRE_NVRTC();
  expectDamageIsRepaired(source, dir(),
                         [](std::string &b) { b[b.size() - 200] ^= 0x10; });
}

TEST_F(KernelCacheTest, AnEntryForAnotherKeyIsRecompiledAndRewritten) {
  MOEC_REQUIRE_NVRTC();
  expectDamageIsRepaired(source, dir(), [](std::string &b) {
    std::string why;
    std::optional<CacheEntry> entry = decodeCacheEntry(b, why);
    ASSERT_TRUE(entry) << why;
    entry->key += "option --something-else\n";
    b = encodeCacheEntry(*entry);
  });
}

TEST_F(KernelCacheTest, AFileThatIsNoEntryIsRecompiledAndRewritten) {
  MOEC_REQUIRE_NVRTC();
  expectDamageIsRepaired(source, dir(),
                         [](std::string &b) { b.replace(0, 8, "NOTMOEC!"); });
}

TEST_F(KernelCacheTest, AnUnwritableDirectoryDegradesToMemoryWithOneWarning) {
  MOEC_REQUIRE_NVRTC();
  // A path below a regular file cannot be created, even by root.
  test::writeFile(root.path() + "/file", "x");
  KernelCache cache(root.path() + "/file/cuda");
  ::testing::internal::CaptureStderr();
  CompiledKernel a = cache.compile(source, kName, "sm_80", false);
  CompiledKernel b = cache.compile(test::scaleKernelSource("moek_test_scale"),
                                   "moek_test_scale", "sm_80", false);
  CompiledKernel again = cache.compile(source, kName, "sm_80", false);
  std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(a.cacheHit);
  EXPECT_FALSE(b.cacheHit);
  EXPECT_TRUE(again.cacheHit);
  EXPECT_FALSE(a.cubin->empty());
  EXPECT_FALSE(cache.onDisk());
  EXPECT_THAT(warnings, HasSubstr("kept in memory only"));
  EXPECT_EQ(warnings.find("kept in memory only"),
            warnings.rfind("kept in memory only"))
      << "more than one warning:\n"
      << warnings;
}

TEST_F(KernelCacheTest, WritesLeaveNoTemporaryFiles) {
  MOEC_REQUIRE_NVRTC();
  KernelCache cache(dir());
  cache.compile(source, kName, "sm_80", false);
  cache.compile(source, kName, "sm_90", true);
  std::vector<std::string> files = test::filesIn(dir());
  ASSERT_EQ(files.size(), 2u);
  for (const std::string &file : files) {
    EXPECT_THAT(file, ::testing::StartsWith(std::string(kName) + "-"));
    EXPECT_THAT(file, ::testing::EndsWith(".kernel"));
  }
}

TEST_F(KernelCacheTest, PtxIsAddedToAnEntryWithoutIt) {
  MOEC_REQUIRE_NVRTC();
  KernelCache cache(dir());
  EXPECT_TRUE(cache.compile(source, kName, "sm_90", false).ptx.empty());
  CompiledKernel withPtx = cache.compile(source, kName, "sm_90", true);
  EXPECT_FALSE(withPtx.cacheHit);
  EXPECT_THAT(withPtx.ptx, HasSubstr(".target sm_90"));
  KernelCache fresh(dir());
  CompiledKernel fromDisk = fresh.compile(source, kName, "sm_90", true);
  EXPECT_TRUE(fromDisk.cacheHit);
  EXPECT_EQ(fromDisk.ptx, withPtx.ptx);
  EXPECT_TRUE(fresh.compile(source, kName, "sm_90", false).cacheHit);
}

TEST_F(KernelCacheTest, ConcurrentRequestsCompileOnce) {
  MOEC_REQUIRE_NVRTC();
  KernelCache cache(dir());
  std::vector<std::thread> threads;
  std::vector<std::string> cubins(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      cubins[t] = *cache.compile(source, kName, "sm_80", false).cubin;
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(cache.stats().compiles, 1);
  for (const std::string &cubin : cubins)
    EXPECT_EQ(cubin, cubins[0]);
}

/// Two scale kernels, requested together; unitOf() builds their program.
struct TwoKernels {
  std::vector<KernelRequest> requests;
  std::vector<const KernelRequest *> pointers() const {
    std::vector<const KernelRequest *> p;
    for (const KernelRequest &r : requests)
      p.push_back(&r);
    return p;
  }
  std::string unitOf(const std::vector<size_t> &indices) const {
    std::string unit(deviceLibrarySource());
    for (size_t i : indices)
      unit += requests[i].unit.substr(deviceLibrarySource().size());
    return unit;
  }
};

TwoKernels twoKernels() {
  TwoKernels k;
  for (const char *name : {"moek_test_first", "moek_test_second"})
    k.requests.push_back(KernelCache::request(
        test::scaleKernelSource(name, "together"), name, "sm_80"));
  return k;
}

TEST_F(KernelCacheTest, KernelsCompiledTogetherShareOneModule) {
  MOEC_REQUIRE_NVRTC();
  TwoKernels k = twoKernels();
  auto unitOf = [&](const std::vector<size_t> &i) { return k.unitOf(i); };
  KernelCache cache(dir());
  EXPECT_FALSE(cache.find(k.requests[0], "sm_80", false));
  std::vector<CompiledKernel> cold =
      cache.compileTogether(k.pointers(), "sm_80", false, unitOf);
  ASSERT_EQ(cold.size(), 2u);
  EXPECT_EQ(cache.stats().compiles, 2);
  EXPECT_FALSE(cold[0].cacheHit);
  EXPECT_EQ(cold[0].cubin, cold[1].cubin) << "one CUBIN, shared";
  EXPECT_EQ(cold[1].name, "moek_test_second");
  EXPECT_GT(cold[1].usage.registers, 0);
  // Two small entries and the module they reference.
  std::vector<std::string> files = test::filesIn(dir());
  EXPECT_EQ(files.size(), 3u);
  EXPECT_EQ(std::count_if(files.begin(), files.end(),
                          [](const std::string &f) {
                            return f.find("module-") != std::string::npos;
                          }),
            1);

  // A new process reads the module once for both.
  KernelCache fresh(dir());
  std::optional<CompiledKernel> first =
      fresh.find(k.requests[0], "sm_80", false);
  std::optional<CompiledKernel> second =
      fresh.find(k.requests[1], "sm_80", false);
  ASSERT_TRUE(first && second);
  EXPECT_TRUE(first->cacheHit);
  EXPECT_EQ(first->cubin, second->cubin);
  EXPECT_EQ(*first->cubin, *cold[0].cubin);
  EXPECT_EQ(second->usage.registers, cold[1].usage.registers);
  EXPECT_EQ(fresh.stats().diskHits, 2);
  EXPECT_EQ(fresh.stats().compiles, 0);
}

TEST_F(KernelCacheTest, ADamagedModuleIsRecompiled) {
  MOEC_REQUIRE_NVRTC();
  TwoKernels k = twoKernels();
  auto unitOf = [&](const std::vector<size_t> &i) { return k.unitOf(i); };
  std::string sound;
  {
    KernelCache cache(dir());
    sound =
        *cache.compileTogether(k.pointers(), "sm_80", false, unitOf)[0].cubin;
  }
  for (const std::string &file : test::filesIn(dir()))
    if (file.find("module-") != std::string::npos) {
      std::string path = dir() + "/" + file;
      std::string bytes = test::readFile(path);
      bytes[bytes.size() / 2] ^= 1;
      test::writeFile(path, bytes);
    }
  KernelCache second(dir());
  ::testing::internal::CaptureStderr();
  std::vector<CompiledKernel> again =
      second.compileTogether(k.pointers(), "sm_80", false, unitOf);
  std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(again[0].cacheHit);
  EXPECT_EQ(*again[0].cubin, sound);
  EXPECT_EQ(second.stats().rejectedEntries, 2);
  EXPECT_THAT(warnings, HasSubstr("does not match its SHA-256"));
  // The rewritten module serves a third process.
  KernelCache third(dir());
  EXPECT_TRUE(third.find(k.requests[1], "sm_80", false));
}

TEST_F(KernelCacheTest, ACompileErrorIsNotCached) {
  MOEC_REQUIRE_NVRTC();
  KernelCache cache(dir());
  std::string bad = "extern \"C\" __global__ void moek_bad() { nope(); }\n";
  EXPECT_THROW(cache.compile(bad, "moek_bad", "sm_80", false), Error);
  EXPECT_THROW(cache.compile(bad, "moek_bad", "sm_80", false), Error);
  EXPECT_EQ(test::readFile(dir() + "/failed/moek_bad.cu"), bad);
}

TEST(CompileCached, UsesTheCacheDirectoryFromTheEnvironment) {
  MOEC_REQUIRE_NVRTC();
  // The test environment points $MOEC_CACHE_DIR at a fresh directory.
  const char *root = std::getenv("MOEC_CACHE_DIR");
  ASSERT_TRUE(root);
  std::string source = test::scaleKernelSource("moek_test_scale", "global");
  CompiledKernel first =
      compileCached(source, "moek_test_scale", "sm_80", false);
  CompiledKernel second =
      compileCached(source, "moek_test_scale", "sm_80", false);
  EXPECT_FALSE(first.cacheHit);
  EXPECT_TRUE(second.cacheHit);
  EXPECT_EQ(KernelCache::global().directory(), std::string(root) + "/cuda");
  EXPECT_EQ(test::readFile(KernelCache::global().entryPath(
                               source, "moek_test_scale", "sm_80"))
                .empty(),
            false);
}

} // namespace
