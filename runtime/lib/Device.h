//===- Device.h - where programs run ----------------------------*- C++ -*-===//
//
// A device owns buffer storage and runs whole programs over it. The cpu
// device runs a plan step by step with the reference kernels; the cuda and
// emu devices run the generated kernels that cover the same steps. Sessions
// only talk to this interface.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_DEVICE_H
#define MOEC_RUNTIME_DEVICE_H

#include "BundleData.h"
#include "moec/Tensor.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace moec::detail {

/// Time spent per op kind while profiling is on.
struct OpProfile {
  int64_t calls = 0;
  double seconds = 0;
};

/// Storage for one buffer on a device, zero-initialised.
class DeviceBuffer {
public:
  DeviceBuffer(DType dtype, Shape shape)
      : dtype(dtype), shape(std::move(shape)) {}
  virtual ~DeviceBuffer();
  const DType dtype;
  const Shape shape;
};

/// Throws an internal error unless `dst` has this dtype and shape; `what`
/// names the transfer ("upload", "copy").
void checkSameLayout(const DeviceBuffer &dst, DType dtype, const Shape &shape,
                     const char *what);

class Device {
public:
  virtual ~Device();
  /// "cpu", "cuda", "emu".
  virtual std::string name() const = 0;
  virtual std::unique_ptr<DeviceBuffer> allocate(DType dtype,
                                                 const Shape &shape) = 0;
  /// A buffer of `shape` (as many elements as `of`, same dtype) over the
  /// storage of `of`, which must outlive it: a plan's view.
  virtual std::unique_ptr<DeviceBuffer> alias(DeviceBuffer &of,
                                              const Shape &shape) = 0;
  virtual void upload(DeviceBuffer &dst, const Tensor &src) = 0;
  /// A new buffer holding `value`: allocate and upload, except where the
  /// device can keep the host storage itself (cpu).
  virtual std::unique_ptr<DeviceBuffer> adopt(Tensor value) {
    std::unique_ptr<DeviceBuffer> buffer =
        allocate(value.dtype(), value.shape());
    upload(*buffer, value);
    return buffer;
  }
  virtual Tensor download(const DeviceBuffer &src) = 0;
  virtual void copy(DeviceBuffer &dst, const DeviceBuffer &src) = 0;
  /// Gives the device the bundle whose programs it will run (the generated
  /// kernels live there); called once, before any prepare().
  virtual void setBundle(const BundleData &bundle) {}
  /// Checks, once per program, that this device can run every step.
  virtual void prepare(const ProgramDesc &program) = 0;
  /// Runs `program` with its symbols bound to `symbols`; `buffers[i]` holds
  /// buffer i, or is null when nothing this device runs touches it. Errors
  /// name the program, the step (or kernel) and its op.
  virtual void run(const ProgramDesc &program, const SymbolValues &symbols,
                   const std::vector<DeviceBuffer *> &buffers) = 0;

  /// `program` is going away, and another program may later live at its
  /// address: drop what the device keeps for it (cuda: its CUDA graph).
  virtual void forget(const ProgramDesc &program) {}

  /// Whether the device runs the plan's semantic steps (cpu) or its fused
  /// groups (cuda, emu); decides which buffers need storage.
  virtual bool runsGroups() const { return false; }

  /// Starts (or stops) timing each step by op; the device's own unit of
  /// work (a kernel, a fused group) decides what "op" means.
  void setProfiling(bool on) { profiling = on; }
  const std::map<std::string, OpProfile> &profile() const { return ops; }
  /// The same time by the source location of each step and whether it ran
  /// before the program's first gradient op (forward) or from it on
  /// (backward). Devices that run fused groups (cuda) count a group at the
  /// location of its first located step, as `moec compile --report` does.
  const std::map<std::pair<std::string, bool>, OpProfile> &
  layerProfile() const {
    return layers;
  }

  /// Seconds the host has spent waiting for asynchronous device work since
  /// the device was made (0 for synchronous devices).
  double waitSeconds() const { return waited; }

protected:
  /// Adds one timed launch of `kernel`, a launch of fused group `group`, to
  /// the profile by kernel and by location (see groupProfileKey).
  void recordLaunch(const ProgramDesc &program, size_t group,
                    const std::string &kernel, size_t firstGrad,
                    double seconds);

  bool profiling = false;
  double waited = 0;
  std::map<std::string, OpProfile> ops;
  std::map<std::pair<std::string, bool>, OpProfile> layers;
};

/// The index of the first step of `program` that computes a gradient (an
/// op named *_grad), or the number of steps when none does: the steps from
/// it on are the backward pass.
size_t firstGradientStep(const ProgramDesc &program);

/// Where a fused group's time goes in Device::layerProfile: the location of
/// its first located step (as `moec compile --report` places it), backward
/// when its first step is at or after `firstGrad`.
std::pair<std::string, bool> groupProfileKey(const ProgramDesc &program,
                                             size_t group, size_t firstGrad);

/// The device called `name`; throws moec::Error for an unknown or
/// unavailable one, saying why.
std::unique_ptr<Device> createDevice(const std::string &name);

} // namespace moec::detail

#endif // MOEC_RUNTIME_DEVICE_H
