//===- Device.cpp - choosing a device by name -----------------------------===//

#include "Device.h"
#include "cpu/CpuDevice.h"
#include "cuda/CudaDevice.h"
#include "emu/EmuDevice.h"
#include "moec/Error.h"

#include <fmt/format.h>

namespace moec::detail {

DeviceBuffer::~DeviceBuffer() = default;
Device::~Device() = default;

std::unique_ptr<Device> createDevice(const std::string &name) {
  if (name == "cpu")
    return createCpuDevice();
  if (name == "cuda")
    return cuda::createCudaDevice();
  if (name == "emu")
    return emu::createEmuDevice(emu::emuOptionsFromEnvironment());
  throw Error(fmt::format("unknown device '{}' (cpu, cuda or emu)", name));
}

} // namespace moec::detail
