//===- ModuleKernelChecks.h - kernel checks of hand-written modules -*- C++ -*-===//
//
// The op-level kernel tests (gate, batch norm, MAE) compile a hand-written
// module into a bundle per storage type and architecture, then ask the same
// two questions of it: does every kernel pass the emu device's checking
// mode against the cpu device, and does NVRTC compile every kernel without
// spills?
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TEST_CHECK_MODULEKERNELCHECKS_H
#define MOEC_TEST_CHECK_MODULEKERNELCHECKS_H

#include "KernelCheck.h"
#include "emu/EmuDevice.h"
#include "moec/Compiler.h"
#include "moec/Cuda.h"
#include "moec/Files.h"
#include "moec/KernelCheck.h"

#include <functional>
#include <initializer_list>
#include <gtest/gtest.h>
#include <iostream>
#include <memory>

namespace moec::test {

/// The module test/unit/check/inputs/`file` with activations of `storage`
/// (f32 or bf16, for its STORAGE placeholders), tiled for `arch`.
inline Bundle storageModuleBundle(const std::string &file,
                                  const std::string &storage,
                                  const std::string &arch) {
  std::string text = readRegularFile(
      MOEC_SOURCE_DIR "/test/unit/check/inputs/" + file, size_t(1) << 20);
  for (size_t at = text.find("STORAGE"); at != std::string::npos;
       at = text.find("STORAGE", at))
    text.replace(at, 7, storage);
  CompileOptions options;
  options.arch = arch;
  return compileModuleSource(text, file + " (" + storage + ")", options);
}

/// Every program of `bundle` on the emu device in checking mode (bounds,
/// races, uninitialised reads) matches the cpu device.
inline void expectEmuChecksPass(const Bundle &bundle) {
  detail::emu::EmuDeviceOptions emu = detail::emu::emuOptionsFromEnvironment();
  emu.build.check = true;
  std::unique_ptr<detail::Device> cpu = detail::createDevice("cpu");
  std::unique_ptr<detail::Device> device = detail::emu::createEmuDevice(emu);
  device->setBundle(bundle.internals());
  KernelCheckReport report =
      detail::checkKernels(bundle.internals(), *cpu, *device, {});
  EXPECT_TRUE(report.passed()) << report.format();
}

/// Each kernel kind in `kinds` is among the buffers `report` compared, on
/// values that are not all zero.
inline void
expectKindsCompared(const KernelCheckReport &report,
                    std::initializer_list<const char *> kinds) {
  for (const char *kind : kinds) {
    bool seen = false;
    for (const BufferComparison &c : report.comparisons)
      seen |= c.kind == kind && !c.trivial;
    EXPECT_TRUE(seen) << kind;
  }
}

/// Every kernel of the bundle `bundleFor(arch)` compiles by NVRTC for sm_80
/// and sm_90 in at most 128 registers, without spills. (Callers skip when
/// built without the CUDA toolkit.)
inline void expectCompilesWithoutSpills(
    const std::function<Bundle(const std::string &arch)> &bundleFor) {
  for (const char *arch : {"sm_80", "sm_90"}) {
    Bundle bundle = bundleFor(arch);
    std::vector<PrecompiledKernel> kernels = precompileKernels(bundle, arch);
    ASSERT_FALSE(kernels.empty());
    for (const PrecompiledKernel &k : kernels) {
      std::cout << arch << " " << k.name << ": " << k.usage.registers
                << " registers, " << k.usage.sharedBytes << " B shared\n";
      EXPECT_LE(k.usage.registers, 128) << k.name;
      EXPECT_EQ(k.usage.spillStoreBytes, 0) << k.name;
      EXPECT_EQ(k.usage.spillLoadBytes, 0) << k.name;
    }
  }
}

} // namespace moec::test

#endif // MOEC_TEST_CHECK_MODULEKERNELCHECKS_H
