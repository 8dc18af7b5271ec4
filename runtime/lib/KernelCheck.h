//===- KernelCheck.h - the kernel check over two devices --------*- C++ -*-===//
//
// moec/KernelCheck.h creates the devices by name; tests that plant bugs
// build their own device under test and call this directly.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_KERNELCHECK_H
#define MOEC_RUNTIME_KERNELCHECK_H

#include "BundleData.h"
#include "Device.h"
#include "moec/KernelCheck.h"

namespace moec::detail {

/// Checks `subject` (a device that runs groups, already given `bundle`)
/// against `reference` (the cpu device).
KernelCheckReport checkKernels(const BundleData &bundle, Device &reference,
                               Device &subject,
                               const KernelCheckOptions &options);

} // namespace moec::detail

#endif // MOEC_RUNTIME_KERNELCHECK_H
