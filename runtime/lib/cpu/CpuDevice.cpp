//===- CpuDevice.cpp - the reference device -------------------------------===//
//
// Host memory and one reference kernel per plan step, in plan order. This is
// the oracle every other device is compared against.
//
//===----------------------------------------------------------------------===//

#include "CpuDevice.h"
#include "HiddenCache.h"
#include "Kernel.h"
#include "kernels/Common.h"
#include "kernels/Kernels.h"
#include "moec/Error.h"
#include "moec/support/MoeDefs.h"

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

/// bf16 storage on the cpu device: a step whose operands include bf16
/// tensors runs its f32 kernel on f32 copies, and each bf16 result is
/// rounded back (to nearest even) once, as a GPU kernel computing in f32
/// rounds when it stores. The kernels themselves know only f32 and f64.
class Bf16Staging {
public:
  /// Swaps every bf16 view of `ctx` for an f32 copy of its contents.
  explicit Bf16Staging(cpu::KernelContext &ctx) {
    // Copies live for one step: what outlives it (the hidden layers) is
    // keyed by the inputs' own storage.
    if (std::any_of(ctx.inputs.begin(), ctx.inputs.end(), isBf16))
      ctx.storedInputs = ctx.inputs;
    for (TensorView &v : ctx.inputs)
      stage(v, false);
    for (TensorView &v : ctx.outputs)
      stage(v, true);
  }
  /// Rounds the f32 results into their bf16 buffers.
  void finish() {
    for (Staged &s : staged) {
      if (!s.output)
        continue;
      const int64_t n = s.copy.numel();
      const float *from = s.copy.data<float>();
      uint16_t *to = s.original.as<uint16_t>();
#pragma omp parallel for schedule(static) if (n >= cpu::kMinParallelWork)
      for (int64_t i = 0; i < n; ++i)
        to[i] = bf16FromFloat(from[i]);
    }
  }

private:
  struct Staged {
    TensorView original;
    Tensor copy;
    bool output;
  };

  static bool isBf16(const TensorView &v) {
    return v.present() && v.dtype == DType::BF16;
  }

  void stage(TensorView &v, bool output) {
    if (!isBf16(v))
      return;
    Tensor copy(DType::F32, v.shape);
    const int64_t n = copy.numel();
    const uint16_t *bits = v.as<uint16_t>();
    float *to = copy.data<float>();
#pragma omp parallel for schedule(static) if (n >= cpu::kMinParallelWork)
    for (int64_t i = 0; i < n; ++i)
      to[i] = bf16ToFloat(bits[i]);
    TensorView original = v;
    v = copy.view();
    staged.push_back({original, std::move(copy), output});
  }

  std::vector<Staged> staged;
};

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
      cpu::KernelContext ctx{step.op, {}, {}, cpu::Attrs(step.attrs, step.op)};
      for (int64_t id : step.in)
        ctx.inputs.push_back(view(id));
      for (int64_t id : step.out)
        ctx.outputs.push_back(view(id));
      ctx.hidden = saveHidden ? &hidden : nullptr;
      try {
        auto start = std::chrono::steady_clock::now();
        if (!(step.op == defs::ops::cast::kName && cpu::castWithBf16(ctx))) {
          Bf16Staging bf16(ctx);
          cpu::lookupKernel(step.op)(ctx);
          bf16.finish();
        }
        // Writing over a saved forward's operands ends its entry.
        for (int64_t id : step.out)
          hidden.invalidate(view(id));
        if (!profiling)
          continue;
        double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start)
                             .count();
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
};

} // namespace

std::unique_ptr<Device> createCpuDevice() {
  return std::make_unique<CpuDevice>();
}

} // namespace moec::detail
