//===- CpuDevice.cpp - the reference device -------------------------------===//
//
// Host memory and one reference kernel per plan step, in plan order. This is
// the oracle every other device is compared against.
//
//===----------------------------------------------------------------------===//

#include "CpuDevice.h"
#include "Bf16Staging.h"
#include "HiddenCache.h"
#include "Kernel.h"
#include "kernels/Common.h"
#include "kernels/Kernels.h"
#include "moec/Error.h"
#include "moec/support/MoeDefs.h"
#include "moec/support/Stopwatch.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <string_view>

namespace moec::detail {

namespace {

class CpuBuffer : public DeviceBuffer {
public:
  CpuBuffer(DType dtype, const Shape &shape)
      : DeviceBuffer(dtype, shape), tensor(dtype, shape) {}
  /// A view of `storage`'s elements.
  explicit CpuBuffer(Tensor storage)
      : DeviceBuffer(storage.dtype(), storage.shape()),
        tensor(std::move(storage)) {}
  Tensor tensor;
};

CpuBuffer &cpuBuffer(DeviceBuffer &b) { return static_cast<CpuBuffer &>(b); }
const CpuBuffer &cpuBuffer(const DeviceBuffer &b) {
  return static_cast<const CpuBuffer &>(b);
}

class CpuDevice : public Device {
public:
  std::string name() const override { return "cpu"; }

  std::unique_ptr<DeviceBuffer> allocate(DType dtype,
                                         const Shape &shape) override {
    return std::make_unique<CpuBuffer>(dtype, shape);
  }

  std::unique_ptr<DeviceBuffer> alias(DeviceBuffer &of,
                                      const Shape &shape) override {
    return std::make_unique<CpuBuffer>(cpuBuffer(of).tensor.reshaped(shape));
  }

  std::unique_ptr<DeviceBuffer> adopt(Tensor value) override {
    return std::make_unique<CpuBuffer>(std::move(value));
  }

  void upload(DeviceBuffer &dst, const Tensor &src) override {
    checkSameLayout(dst, src.dtype(), src.shape(), "upload");
    std::memcpy(cpuBuffer(dst).tensor.raw(), src.raw(), src.nbytes());
  }

  Tensor download(const DeviceBuffer &src) override {
    const Tensor &t = cpuBuffer(src).tensor;
    Tensor copy(t.dtype(), t.shape());
    std::memcpy(copy.raw(), t.raw(), t.nbytes());
    return copy;
  }

  void copy(DeviceBuffer &dst, const DeviceBuffer &src) override {
    checkSameLayout(dst, src.dtype, src.shape, "copy");
    std::memcpy(cpuBuffer(dst).tensor.raw(), cpuBuffer(src).tensor.raw(),
                cpuBuffer(src).tensor.nbytes());
  }

  void prepare(const ProgramDesc &program) override {
    for (const StepDesc &step : program.steps)
      if (!cpu::lookupKernel(step.op))
        throw Error(fmt::format("program '{}': the cpu device has no kernel "
                                "for '{}'",
                                program.name, step.op));
  }

  void run(const ProgramDesc &program, const SymbolValues &,
           const std::vector<DeviceBuffer *> &buffers) override {
    auto view = [&](int64_t id) {
      if (id < 0 || !buffers[id])
        return TensorView();
      return cpuBuffer(*buffers[id]).tensor.view();
    };
    // The expert FFN's saved hidden layers live for this run only.
    struct ClearAtEnd {
      cpu::HiddenCache &cache;
      ~ClearAtEnd() { cache.clear(); }
    } clearAtEnd{hidden};
    hidden.clear();
    // Steps from the first gradient op on are the backward pass; programs
    // without one (eval, generation) save no hidden layers.
    const size_t firstGrad = firstGradientStep(program);
    bool saveHidden = firstGrad < program.steps.size();
    for (size_t i = 0; i < program.steps.size(); ++i) {
      const StepDesc &step = program.steps[i];
      cpu::KernelContext ctx{step.op, {}, {}, cpu::Attrs(*step.attrs, step.op),
                             nullptr, {}};
      for (int64_t id : step.in)
        ctx.inputs.push_back(view(id));
      for (int64_t id : step.out)
        ctx.outputs.push_back(view(id));
      ctx.hidden = saveHidden ? &hidden : nullptr;
      try {
        auto start = std::chrono::steady_clock::now();
        if (!(step.op == defs::ops::cast::kName && cpu::castWithBf16(ctx))) {
          cpu::Bf16Staging bf16(ctx, stagingPool);
          cpu::lookupKernel(step.op)(ctx);
          bf16.finish();
        }
        // Writing over a saved forward's operands ends its entry.
        for (int64_t id : step.out)
          hidden.invalidate(view(id));
        if (!profiling)
          continue;
        double seconds = support::secondsSince(start);
        OpProfile &entry = ops[step.op];
        ++entry.calls;
        entry.seconds += seconds;
        OpProfile &layer = layers[{step.loc, i >= firstGrad}];
        ++layer.calls;
        layer.seconds += seconds;
      } catch (const Error &e) {
        throw Error(fmt::format("{} (program '{}', step {}{})", e.what(),
                                program.name, i,
                                step.loc.empty() ? "" : ", from " + step.loc));
      }
    }
  }

private:
  cpu::HiddenCache hidden;
  /// bf16 models' f32 copies, kept between steps so that widening an
  /// operand does not page-fault fresh memory every time.
  cpu::BlockPool stagingPool;
};

} // namespace

std::unique_ptr<Device> createCpuDevice() {
  return std::make_unique<CpuDevice>();
}

} // namespace moec::detail
