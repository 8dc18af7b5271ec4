//===- KernelCacheTest.cpp - compiled kernels in memory and on disk -------===//

#include "cuda/KernelCache.h"
#include "CudaTestUtil.h"
#include "cuda/CacheEntry.h"
#include "Sha256.h"

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
  EXPECT_EQ(warm.cubin, cold.cubin);
  EXPECT_EQ(warm.usage.registers, cold.usage.registers);
  EXPECT_LT(warm.seconds, cold.seconds / 10)
      << "cold " << cold.seconds << " s, warm " << warm.seconds << " s";
  EXPECT_EQ(cache.stats().compiles, 1);
  EXPECT_EQ(cache.stats().memoryHits, 1);

  // A new process (here: a new cache) finds it on disk.
  KernelCache fresh(dir());
  CompiledKernel disk = fresh.compile(source, kName, "sm_90", false);
  EXPECT_TRUE(disk.cacheHit);
  EXPECT_EQ(disk.cubin, cold.cubin);
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
  EXPECT_EQ(again.cubin, original.cubin);
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
  EXPECT_FALSE(a.cubin.empty());
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
      cubins[t] = cache.compile(source, kName, "sm_80", false).cubin;
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(cache.stats().compiles, 1);
  for (const std::string &cubin : cubins)
    EXPECT_EQ(cubin, cubins[0]);
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
