//===- EmuTestUtil.cpp - building and launching test kernels --------------===//

#include "EmuTestUtil.h"

#include "moec/Error.h"
#include "moec/Tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>

namespace moec::emu::test {

std::string deviceFile(const std::string &name) {
  std::string path = std::string(MOEC_DEVICE_DIR) + "/" + name;
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string deviceHeaders() {
  return deviceFile("defs.cuh") + deviceFile("prelude.cuh") +
         deviceFile("vector.cuh") + deviceFile("reduce.cuh") +
         deviceFile("mma.cuh") + deviceFile("async_copy.cuh") +
         deviceFile("gemm.cuh");
}

EmuOptions testOptions(bool check) {
  EmuOptions options;
  options.check = check;
  options.cacheDir = MOEC_EMU_TEST_CACHE;
  return options;
}

const EmuModule &correctModule() {
  static std::once_flag once;
  static std::unique_ptr<EmuModule> module;
  std::call_once(once, [] {
    module = std::make_unique<EmuModule>(EmuModule::load(
        deviceHeaders() + kCorrectKernels, "emu-test", testOptions(false)));
  });
  return *module;
}

const EmuModule &checkedModule() {
  static std::once_flag once;
  static std::unique_ptr<EmuModule> module;
  std::call_once(once, [] {
    module = std::make_unique<EmuModule>(
        EmuModule::load(deviceHeaders() + kCorrectKernels + kFaultyKernels,
                        "emu-test-check", testOptions(true)));
  });
  return *module;
}

Launch::Launch(unsigned grid, unsigned block) {
  config.grid = {grid, 1, 1};
  config.block = {block, 1, 1};
}

void Launch::setBytes(int i, uint64_t bytes) {
  if (config.bufferBytes.size() <= static_cast<size_t>(i))
    config.bufferBytes.resize(static_cast<size_t>(i) + 1, 0);
  config.bufferBytes[static_cast<size_t>(i)] = bytes;
}

void Launch::run(const EmuModule &module, const std::string &kernel) const {
  module.launch(kernel, config, params);
}

std::string Launch::error(const EmuModule &module,
                          const std::string &kernel) const {
  try {
    module.launch(kernel, config, params);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

float roundToTf32(float x) {
  if (!std::isfinite(x) || x == 0)
    return x;
  int e;
  std::frexp(x, &e); // |x| in [2^(e-1), 2^e)
  // Subnormals keep the top 10 of their 23 fraction bits: units of 2^-136.
  const double ulp = std::ldexp(1.0, std::max(e - 11, -136));
  double r = std::floor(std::fabs(double(x)) / ulp + 0.5) * ulp;
  if (r >= 0x1p128)
    r = INFINITY;
  return static_cast<float>(std::copysign(r, double(x)));
}

float roundToBf16(float x) { return bf16ToFloat(bf16FromFloat(x)); }

uint16_t toBf16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return static_cast<uint16_t>(bits >> 16);
}

float fromBf16Bits(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

} // namespace moec::emu::test
