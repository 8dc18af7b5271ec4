//===- KernelCheckTest.cpp - every example's kernels on the emu device ----===//
//
// Every spec in examples/ (and in test/unit/check/specs, for what no
// example uses) is compiled and each of its generated kernels is run on
// the emu device and compared with the cpu device, buffer by buffer
// (moec/KernelCheck.h). A new example or a new kernel is checked without
// anyone writing a test for it; a kernel no comparison exercised fails.
//
//===----------------------------------------------------------------------===//

#include "BundleData.h"
#include "KernelCheck.h"
#include "emu/EmuDevice.h"
#include "Examples.h"
#include "moec/Compiler.h"
#include "moec/Error.h"
#include "moec/KernelCheck.h"

#include <algorithm>
#include <gtest/gtest.h>
#include <iostream>
#include <tuple>

using namespace moec;

namespace {

/// A checked spec compiled with the dtype it names (dtype empty) or with
/// bf16 storage.
struct Case {
  test::SpecFile spec;
  std::string dtype;
  std::string name() const {
    return dtype.empty() ? spec.name : spec.name + "_" + dtype;
  }
};

void PrintTo(const Case &c, std::ostream *os) { *os << c.name(); }

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const test::SpecFile &spec : test::checkedSpecs())
    for (const char *dtype : {"", "bf16"})
      all.push_back({spec, dtype});
  return all;
}

Bundle compileCase(const Case &c) {
  CompileOptions options;
  options.dtype = c.dtype;
  return compileFile(c.spec.path, options);
}

class ExampleKernels : public ::testing::TestWithParam<Case> {};

TEST_P(ExampleKernels, MatchTheCpuDevice) {
  Bundle bundle = compileCase(GetParam());
  KernelCheckOptions options;
  options.device = "emu";
  KernelCheckReport report = checkKernels(bundle, options);
  EXPECT_TRUE(report.passed()) << report.format();
  EXPECT_TRUE(report.uncovered.empty()) << report.format();
  // Every program ran (forward, loss, backward, train_step, decode) and
  // every kernel the bundle defines was exercised.
  EXPECT_EQ(report.covered.size(), bundle.internals().kernels.size());
  std::cout << report.format();
}

TEST_P(ExampleKernels, PassTheEmuChecks) {
  // Bounds-checked global memory, tracked shared memory and strict warp
  // masks: an out-of-bounds access or a read of shared memory no thread
  // wrote fails the launch, naming the kernel, block and thread.
  Bundle bundle = compileCase(GetParam());
  detail::emu::EmuDeviceOptions emu = detail::emu::emuOptionsFromEnvironment();
  emu.build.check = true;
  std::unique_ptr<detail::Device> cpu = detail::createDevice("cpu");
  std::unique_ptr<detail::Device> device = detail::emu::createEmuDevice(emu);
  device->setBundle(bundle.internals());
  KernelCheckReport report =
      detail::checkKernels(bundle.internals(), *cpu, *device, {});
  EXPECT_TRUE(report.passed()) << report.format();
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleKernels,
                         ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name(); });

TEST(KernelCheck, FindsEveryExample) {
  // The examples this project ships; a glob that finds nothing would make
  // the suite above vacuous.
  std::vector<std::string> specs = test::exampleSpecs();
  for (const char *name : {"glu_moe_lm", "moe_lm", "switch_lm"})
    EXPECT_NE(std::find(specs.begin(), specs.end(), name), specs.end())
        << name;
  std::vector<test::SpecFile> checked = test::checkedSpecs();
  EXPECT_TRUE(std::any_of(checked.begin(), checked.end(),
                          [](auto &spec) { return spec.name == "rope_lm"; }));
}

TEST(KernelCheck, OtherSizesAndSeeds) {
  // One token per sequence, and a batch whose token count fills no tile.
  Bundle bundle = compileFile(MOEC_SOURCE_DIR "/examples/moe_lm.moe");
  for (auto [batch, seq, seed] :
       {std::tuple<int64_t, int64_t, uint64_t>{3, 1, 5}, {5, 61, 9}}) {
    KernelCheckOptions options;
    options.batch = batch;
    options.seqLen = seq;
    options.seed = seed;
    options.programs = {"train_step", "forward"};
    KernelCheckReport report = checkKernels(bundle, options);
    EXPECT_TRUE(report.passed())
        << "B=" << batch << " S=" << seq << "\n"
        << report.format();
  }
}

TEST(KernelCheck, RejectsDevicesWithoutKernels) {
  Bundle bundle = compileFile(MOEC_SOURCE_DIR "/examples/moe_lm.moe");
  KernelCheckOptions options;
  options.device = "cpu";
  try {
    checkKernels(bundle, options);
    FAIL() << "the cpu device was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("runs no generated kernels"),
              std::string::npos)
        << e.what();
  }
}

} // namespace
