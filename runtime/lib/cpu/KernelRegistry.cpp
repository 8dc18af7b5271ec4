//===- KernelRegistry.cpp - the table of cpu kernels ----------------------===//

#include "KernelRegistry.h"

namespace moec::cpu {

const std::vector<KernelEntry> &kernelTable() {
  static const std::vector<KernelEntry> table = {};
  return table;
}

} // namespace moec::cpu
