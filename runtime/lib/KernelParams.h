//===- KernelParams.h - the host side of the kernel ABI ---------*- C++ -*-===//
//
// The one argument of every generated kernel, as the host fills it: the
// mirror of the device library's moec::KernelParams (prelude.cuh), sized by
// the ABI limits both get from the dialect's ODS (moec/support/MoeDefs.h,
// runtime/device/defs.cuh).
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_KERNELPARAMS_H
#define MOEC_RUNTIME_KERNELPARAMS_H

#include "moec/support/MoeDefs.h"

#include <cstdint>

namespace moec::detail {

using defs::kMaxKernelBuffers;
using defs::kMaxKernelScalars;

struct KernelParams {
  void *buffers[kMaxKernelBuffers] = {};
  int64_t scalars[kMaxKernelScalars] = {};
  /// The device's KernelStatusWords (KernelStatus.h); null: not listening.
  void *status = nullptr;
  /// 1 + the launch's position in its program (KernelStatusWords::launch).
  int64_t launchTag = 0;
};
static_assert(sizeof(KernelParams) == kMaxKernelBuffers * sizeof(void *) +
                                          kMaxKernelScalars * sizeof(int64_t) +
                                          sizeof(void *) + sizeof(int64_t),
              "KernelParams has no padding: the device reads it as raw "
              "bytes");

} // namespace moec::detail

#endif // MOEC_RUNTIME_KERNELPARAMS_H
