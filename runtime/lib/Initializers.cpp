//===- Initializers.cpp - parameter initial values ------------------------===//

#include "Initializers.h"
#include "moec/Error.h"
#include "Philox.h"

#include <cmath>
#include <cstring>
#include <fmt/format.h>

namespace moec::detail {

Tensor initialValue(const ParamInfo &param, uint64_t seed) {
  Tensor t(param.dtype, param.shape);
  const int64_t n = t.numel();
  const uint64_t stream = streamId(param.name);
  double bound = param.scale;
  if (param.init == "xavier_uniform") {
    int64_t fanIn = param.shape[param.shape.size() - 2];
    int64_t fanOut = param.shape.back();
    bound = param.scale * std::sqrt(6.0 / static_cast<double>(fanIn + fanOut));
  }
  auto value = [&](int64_t i) -> double {
    if (param.init == "zeros")
      return 0.0;
    if (param.init == "ones")
      return 1.0;
    if (param.init == "normal")
      return param.scale * philoxNormal(seed, stream, i);
    // uniform and xavier_uniform: U(-bound, bound).
    return bound * (2.0 * philoxUniform(seed, stream, i) - 1.0);
  };
  switch (param.dtype) {
  case DType::F32:
    for (int64_t i = 0; i < n; ++i)
      t.data<float>()[i] = static_cast<float>(value(i));
    break;
  case DType::F64:
    for (int64_t i = 0; i < n; ++i)
      t.data<double>()[i] = value(i);
    break;
  case DType::BF16:
    for (int64_t i = 0; i < n; ++i)
      t.data<uint16_t>()[i] = bf16FromFloat(static_cast<float>(value(i)));
    break;
  default:
    throw Error(fmt::format("parameter '{}': cannot initialise a {} tensor",
                            param.name, dtypeName(param.dtype)));
  }
  return t;
}

} // namespace moec::detail
