//===- EmuTestUtil.h - building and launching test kernels ------*- C++ -*-===//

#ifndef MOEC_TEST_EMU_EMUTESTUTIL_H
#define MOEC_TEST_EMU_EMUTESTUTIL_H

#include "emu/EmuCompiler.h"

#include <cstdint>
#include <string>
#include <vector>

namespace moec::emu::test {

/// Kernels that run correctly (EmuKernels.cpp).
extern const char *const kCorrectKernels;
/// Kernels with bugs check mode reports (EmuKernels.cpp).
extern const char *const kFaultyKernels;

/// One file of the device library (runtime/device) from the source tree.
std::string deviceFile(const std::string &name);

/// defs.cuh, prelude.cuh, vector.cuh, mma.cuh, async_copy.cuh and gemm.cuh
/// from the source tree.
std::string deviceHeaders();

/// Options that build into the test binary's cache directory, shared by the
/// test processes ctest starts.
EmuOptions testOptions(bool check);

/// kCorrectKernels built normally (loaded once per process).
const EmuModule &correctModule();
/// kCorrectKernels and kFaultyKernels built with MOEC_EMU_CHECK.
const EmuModule &checkedModule();

/// One launch: a 1-D grid, buffers bound to host vectors.
class Launch {
public:
  Launch(unsigned grid, unsigned block);

  template <typename T> Launch &buffer(int i, std::vector<T> &data) {
    params.buffers[i] = data.data();
    setBytes(i, data.size() * sizeof(T));
    return *this;
  }
  Launch &scalar(int i, int64_t value) {
    params.scalars[i] = value;
    return *this;
  }
  Launch &shared(uint64_t bytes) {
    config.sharedBytes = bytes;
    return *this;
  }
  Launch &hostThreads(unsigned n) {
    config.hostThreads = n;
    return *this;
  }

  /// Launches; a failure is a moec::Error.
  void run(const EmuModule &module, const std::string &kernel) const;
  /// Launches and returns the error message ("" when it succeeded).
  std::string error(const EmuModule &module, const std::string &kernel) const;

  EmuLaunchConfig config;
  KernelParams params;

private:
  void setBytes(int i, uint64_t bytes);
};

/// The bits of a float rounded to bf16 by truncation, and back.
uint16_t toBf16Bits(float value);
float fromBf16Bits(uint16_t bits);

} // namespace moec::emu::test

#endif // MOEC_TEST_EMU_EMUTESTUTIL_H
