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

void checkSameLayout(const DeviceBuffer &dst, DType dtype, const Shape &shape,
                     const char *what) {
  if (dst.dtype != dtype || dst.shape != shape)
    throw Error(fmt::format("internal error: {} of a {} {} tensor into a {} {} "
                            "buffer",
                            what, dtypeName(dtype), shapeString(shape),
                            dtypeName(dst.dtype), shapeString(dst.shape)));
}

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
