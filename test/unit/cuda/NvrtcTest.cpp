//===- NvrtcTest.cpp - NVRTC through dlopen, without a GPU ----------------===//

#include "cuda/Nvrtc.h"
#include "CudaTestUtil.h"
#include "cuda/KernelCache.h"
#include "moec/support/DeviceLibrary.h"

#include <fmt/format.h>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace moec;
using namespace moec::detail::cuda;
using ::testing::HasSubstr;

namespace {

bool isElf(const std::string &bytes) {
  return bytes.rfind("\x7f"
                     "ELF",
                     0) == 0;
}

TEST(Nvrtc, ReportsAVersionAndTheArchitecturesMoecNeeds) {
  MOEC_REQUIRE_NVRTC();
  EXPECT_GE(nvrtc.version().first, 12);
  EXPECT_THAT(nvrtc.identity(),
              HasSubstr(fmt::format("{}.{}", nvrtc.version().first,
                                    nvrtc.version().second)));
  EXPECT_THAT(nvrtc.supportedArchs(), ::testing::IsSupersetOf({80, 90}));
}

TEST(Nvrtc, OptionsFollowTheNvfuserSet) {
  MOEC_REQUIRE_NVRTC();
  std::vector<std::string> options = nvrtc.options("sm_90");
  for (const char *expected :
       {"--std=c++17", "--gpu-architecture=sm_90", "-default-device",
        "--fmad=true", "-lineinfo", "-DNDEBUG", "--ptxas-options=-v",
        "--diag-suppress=177"})
    EXPECT_THAT(options, ::testing::Contains(std::string(expected)));
}

TEST(Nvrtc, OptionsFromTheEnvironmentComeLastAndReachTheCompiler) {
  MOEC_REQUIRE_NVRTC();
  // Compiles only when the environment's -D option reaches NVRTC.
  std::string source = "#ifndef MOEC_TEST_FACTOR\n#error no factor\n#endif\n"
                       "extern \"C\" __global__ void moek_env(float *x) "
                       "{ x[threadIdx.x] *= MOEC_TEST_FACTOR; }\n";
  std::vector<std::string> plain = nvrtc.options("sm_90");
  test::TempDir failed; // where the failing compiles save their source
  EXPECT_THROW(nvrtc.compile(source, "moek_env", "sm_90", false, failed.path()),
               Error);
  {
    test::ScopedEnv env("MOEC_NVRTC_OPTIONS",
                        "  -DMOEC_TEST_FACTOR=3 \t --Ofast-compile=min ");
    std::vector<std::string> options = nvrtc.options("sm_90");
    ASSERT_EQ(options.size(), plain.size() + 2);
    EXPECT_EQ(options[plain.size()], "-DMOEC_TEST_FACTOR=3");
    EXPECT_EQ(options[plain.size() + 1], "--Ofast-compile=min");
    CompiledKernel k = nvrtc.compile(source, "moek_env", "sm_90", false);
    EXPECT_TRUE(isElf(*k.cubin));
    // The kernel cache keys on the options: these kernels are cached apart.
    std::string withOptions =
        KernelCache::request(source, "moek_env", "sm_90").keyHash;
    test::ScopedEnv none("MOEC_NVRTC_OPTIONS", std::nullopt);
    EXPECT_NE(KernelCache::request(source, "moek_env", "sm_90").keyHash,
              withOptions);
  }
  {
    test::ScopedEnv env("MOEC_NVRTC_OPTIONS", "--no-such-option");
    try {
      nvrtc.compile(source, "moek_env", "sm_90", false, failed.path());
      FAIL() << "an unknown option compiled";
    } catch (const Error &e) {
      EXPECT_THAT(e.what(),
                  HasSubstr("(with MOEC_NVRTC_OPTIONS: --no-such-option)"));
    }
  }
}

TEST(Nvrtc, CompilesADeviceLibraryKernelForSm80AndSm90) {
  MOEC_REQUIRE_NVRTC();
  std::string source = test::scaleKernelSource("moek_test_scale");
  for (const char *arch : {"sm_80", "sm_90"}) {
    CompiledKernel k = nvrtc.compile(source, "moek_test_scale", arch, false);
    EXPECT_EQ(k.name, "moek_test_scale");
    EXPECT_EQ(k.arch, arch);
    EXPECT_TRUE(isElf(*k.cubin)) << arch;
    EXPECT_TRUE(k.ptx.empty());
    EXPECT_FALSE(k.cacheHit);
    EXPECT_GT(k.seconds, 0);
    EXPECT_THAT(k.log, HasSubstr("Compiling entry function 'moek_test_scale'"));
    EXPECT_GT(k.usage.registers, 0) << k.log;
    EXPECT_EQ(k.usage.sharedBytes, 128 * 4) << k.log;
    EXPECT_EQ(k.usage.spillStoreBytes, 0) << k.log;
    EXPECT_EQ(k.usage.spillLoadBytes, 0) << k.log;
    EXPECT_EQ(k.usage.stackBytes, 0) << k.log;
  }
}

TEST(Nvrtc, CompilesTheTensorCoreTiles) {
  MOEC_REQUIRE_NVRTC();
  CompiledKernel k = nvrtc.compile(test::mmaKernelSource("moek_test_mma"),
                                   "moek_test_mma", "sm_80", false);
  EXPECT_TRUE(isElf(*k.cubin));
  EXPECT_GT(k.usage.registers, 0);
  EXPECT_EQ(k.usage.spillStoreBytes, 0) << k.log;
}

/// A GEMM kernel as the emitters write one, on gemmTileBf16Async with TM x
/// TN tiles over the given A and B loader expressions (x, w, order), and
/// their launch bounds: two resident blocks of 256 threads (with a block
/// size alone ptxas has spilled the 128 x 64 tile at 80 registers).
std::string asyncGemmSource(const std::string &name, int tm, int tn,
                            const std::string &loadA,
                            const std::string &loadB) {
  return std::string(deviceLibrarySource()) + fmt::format(R"(
extern "C" __global__ void __launch_bounds__(256, 2) {0}(const moec::KernelParams p) {{
  const int64_t M = moec::scalarArg(p, 0);
  const moec::gptr<const moec::bf16> x = moec::bufferArg<const moec::bf16>(p, 0);
  const moec::gptr<const moec::bf16> w = moec::bufferArg<const moec::bf16>(p, 1);
  const moec::gptr<const int32_t> order = moec::bufferArg<const int32_t>(p, 2);
  const moec::gptr<moec::bf16> y = moec::bufferArg<moec::bf16>(p, 3);
  const int64_t row0 = 0;
  const auto store = [=](int64_t m, int64_t col, float acc) {{ y[m * 512 + col] = acc; }};
  moec::gemmTileBf16Async<{1}, {2}, 16, 256>(static_cast<int64_t>(blockIdx.y) * {1}, static_cast<int64_t>(blockIdx.x) * {2}, M, 512, 256, {3}, {4}, store);
}}
)",
                                                          name, tm, tn, loadA,
                                                          loadB);
}

// The pipelined tile compiles for both architectures with cp.async,
// ldmatrix (plain and .trans) and mma in its PTX and no spills, for the
// largest tile over row-major operands and for gathered ones.
TEST(Nvrtc, CompilesThePipelinedGemmTileWithoutSpills) {
  MOEC_REQUIRE_NVRTC();
  struct Case {
    const char *name;
    int tm, tn;
    const char *loadA, *loadB, *ldmatrix;
  };
  const Case cases[] = {
      {"moek_test_gemm_rows", 128, 64, "moec::RowMajor<moec::bf16>{x, 256}",
       "moec::RowMajor<moec::bf16>{w, 512}",
       "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"},
      {"moek_test_gemm_gather", 64, 64,
       "moec::GatherRows<moec::bf16>{x, order, row0, 2, 256, "
       "moec::gptr<const float>()}",
       "moec::ColMajor<moec::bf16>{w, 256}",
       "ldmatrix.sync.aligned.m8n8.x4.shared.b16"},
  };
  for (const Case &c : cases) {
    std::string source = asyncGemmSource(c.name, c.tm, c.tn, c.loadA, c.loadB);
    for (const char *arch : {"sm_80", "sm_90"}) {
      CompiledKernel k = nvrtc.compile(source, c.name, arch, true);
      SCOPED_TRACE(fmt::format("{} for {}", c.name, arch));
      EXPECT_THAT(k.ptx, HasSubstr("cp.async.cg.shared.global"));
      EXPECT_THAT(k.ptx, HasSubstr("cp.async.wait_group 1"));
      EXPECT_THAT(k.ptx, HasSubstr(c.ldmatrix));
      EXPECT_THAT(k.ptx, HasSubstr("mma.sync.aligned.m16n8k16.row.col.f32."
                                   "bf16.bf16.f32"));
      EXPECT_GT(k.usage.registers, 0) << k.log;
      EXPECT_LE(k.usage.registers, 128) << k.log; // two blocks per SM
      EXPECT_LE(k.usage.sharedBytes, 48 * 1024) << k.log;
      EXPECT_EQ(k.usage.spillStoreBytes, 0) << k.log;
      EXPECT_EQ(k.usage.spillLoadBytes, 0) << k.log;
      fmt::print("[ ptxas    ] {} {}: {} registers, {} bytes shared, {}/{} "
                 "bytes spilled\n",
                 c.name, arch, k.usage.registers, k.usage.sharedBytes,
                 k.usage.spillStoreBytes, k.usage.spillLoadBytes);
    }
  }
}

TEST(Nvrtc, PtxTargetsTheArchitecture) {
  MOEC_REQUIRE_NVRTC();
  CompiledKernel k = nvrtc.compile(test::scaleKernelSource("moek_test_scale"),
                                   "moek_test_scale", "sm_90", true);
  EXPECT_TRUE(isElf(*k.cubin));
  EXPECT_THAT(k.ptx, HasSubstr(".target sm_90"));
  EXPECT_THAT(k.ptx, HasSubstr(".entry moek_test_scale"));
}

TEST(Nvrtc, ASyntaxErrorReportsTheLogAndSavesTheSource) {
  MOEC_REQUIRE_NVRTC();
  test::TempDir failed;
  std::string source = std::string(deviceLibrarySource()) +
                       "\nextern \"C\" __global__ void moek_bad(const "
                       "moec::KernelParams p) { undefined_fn(); }\n";
  try {
    nvrtc.compile(source, "moek_bad", "sm_80", false, failed.path());
    FAIL() << "a kernel with a syntax error compiled";
  } catch (const Error &e) {
    std::string message = e.what();
    EXPECT_THAT(message, HasSubstr("could not compile kernel 'moek_bad' for "
                                   "sm_80"));
    EXPECT_THAT(message, HasSubstr("moek_bad.cu("));
    EXPECT_THAT(message, HasSubstr("identifier \"undefined_fn\" is undefined"));
    std::string path = failed.path() + "/moek_bad.cu";
    EXPECT_THAT(message, HasSubstr(path));
    EXPECT_EQ(test::readFile(path), source);
  }
}

TEST(Nvrtc, FailedSourcesGoToTheCacheDirectoryByDefault) {
  MOEC_REQUIRE_NVRTC();
  test::TempDir cache;
  test::ScopedEnv env("MOEC_CACHE_DIR", cache.path());
  std::string source = "extern \"C\" __global__ void moek_bad2() { int x = }\n";
  try {
    nvrtc.compile(source, "moek_bad2", "sm_90", false);
    FAIL() << "a kernel with a syntax error compiled";
  } catch (const Error &e) {
    std::string path = cache.path() + "/cuda/failed/moek_bad2.cu";
    EXPECT_THAT(e.what(), HasSubstr(path));
    EXPECT_EQ(test::readFile(path), source);
  }
}

TEST(Nvrtc, RejectsMalformedAndUnsupportedArchitectures) {
  MOEC_REQUIRE_NVRTC();
  std::string source = test::scaleKernelSource("moek_test_scale");
  for (const char *arch : {"sm90", "sm_", "sm_9x0", "compute_90", "90"})
    EXPECT_THROW(
        {
          try {
            nvrtc.compile(source, "moek_test_scale", arch, false);
          } catch (const Error &e) {
            EXPECT_THAT(e.what(), HasSubstr("is not a CUDA architecture"));
            throw;
          }
        },
        Error)
        << arch;
  try {
    nvrtc.compile(source, "moek_test_scale", "sm_10", false);
    FAIL() << "compiled for sm_10";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot compile for sm_10"));
  }
}

TEST(Nvrtc, ArchNumber) {
  EXPECT_EQ(archNumber("sm_80"), 80);
  EXPECT_EQ(archNumber("sm_90a"), 90);
  EXPECT_EQ(archNumber("sm_120"), 120);
  EXPECT_THROW(archNumber("sm_90A"), Error);
  EXPECT_THROW(archNumber("sm_90ab"), Error);
}

TEST(Nvrtc, ALibraryOverrideThatDoesNotLoadIsReported) {
  test::ScopedEnv env("MOEC_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so.13");
  try {
    Nvrtc::load();
    FAIL() << "loaded a library that does not exist";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("$MOEC_NVRTC_LIBRARY"));
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/libnvrtc.so.13"));
  }
}

TEST(Nvrtc, ALibraryWithoutNvrtcIsReported) {
  test::ScopedEnv env("MOEC_NVRTC_LIBRARY", "libm.so.6");
  try {
    Nvrtc::load();
    FAIL() << "libm passed for NVRTC";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("is not a usable NVRTC library: it has no "
                                    "nvrtcGetErrorString"));
  }
}

} // namespace
