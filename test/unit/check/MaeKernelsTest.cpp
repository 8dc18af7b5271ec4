//===- MaeKernelsTest.cpp - the MAE layer's kernels against the cpu -------===//
//
// inputs/mae_ops.mlir (no .moe syntax has the MAE layer yet) compiled with
// f32 and bf16 storage: every generated kernel of every program (the
// loss, its backward and train_step, and a decoding step's windows over a
// history) on the emu device against the cpu device, in emu's checking
// mode too, and through NVRTC for sm_80 and sm_90 without spills.
//
//===----------------------------------------------------------------------===//

#include "BundleData.h"
#include "KernelCheck.h"
#include "ModuleKernelChecks.h"
#include "emu/EmuDevice.h"
#include "moec/Compiler.h"
#include "moec/Cuda.h"
#include "moec/Files.h"
#include "moec/KernelCheck.h"
#include "moec/Session.h"

#include <gtest/gtest.h>
#include <iostream>

using namespace moec;

namespace {

/// `text` with every `name` replaced by `value`.
void substitute(std::string &text, const std::string &name,
                const std::string &value) {
  for (size_t at = text.find(name); at != std::string::npos;
       at = text.find(name, at))
    text.replace(at, name.size(), value);
}

/// The MAE module with `storage` (f32 or bf16) activations and sequences
/// (and decoding histories) of up to `maxSeq` positions, tiled for `arch`.
Bundle maeBundle(const std::string &storage, const std::string &arch,
                 int64_t maxSeq = 40) {
  std::string text =
      readRegularFile(MOEC_SOURCE_DIR "/test/unit/check/inputs/mae_ops.mlir",
                      size_t(1) << 20);
  substitute(text, "STORAGE", storage);
  substitute(text, "MAXSEQ", std::to_string(maxSeq));
  CompileOptions options;
  options.arch = arch;
  return compileModuleSource(text, "mae_ops.mlir (" + storage + ")", options);
}

class MaeKernels : public ::testing::TestWithParam<std::string> {};

TEST_P(MaeKernels, MatchTheCpuDevice) {
  Bundle bundle = maeBundle(GetParam(), "sm_80");
  ASSERT_FALSE(bundle.internals().kernels.empty()) << "no CUDA was generated";
  KernelCheckOptions options;
  options.device = "emu";
  KernelCheckReport report = checkKernels(bundle, options);
  EXPECT_TRUE(report.passed()) << report.format();
  EXPECT_EQ(report.covered.size(), bundle.internals().kernels.size());
  // The MAE kernels are among those compared, on values that are not all
  // zero (head_mixture is in the elementwise kernels).
  test::expectKindsCompared(report,
                            {"window_mean", "window_mean_grad",
                             "head_mixture_grad", "sample_expert",
                             "gate_stats", "elementwise"});
  std::cout << report.format();
}

TEST_P(MaeKernels, MatchTheCpuDeviceOnLongSequences) {
  // 9 sequences of 200 (decoding: 3 new positions after up to 197): the
  // window columns span two blocks, the running sums run 200 long, and
  // the statistics, sampling and head-mixture gradient blocks loop over
  // more rows than they have threads.
  Bundle bundle = maeBundle(GetParam(), "sm_80", 200);
  KernelCheckOptions options;
  options.device = "emu";
  options.batch = 9;
  options.seqLen = 200;
  KernelCheckReport report = checkKernels(bundle, options);
  EXPECT_TRUE(report.passed()) << report.format();
  std::cout << report.format();
}

TEST_P(MaeKernels, PassTheEmuChecks) {
  test::expectEmuChecksPass(maeBundle(GetParam(), "sm_80"));
}

TEST_P(MaeKernels, CompileWithoutSpills) {
#ifndef MOEC_HAVE_NVRTC
  GTEST_SKIP() << "built without the CUDA toolkit";
#endif
  test::expectCompilesWithoutSpills(
      [&](const std::string &arch) { return maeBundle(GetParam(), arch); });
}

INSTANTIATE_TEST_SUITE_P(Storage, MaeKernels, ::testing::Values("f32", "bf16"),
                         [](const auto &info) { return info.param; });

} // namespace
