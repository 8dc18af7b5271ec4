//===- CacheWriteKernelsTest.cpp - a decoding layer's cache writes --------===//
//
// inputs/kv_cache_writes.mlir compiled with f32 and bf16 storage: the
// query, key and value projections of one position share one GEMM launch
// whose epilogue writes the key and value caches (values of another input:
// a launch of their own), the pool its own kernel (in place, and after
// copies of caches the program still reads); on the
// emu device they match the cpu device, pass emu's checking mode, and
// NVRTC compiles them for sm_80 and sm_90 without spills.
//
//===----------------------------------------------------------------------===//

#include "BundleData.h"
#include "ModuleKernelChecks.h"
#include "moec/KernelCheck.h"

#include <gtest/gtest.h>
#include <iostream>

using namespace moec;

namespace {

Bundle cacheWriteBundle(const std::string &storage,
                        const std::string &arch = "sm_80") {
  return test::storageModuleBundle("kv_cache_writes.mlir", storage, arch);
}

/// The kind and the launches of each group of program `name` that writes a
/// cache, as "kind: kernel kernel ...".
std::vector<std::string> cacheWriteGroups(const Bundle &bundle,
                                          const std::string &name) {
  const detail::ProgramDesc &program = bundle.internals().programs.at(name);
  std::vector<std::string> groups;
  for (const auto &group : program.groups) {
    bool writes = false;
    for (size_t step : group.steps)
      writes |= program.steps[step].op == "moe.kv_cache_write";
    if (!writes)
      continue;
    std::string line = group.kind + ":";
    for (const auto &launch : group.launches)
      line += " " + launch.kernel;
    groups.push_back(line);
  }
  return groups;
}

class CacheWriteKernels : public ::testing::TestWithParam<std::string> {};

TEST_P(CacheWriteKernels, AreOneLaunchAfterTheCopies) {
  Bundle bundle = cacheWriteBundle(GetParam());
  // q, k and v in one GEMM launch that stores k and v into their caches;
  // the pool in a kv_write kernel.
  EXPECT_EQ(cacheWriteGroups(bundle, "decode"),
            (std::vector<std::string>{"gemm: moek_decode_g3",
                                      "kv_write: moek_decode_g5"}));
  // Caches the program still reads are copied first, a launch each before
  // the GEMM that writes them (the two copies are one kernel: the same
  // code); values of another input are a GEMM launch of their own.
  EXPECT_EQ(cacheWriteGroups(bundle, "decode_kept"),
            (std::vector<std::string>{
                "gemm: moek_decode_kept_g3_copy moek_decode_kept_g3_gemm",
                "gemm: moek_decode_kept_g3_copy moek_decode_kept_g4_gemm"}));
}

TEST_P(CacheWriteKernels, MatchTheCpuDevice) {
  Bundle bundle = cacheWriteBundle(GetParam());
  for (int64_t decodeLen : {1, 3}) {
    SCOPED_TRACE(decodeLen);
    KernelCheckOptions options;
    options.device = "emu";
    options.decodeLen = decodeLen;
    KernelCheckReport report = checkKernels(bundle, options);
    EXPECT_TRUE(report.passed()) << report.format();
    EXPECT_EQ(report.covered.size(), bundle.internals().kernels.size());
    test::expectKindsCompared(report, {"kv_write"});
    std::cout << report.format();
  }
}

TEST_P(CacheWriteKernels, PassTheEmuChecks) {
  test::expectEmuChecksPass(cacheWriteBundle(GetParam()));
}

TEST_P(CacheWriteKernels, CompileWithoutSpills) {
#ifndef MOEC_HAVE_NVRTC
  GTEST_SKIP() << "built without the CUDA toolkit";
#else
  test::expectCompilesWithoutSpills([](const std::string &arch) {
    return cacheWriteBundle(GetParam(), arch);
  });
#endif
}

INSTANTIATE_TEST_SUITE_P(Storage, CacheWriteKernels,
                         ::testing::Values("f32", "bf16"));

} // namespace
