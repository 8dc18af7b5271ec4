//===- Initializers.cpp - parameter initial values ------------------------===//

#include "Initializers.h"
#include "moec/Error.h"
#include "moec/support/MoeDefs.h"
#include "Philox.h"

#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <optional>

namespace moec::detail {

namespace {

/// Element i of a [L, d] sinusoidal table in fairseq's layout (sin block,
/// then cos block; see Init::Sinusoidal).
double sinusoid(int64_t i, int64_t width) {
  int64_t p = i / width, c = i % width, half = width / 2;
  if (c >= 2 * half)
    return 0.0; // the odd width's last column
  int64_t f = c % half;
  double rate = half > 1 ? std::log(10000.0) / static_cast<double>(half - 1)
                         : 0.0;
  double angle = static_cast<double>(p) * std::exp(-static_cast<double>(f) *
                                                   rate);
  return c < half ? std::sin(angle) : std::cos(angle);
}

} // namespace

Tensor initialValue(const ParamInfo &param, uint64_t seed) {
  Tensor t(param.dtype, param.shape);
  const int64_t n = t.numel();
  const uint64_t stream = streamId(param.name);
  std::optional<defs::Init> init = defs::parseInit(param.init);
  if (!init)
    throw Error(fmt::format("parameter '{}': unknown initialiser \"{}\"",
                            param.name, param.init));
  double bound = param.scale;
  if (*init == defs::Init::XavierUniform) {
    int64_t fanIn = param.shape[param.shape.size() - 2];
    int64_t fanOut = param.shape.back();
    bound = param.scale * std::sqrt(6.0 / static_cast<double>(fanIn + fanOut));
  }
  auto value = [&](int64_t i) -> double {
    switch (*init) {
    case defs::Init::Zeros:
      return 0.0;
    case defs::Init::Ones:
      return 1.0;
    case defs::Init::Normal:
      return param.scale * philoxNormal(seed, stream, i);
    case defs::Init::Uniform:
    case defs::Init::XavierUniform:
      return bound * (2.0 * philoxUniform(seed, stream, i) - 1.0);
    case defs::Init::Sinusoidal:
      return sinusoid(i, param.shape.back());
    }
    return 0.0;
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
