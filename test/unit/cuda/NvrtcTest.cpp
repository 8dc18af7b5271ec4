//===- NvrtcTest.cpp - NVRTC through dlopen, without a GPU ----------------===//

#include "cuda/Nvrtc.h"
#include "CudaTestUtil.h"
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

TEST(Nvrtc, CompilesADeviceLibraryKernelForSm80AndSm90) {
  MOEC_REQUIRE_NVRTC();
  std::string source = test::scaleKernelSource("moek_test_scale");
  for (const char *arch : {"sm_80", "sm_90"}) {
    CompiledKernel k = nvrtc.compile(source, "moek_test_scale", arch, false);
    EXPECT_EQ(k.name, "moek_test_scale");
    EXPECT_EQ(k.arch, arch);
    EXPECT_TRUE(isElf(k.cubin)) << arch;
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
  EXPECT_TRUE(isElf(k.cubin));
  EXPECT_GT(k.usage.registers, 0);
  EXPECT_EQ(k.usage.spillStoreBytes, 0) << k.log;
}

TEST(Nvrtc, PtxTargetsTheArchitecture) {
  MOEC_REQUIRE_NVRTC();
  CompiledKernel k = nvrtc.compile(test::scaleKernelSource("moek_test_scale"),
                                   "moek_test_scale", "sm_90", true);
  EXPECT_TRUE(isElf(k.cubin));
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
