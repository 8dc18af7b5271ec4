//===- KernelTestUtil.h - running cpu kernels from tests -------*- C++ -*-===//
//
// Builds KernelContexts from owning Tensors and a JSON attribute object, and
// checks gradients against central finite differences.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TEST_UNIT_RUNTIME_KERNELTESTUTIL_H
#define MOEC_TEST_UNIT_RUNTIME_KERNELTESTUTIL_H

#include "moec/Tensor.h"

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace moec::cpu {
class HiddenCache;
} // namespace moec::cpu

namespace moec::test {

using Json = nlohmann::json;

/// An absent optional operand, or an output nobody reads.
inline Tensor absent() { return Tensor(); }

/// Runs the cpu kernel named `op` (fails the test if there is none) on
/// `inputs` into the preallocated `outputs` and returns `outputs`; with
/// `hidden`, as the cpu device runs it, sharing that cache.
std::vector<Tensor> runKernel(std::string_view op,
                              const std::vector<Tensor> &inputs,
                              const std::vector<Tensor> &outputs,
                              const Json &attrs = Json::object(),
                              cpu::HiddenCache *hidden = nullptr);

/// runKernel with one output, returned.
Tensor runKernel1(std::string_view op, const std::vector<Tensor> &inputs,
                  const Tensor &output, const Json &attrs = Json::object());

/// Zeros of the same dtype and shape.
Tensor like(const Tensor &t);
Tensor zeros(DType dtype, Shape shape);
/// Uniform values in [lo, hi) from a fixed-seed mt19937.
Tensor randomTensor(DType dtype, Shape shape, unsigned seed, double lo = -1.0,
                    double hi = 1.0);
Tensor scalarI64(int64_t value);
Tensor scalarF32(float value);
Tensor scalarF64(double value);
/// A deep copy, converted to `dtype` (f32 / f64).
Tensor convert(const Tensor &t, DType dtype);
/// A deep copy.
Tensor clone(const Tensor &t);

/// Every element as double.
std::vector<double> values(const Tensor &t);
/// sum_i a[i] * b[i] in double.
double dotProduct(const Tensor &a, const Tensor &b);
/// Element i of a f64 tensor, writable.
double &elementF64(Tensor &t, int64_t i);

/// Expects |actual - expected| <= tol elementwise.
void expectValues(const Tensor &actual, const std::vector<double> &expected,
                  double tol, const std::string &what);
/// Expects a and b to agree to `rel` relative to max(|a|, |b|, 1).
void expectClose(const Tensor &a, const Tensor &b, double rel,
                 const std::string &what);

/// Checks `analytic` (same shape as `wrt`, f64) against central differences
/// of `loss` when perturbing elements of the f64 tensor `wrt` in place: all
/// of them, or `maxSamples` fixed-seed random ones for larger tensors. The
/// relative error |a - n| / max(|a|, |n|, 1e-3) must be below `tol`.
void expectGradient(const std::function<double()> &loss, Tensor wrt,
                    const Tensor &analytic, const std::string &what,
                    int64_t maxSamples = 60, double h = 1e-6,
                    double tol = 1e-6);

} // namespace moec::test

#endif // MOEC_TEST_UNIT_RUNTIME_KERNELTESTUTIL_H
