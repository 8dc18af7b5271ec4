//===- Kernel.h - the cpu device's op kernels ------------------*- C++ -*-===//
//
// The cpu device runs a plan one semantic op at a time: each plan step names
// an MLIR op ("moe.linear", "arith.addf", ...) and this table maps the name
// to its reference kernel. Kernels compute in the dtype of their float
// operands (f32 or f64) and are the oracle every other device is compared
// with, so they favour a fixed, documented evaluation order over speed
// tricks that change results.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CPU_KERNEL_H
#define MOEC_RUNTIME_CPU_KERNEL_H

#include "moec/Error.h"
#include "moec/Tensor.h"

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace moec::cpu {

/// Read-only access to a step's attributes (a JSON object: numbers, strings
/// for enums, true for unit attributes, which are absent when unset).
class Attrs {
public:
  explicit Attrs(const nlohmann::json &json, std::string_view op)
      : json(json), op(op) {}

  bool has(std::string_view name) const;
  int64_t getInt(std::string_view name) const;
  int64_t getInt(std::string_view name, int64_t fallback) const;
  double getFloat(std::string_view name) const;
  double getFloat(std::string_view name, double fallback) const;
  /// A unit attribute: true when present.
  bool getFlag(std::string_view name) const;
  std::string getString(std::string_view name) const;

private:
  const nlohmann::json &lookup(std::string_view name) const;
  const nlohmann::json &json;
  std::string_view op;
};

/// One kernel invocation. `inputs` follow the op's ODS operand order with an
/// absent optional operand as a view without data; `outputs` follow the
/// result order, and an output nobody reads has no data (the kernel may skip
/// it). Output views are allocated by the caller with their final shapes.
class HiddenCache;

struct KernelContext {
  std::string_view op;
  std::vector<TensorView> inputs;
  std::vector<TensorView> outputs;
  Attrs attrs;
  /// Set by the cpu device for the expert FFN's forward and gradient to
  /// share the hidden layer within one program run (HiddenCache.h).
  HiddenCache *hidden = nullptr;
  /// The inputs as the device stores them, before bf16 staging swaps them
  /// for f32 copies (empty: `inputs` themselves): what HiddenCache keys
  /// on, since copies live for one step.
  std::vector<TensorView> storedInputs;

  /// Input i, or an absent view when the op has fewer inputs.
  const TensorView &in(size_t i) const {
    return i < inputs.size() ? inputs[i] : absent();
  }
  /// Output i, or an absent view when the op has fewer outputs.
  const TensorView &out(size_t i) const {
    return i < outputs.size() ? outputs[i] : absent();
  }
  static const TensorView &absent() {
    static const TensorView none;
    return none;
  }

  /// Throws a moec::Error prefixed with the op name.
  [[noreturn]] void fail(const std::string &message) const;
};

using KernelFn = void (*)(KernelContext &);

/// The kernel for an op name, or nullptr.
KernelFn lookupKernel(std::string_view opName);
/// All op names with a kernel, sorted.
std::vector<std::string> kernelNames();

} // namespace moec::cpu

#endif // MOEC_RUNTIME_CPU_KERNEL_H
