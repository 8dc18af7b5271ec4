//===- KernelRegistry.h - the table of cpu kernels -------------*- C++ -*-===//

#ifndef MOEC_RUNTIME_CPU_KERNELREGISTRY_H
#define MOEC_RUNTIME_CPU_KERNELREGISTRY_H

#include "Kernel.h"

#include <vector>

namespace moec::cpu {

struct KernelEntry {
  std::string_view name;
  KernelFn fn;
};

/// Every kernel, defined in KernelRegistry.cpp from the per-family files.
const std::vector<KernelEntry> &kernelTable();

} // namespace moec::cpu

#endif // MOEC_RUNTIME_CPU_KERNELREGISTRY_H
