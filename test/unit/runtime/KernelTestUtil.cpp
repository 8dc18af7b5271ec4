//===- KernelTestUtil.cpp - running cpu kernels from tests ----------------===//

#include "KernelTestUtil.h"

#include "cpu/Kernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <limits>
#include <numeric>
#include <random>

namespace moec::test {

static void poison(const Tensor &t) {
  void *data = const_cast<void *>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.dtype() == DType::F32)
      static_cast<float *>(data)[i] = std::numeric_limits<float>::quiet_NaN();
    else if (t.dtype() == DType::F64)
      static_cast<double *>(data)[i] = std::numeric_limits<double>::quiet_NaN();
  }
  if (t.dtype() != DType::F32 && t.dtype() != DType::F64)
    std::memset(data, 0x5a, t.nbytes());
}

std::vector<Tensor> runKernel(std::string_view op,
                              const std::vector<Tensor> &inputs,
                              const std::vector<Tensor> &outputs,
                              const Json &attrs, cpu::HiddenCache *hidden) {
  cpu::KernelFn fn = cpu::lookupKernel(op);
  if (!fn) {
    ADD_FAILURE() << "no cpu kernel for " << op;
    return outputs;
  }
  cpu::KernelContext ctx{op, {}, {}, cpu::Attrs(attrs, op), hidden, {}};
  for (const Tensor &t : inputs)
    ctx.inputs.push_back(t.empty() ? TensorView() : t.view());
  for (const Tensor &t : outputs) {
    ctx.outputs.push_back(t.empty() ? TensorView() : t.view());
    // Plans reuse buffers: poison outputs (unless updated in place) so an
    // element the kernel forgets to write shows up as NaN or a sentinel.
    bool inPlace =
        std::any_of(inputs.begin(), inputs.end(), [&](const Tensor &in) {
          return !in.empty() && in.raw() == t.raw();
        });
    if (!t.empty() && !inPlace)
      poison(t);
  }
  fn(ctx);
  return outputs;
}

Tensor runKernel1(std::string_view op, const std::vector<Tensor> &inputs,
                  const Tensor &output, const Json &attrs) {
  return runKernel(op, inputs, {output}, attrs)[0];
}

Tensor like(const Tensor &t) { return Tensor(t.dtype(), t.shape()); }

Tensor zeros(DType dtype, Shape shape) {
  return Tensor(dtype, std::move(shape));
}

Tensor randomTensor(DType dtype, Shape shape, unsigned seed, double lo,
                    double hi) {
  Tensor t(dtype, std::move(shape));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = dist(gen);
    if (dtype == DType::F32)
      t.data<float>()[i] = static_cast<float>(v);
    else
      t.data<double>()[i] = v;
  }
  return t;
}

Tensor scalarI64(int64_t value) { return Tensor::of<int64_t>({}, {value}); }
Tensor scalarF32(float value) { return Tensor::of<float>({}, {value}); }
Tensor scalarF64(double value) { return Tensor::of<double>({}, {value}); }

Tensor convert(const Tensor &t, DType dtype) {
  Tensor out(dtype, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = t.at(i);
    if (dtype == DType::F32)
      out.data<float>()[i] = static_cast<float>(v);
    else
      out.data<double>()[i] = v;
  }
  return out;
}

Tensor clone(const Tensor &t) {
  Tensor out(t.dtype(), t.shape());
  std::memcpy(out.raw(), t.raw(), t.nbytes());
  return out;
}

std::vector<double> values(const Tensor &t) {
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i)
    v[i] = t.at(i);
  return v;
}

double dotProduct(const Tensor &a, const Tensor &b) {
  EXPECT_EQ(a.numel(), b.numel());
  double s = 0;
  for (int64_t i = 0; i < std::min(a.numel(), b.numel()); ++i)
    s += a.at(i) * b.at(i);
  return s;
}

double &elementF64(Tensor &t, int64_t i) { return t.data<double>()[i]; }

void expectValues(const Tensor &actual, const std::vector<double> &expected,
                  double tol, const std::string &what) {
  ASSERT_EQ(actual.numel(), static_cast<int64_t>(expected.size())) << what;
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(actual.at(i), expected[i], tol) << what << " element " << i;
}

void expectClose(const Tensor &a, const Tensor &b, double rel,
                 const std::string &what) {
  ASSERT_EQ(a.numel(), b.numel()) << what;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.at(i), y = b.at(i);
    double scale = std::max({std::fabs(x), std::fabs(y), 1.0});
    EXPECT_LE(std::fabs(x - y), rel * scale)
        << what << " element " << i << ": " << x << " vs " << y;
  }
}

void expectGradient(const std::function<double()> &loss, Tensor wrt,
                    const Tensor &analytic, const std::string &what,
                    int64_t maxSamples, double h, double tol) {
  ASSERT_EQ(wrt.dtype(), DType::F64) << what;
  ASSERT_EQ(analytic.numel(), wrt.numel()) << what;
  std::vector<int64_t> indices(wrt.numel());
  std::iota(indices.begin(), indices.end(), 0);
  if (wrt.numel() > maxSamples) {
    std::mt19937 gen(1234);
    std::shuffle(indices.begin(), indices.end(), gen);
    indices.resize(maxSamples);
  }
  for (int64_t i : indices) {
    double &x = elementF64(wrt, i);
    double saved = x;
    x = saved + h;
    double plus = loss();
    x = saved - h;
    double minus = loss();
    x = saved;
    double numeric = (plus - minus) / (2 * h);
    double a = analytic.at(i);
    double err = std::fabs(a - numeric) /
                 std::max({std::fabs(a), std::fabs(numeric), 1e-3});
    EXPECT_LT(err, tol) << what << " element " << i << ": analytic " << a
                        << ", numeric " << numeric;
  }
}

} // namespace moec::test
