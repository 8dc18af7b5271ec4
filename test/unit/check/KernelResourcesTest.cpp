//===- KernelResourcesTest.cpp - every kernel through NVRTC and ptxas -----===//
//
// Every kernel of every example (and of the specs in test/unit/check/specs)
// compiles with NVRTC for sm_80 and sm_90
// with its kernels tiled for that architecture; the test prints ptxas's
// registers, shared memory and stack for each (the record of what the
// generated code costs) and fails on any spill. No GPU is needed.
//
//===----------------------------------------------------------------------===//

#include "Examples.h"
#include "moec/Compiler.h"
#include "moec/Cuda.h"
#include "moec/Error.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <iostream>

using namespace moec;

namespace {

/// A checked spec for one architecture, with the dtype it names (dtype
/// empty) or with bf16 storage.
struct Case {
  test::SpecFile spec;
  std::string arch;
  std::string dtype;
  std::string name() const {
    return spec.name + "_" + arch + (dtype.empty() ? "" : "_" + dtype);
  }
};

void PrintTo(const Case &c, std::ostream *os) { *os << c.name(); }

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const test::SpecFile &spec : test::checkedSpecs())
    for (const char *arch : {"sm_80", "sm_90"})
      for (const char *dtype : {"", "bf16"})
        all.push_back({spec, arch, dtype});
  return all;
}

class KernelResources : public ::testing::TestWithParam<Case> {};

TEST_P(KernelResources, CompileWithoutSpills) {
#ifndef MOEC_HAVE_NVRTC
  GTEST_SKIP() << "built without the CUDA toolkit";
#endif
  const Case &c = GetParam();
  CompileOptions options;
  options.arch = c.arch;
  options.dtype = c.dtype;
  Bundle bundle = compileFile(c.spec.path, options);
  std::vector<PrecompiledKernel> kernels = precompileKernels(bundle, c.arch);
  ASSERT_FALSE(kernels.empty());
  std::cout << fmt::format("{}: {} kernels\n", c.name(), kernels.size());
  for (const PrecompiledKernel &k : kernels) {
    std::cout << fmt::format("  {:<34} {:>3} registers {:>6} B shared {:>4} B "
                             "stack\n",
                             k.name, k.usage.registers, k.usage.sharedBytes,
                             k.usage.stackBytes);
    EXPECT_GT(k.usage.registers, 0) << k.name;
    EXPECT_LE(k.usage.registers, 128) << k.name;
    EXPECT_EQ(k.usage.spillStoreBytes, 0) << k.name;
    EXPECT_EQ(k.usage.spillLoadBytes, 0) << k.name;
    // Static shared memory within the 48 KiB a launch gets without opting in.
    EXPECT_LE(k.usage.sharedBytes, 48 * 1024) << k.name;
    EXPECT_GT(k.cubinBytes, 0u) << k.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, KernelResources,
                         ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name(); });

} // namespace
