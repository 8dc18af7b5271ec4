//===- PlantedBugTest.cpp - the kernel check notices real bugs ------------===//
//
// Plants the two classic kernel bugs and expects the check to fail and to
// name the kernel: an off-by-one in a generated kernel's loop bound, and a
// missing barrier between filling a shared-memory tile and reading it in
// the device library's GEMM; a batch-priority order ranked backwards,
// which the check's tolerance for near-tied router slots must not hide;
// and gradients 10% off at the small size a mean loss gives them, which
// the check's floor for values that cancel must not hide.
//
//===----------------------------------------------------------------------===//

#include "KernelCheck.h"
#include "emu/EmuDevice.h"
#include "moec/Compiler.h"
#include "moec/support/DeviceLibrary.h"

#include <algorithm>
#include <gtest/gtest.h>
#include <set>
#include <nlohmann/json.hpp>

using namespace moec;

namespace {

/// Replaces the first `from` in `text`; fails the test if there is none.
bool replaceOnce(std::string &text, const std::string &from,
                 const std::string &to) {
  size_t at = text.find(from);
  if (at == std::string::npos)
    return false;
  text.replace(at, from.size(), to);
  return true;
}

/// The failed comparisons' kernels.
std::set<std::string> failingKernels(const KernelCheckReport &report) {
  std::set<std::string> kernels;
  for (const BufferComparison &c : report.comparisons)
    if (!c.passed)
      kernels.insert(c.kernels.begin(), c.kernels.end());
  return kernels;
}

KernelCheckReport checkOnEmu(const Bundle &bundle,
                             const detail::emu::EmuDeviceOptions &emu,
                             KernelCheckOptions options = {}) {
  std::unique_ptr<detail::Device> cpu = detail::createDevice("cpu");
  std::unique_ptr<detail::Device> device = detail::emu::createEmuDevice(emu);
  device->setBundle(bundle.internals());
  if (options.programs.empty())
    options.programs = {"train_step"};
  return detail::checkKernels(bundle.internals(), *cpu, *device, options);
}

TEST(PlantedBug, OffByOneInALoopBound) {
  Bundle clean = compileFile(MOEC_SOURCE_DIR "/examples/moe_lm.moe");
  nlohmann::json document = nlohmann::json::parse(clean.json());
  std::string victim;
  for (auto &kernel : document["cuda"]["kernels"]) {
    std::string source = kernel["source"];
    if (source.find("(elementwise)") == std::string::npos)
      continue;
    // The 16-byte loop stops one vector short (the rest of the elements
    // start after it).
    ASSERT_TRUE(replaceOnce(source, "q < vectors;", "q < vectors - 1;"))
        << source;
    kernel["source"] = source;
    victim = kernel["name"];
    break;
  }
  ASSERT_FALSE(victim.empty()) << "no elementwise kernel to plant a bug in";
  Bundle buggy = Bundle::parse(document.dump(), "buggy");

  KernelCheckReport report = checkOnEmu(buggy, {});
  EXPECT_FALSE(report.passed());
  std::set<std::string> failing = failingKernels(report);
  EXPECT_EQ(failing, std::set<std::string>{victim}) << report.format();
  // The 8 elements it never wrote are still the poison the check put there.
  bool sawPoison = false;
  for (const BufferComparison &c : report.comparisons)
    sawPoison |= !c.passed && c.nonFinite == 8;
  EXPECT_TRUE(sawPoison) << report.format();
}

TEST(PlantedBug, MissingBarrierAfterFillingSharedMemory) {
  std::string library(deviceLibrarySource());
  // gemmTile: the barrier between loading the A and B tiles and the
  // products that read them.
  ASSERT_TRUE(replaceOnce(library,
                          "? loadB(k, n) : 0.0f;\n    }\n    __syncthreads();",
                          "? loadB(k, n) : 0.0f;\n    }\n"))
      << "gemm.cuh changed: update the planted bug";
  detail::emu::EmuDeviceOptions emu;
  emu.deviceLibrary = library;

  Bundle bundle = compileFile(MOEC_SOURCE_DIR "/examples/moe_lm.moe");
  KernelCheckReport report = checkOnEmu(bundle, emu);
  EXPECT_FALSE(report.passed());
  // Every failure is in a group built on the GEMM tile, and the dense
  // projections are among them.
  bool sawGemm = false;
  for (const BufferComparison &c : report.comparisons) {
    if (c.passed)
      continue;
    EXPECT_TRUE(c.kind == "gemm" || c.kind == "gemm_grad" ||
                c.kind == "experts" || c.kind == "experts_grad")
        << c.kind << " failed:\n"
        << report.format();
    sawGemm |= c.kind == "gemm";
  }
  EXPECT_TRUE(sawGemm) << report.format();

  // The same check with the library intact passes.
  EXPECT_TRUE(checkOnEmu(bundle, {}).passed());
}

// The check lets near-tied tokens swap capacity slots (RouterSlotCheck.h);
// a batch-priority order that is simply wrong must still fail, in the
// router groups and nowhere else.
TEST(PlantedBug, BatchPriorityRankedBackwards) {
  std::string library(deviceLibrarySource());
  ASSERT_TRUE(replaceOnce(library,
                          "return 0x7FFFFFFFu - __float_as_uint(top1);",
                          "return __float_as_uint(top1);"))
      << "router_tail.cuh changed: update the planted bug";
  detail::emu::EmuDeviceOptions emu;
  emu.deviceLibrary = library;

  Bundle bundle = compileFile(MOEC_SOURCE_DIR "/examples/glu_moe_lm.moe");
  KernelCheckReport report = checkOnEmu(bundle, emu);
  EXPECT_FALSE(report.passed());
  bool sawSlots = false;
  for (const BufferComparison &c : report.comparisons) {
    if (c.passed)
      continue;
    EXPECT_EQ(c.kind, "router") << report.format();
    if (c.dtype == DType::I32) {
      sawSlots = true;
      EXPECT_NE(c.note.find("clearly higher"), std::string::npos) << c.note;
    }
  }
  EXPECT_TRUE(sawSlots) << report.format();

  // Intact, the check passes; at 2 x 45 the backward program's second
  // router ranks two near-tied tokens the other way round.
  KernelCheckOptions nearTie;
  nearTie.programs = {"backward"};
  nearTie.batch = 2;
  nearTie.seqLen = 45;
  KernelCheckReport clean = checkOnEmu(bundle, {}, nearTie);
  EXPECT_TRUE(clean.passed()) << clean.format();
  EXPECT_TRUE(std::any_of(clean.comparisons.begin(), clean.comparisons.end(),
                          [](const BufferComparison &c) {
                            return c.passed && !c.note.empty();
                          }))
      << "no near-tied slots at 2 x 45 any more: pick a size that has some";
}

// The attention gradients of moe_lm in bf16 are about 1e-5 (the loss is a
// mean over the tokens): a 10% error in dq or in dv must fail the check
// in the attention backward and nowhere else, though the values are far
// below any absolute floor.
TEST(PlantedBug, SmallGradientsTenPercentOff) {
  CompileOptions bf16;
  bf16.dtype = "bf16";
  Bundle bundle = compileFile(MOEC_SOURCE_DIR "/examples/moe_lm.moe", bf16);
  KernelCheckOptions backward;
  backward.programs = {"backward"};
  for (const char *store :
       {"storeBf16x2(dq + (at + n * 8), acc[n][2 * half] * s.scale,",
        "storeBf16x2(dv + (at + n * 8), dvAcc[n][2 * half],"}) {
    std::string library(deviceLibrarySource()), planted(store);
    planted.insert(planted.size() - 1, " * 1.1f");
    ASSERT_TRUE(replaceOnce(library, store, planted))
        << "attention_mma.cuh changed: update the planted bug";
    detail::emu::EmuDeviceOptions emu;
    emu.deviceLibrary = library;
    KernelCheckReport report = checkOnEmu(bundle, emu, backward);
    EXPECT_FALSE(report.passed()) << store;
    for (const BufferComparison &c : report.comparisons) {
      if (c.passed)
        continue;
      EXPECT_EQ(c.kind, "attention_grad") << report.format();
    }
  }
}

} // namespace
