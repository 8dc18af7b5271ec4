//===- Device.cpp - choosing a device by name -----------------------------===//

#include "Device.h"
#include "cpu/CpuDevice.h"
#include "cuda/CudaDevice.h"
#include "emu/EmuDevice.h"
#include "moec/Error.h"

#include <fmt/format.h>
#include <string_view>

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

size_t firstGradientStep(const ProgramDesc &program) {
  constexpr std::string_view suffix = "_grad";
  for (size_t i = 0; i < program.steps.size(); ++i) {
    std::string_view op = program.steps[i].op;
    if (op.size() >= suffix.size() &&
        op.substr(op.size() - suffix.size()) == suffix)
      return i;
  }
  return program.steps.size();
}

std::pair<std::string, bool> groupProfileKey(const ProgramDesc &program,
                                             size_t group, size_t firstGrad) {
  const GroupDesc &g = program.groups[group];
  std::string loc;
  for (size_t s : g.steps)
    if (!program.steps[s].loc.empty()) {
      loc = program.steps[s].loc;
      break;
    }
  return {loc, !g.steps.empty() && g.steps.front() >= firstGrad};
}

void Device::recordLaunch(const ProgramDesc &program, size_t group,
                          const std::string &kernel, size_t firstGrad,
                          double seconds) {
  for (OpProfile *entry :
       {&ops[kernel], &layers[groupProfileKey(program, group, firstGrad)]}) {
    ++entry->calls;
    entry->seconds += seconds;
  }
}

} // namespace moec::detail
