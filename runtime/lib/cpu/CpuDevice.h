//===- CpuDevice.h - the reference device -----------------------*- C++ -*-===//

#ifndef MOEC_RUNTIME_CPU_CPUDEVICE_H
#define MOEC_RUNTIME_CPU_CPUDEVICE_H

#include "Device.h"

namespace moec::detail {

std::unique_ptr<Device> createCpuDevice();

} // namespace moec::detail

#endif // MOEC_RUNTIME_CPU_CPUDEVICE_H
