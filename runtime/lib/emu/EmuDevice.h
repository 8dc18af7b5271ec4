//===- EmuDevice.h - generated CUDA kernels run on the CPU ------*- C++ -*-===//
//
// The emu device runs a program's fused groups like the cuda device does,
// but builds the bundle's kernels for the host (EmuCompiler) and runs each
// launch with CUDA's semantics on fibers. Buffers live in host memory.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_EMU_EMUDEVICE_H
#define MOEC_RUNTIME_EMU_EMUDEVICE_H

#include "Device.h"
#include "emu/EmuCompiler.h"

#include <memory>
#include <string>

namespace moec::detail::emu {

struct EmuDeviceOptions {
  /// How kernels are built (check mode, compiler, cache directory).
  moec::emu::EmuOptions build;
  /// Host threads running the blocks of one launch; 0: one per core.
  unsigned hostThreads = 0;
  /// Compilers run at once while building a bundle's kernels; 0: one per
  /// core.
  unsigned compileJobs = 0;
  /// The device library the kernels are built with; empty: the runtime's
  /// own (tests plant bugs in a copy).
  std::string deviceLibrary;
};

/// The options $MOEC_EMU_CHECK (1: check mode), $MOEC_EMU_THREADS and
/// $MOEC_EMU_JOBS ask for; the compiler and cache follow EmuOptions.
EmuDeviceOptions emuOptionsFromEnvironment();

std::unique_ptr<Device> createEmuDevice(const EmuDeviceOptions &options);

} // namespace moec::detail::emu

#endif // MOEC_RUNTIME_EMU_EMUDEVICE_H
