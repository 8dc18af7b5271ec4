//===- CudaDevice.h - generated kernels on an NVIDIA GPU --------*- C++ -*-===//
//
// The cuda device runs a program's fused groups: each launch's kernel is
// compiled by NVRTC for the GPU's exact architecture (through the kernel
// cache), loaded once, and launched on the device's one stream. A program
// that runs again with the same sizes and buffers replays a CUDA graph.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CUDA_CUDADEVICE_H
#define MOEC_RUNTIME_CUDA_CUDADEVICE_H

#include "Device.h"

#include <memory>

namespace moec::detail::cuda {

/// A Device on GPU 0. Thread-compatible, like every device.
class CudaDevice : public Device {
public:
  /// "sm_80", "sm_90": what kernels are compiled for.
  virtual const std::string &arch() const = 0;
};

/// The cuda device. Throws moec::Error when there is no usable CUDA driver,
/// no GPU, or no NVRTC, saying what to install or to use instead.
/// $MOEC_CUDA_GRAPHS=0 turns graph replay off; $MOEC_CUDA_SYNC=1 waits for
/// every launch, so that a failing kernel is named exactly.
std::unique_ptr<CudaDevice> createCudaDevice();

} // namespace moec::detail::cuda

#endif // MOEC_RUNTIME_CUDA_CUDADEVICE_H
