//===- Initializers.cpp - parameter initial values ------------------------===//

#include "Initializers.h"
#include "Orthogonal.h"
#include "moec/Error.h"
#include "moec/support/MoeDefs.h"
#include "Philox.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <optional>
#include <vector>

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

/// Standard normals 4 block .. 4 block + 3 of the stream: both Box-Muller
/// normals of its block's words (0, 1) and (2, 3).
void standardNormals(uint64_t seed, uint64_t stream, int64_t block,
                     double (&out)[4]) {
  PhiloxBlock w = philoxBlock(seed, stream, block);
  normalPairFromWords(w[0], w[1], out[0], out[1]);
  normalPairFromWords(w[2], w[3], out[2], out[3]);
}

/// Elements i .. i + 3 (i a multiple of 4) of the parameter's initial value.
void valuesAt(defs::Init init, const ParamInfo &param, uint64_t seed,
              uint64_t stream, double bound, int64_t i, double (&out)[4]) {
  switch (init) {
  case defs::Init::Zeros:
    return;
  case defs::Init::Ones:
    std::fill(out, out + 4, 1.0);
    return;
  case defs::Init::Normal:
    standardNormals(seed, stream, i / 4, out);
    for (double &v : out)
      v *= param.scale;
    return;
  case defs::Init::Uniform:
  case defs::Init::XavierUniform: {
    PhiloxBlock w = philoxBlock(seed, stream, i / 4);
    for (int j = 0; j < 4; ++j)
      out[j] = bound * (2.0 * uniformFromWord(w[j]) - 1.0);
    return;
  }
  case defs::Init::Sinusoidal:
    for (int j = 0; j < 4; ++j)
      out[j] = sinusoid(i + j, param.shape.back());
    return;
  case defs::Init::Orthogonal:
    return; // a whole-matrix initialiser: see orthogonalValue
  }
}

/// torch.nn.init.orthogonal_ with gain `scale`: the first dimension is the
/// rows, the others flattened are the columns, and the normals are the
/// stream's standard normals in flat order (those `normal` would draw).
std::vector<double> orthogonalValue(const ParamInfo &param, uint64_t seed,
                                    uint64_t stream, int64_t n) {
  const int64_t rows = param.shape.front(), cols = rows ? n / rows : 0;
  std::vector<double> a(n);
  for (int64_t b = 0; 4 * b < n; ++b) {
    double normals[4];
    standardNormals(seed, stream, b, normals);
    std::copy(normals, normals + std::min<int64_t>(4, n - 4 * b), &a[4 * b]);
  }
  std::vector<double> q = orthogonalFactor(a, rows, cols);
  for (double &v : q)
    v *= param.scale;
  return q;
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
  std::vector<double> whole;
  if (*init == defs::Init::Orthogonal) {
    if (param.shape.size() < 2)
      throw Error(fmt::format("parameter '{}': orthogonal needs rank >= 2",
                              param.name));
    whole = orthogonalValue(param, seed, stream, n);
  }
  // Values come four at a time from one Philox block;
  // chunks of blocks are drawn in parallel, each value still a function of
  // its index alone.
  auto fill = [&](auto *out, auto convert) {
    constexpr int64_t kChunk = 4096; // elements, a multiple of 4
    const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
      for (int64_t i = begin; i < end; i += 4) {
        double v[4] = {0, 0, 0, 0};
        if (!whole.empty())
          std::copy(whole.begin() + i, whole.begin() + std::min(n, i + 4), v);
        else
          valuesAt(*init, param, seed, stream, bound, i, v);
        for (int64_t j = i; j < std::min(end, i + 4); ++j)
          out[j] = convert(v[j - i]);
      }
    }
  };
  switch (param.dtype) {
  case DType::F32:
    fill(t.data<float>(), [](double v) { return static_cast<float>(v); });
    break;
  case DType::F64:
    fill(t.data<double>(), [](double v) { return v; });
    break;
  case DType::BF16:
    fill(t.data<uint16_t>(),
         [](double v) { return bf16FromFloat(static_cast<float>(v)); });
    break;
  default:
    throw Error(fmt::format("parameter '{}': cannot initialise a {} tensor",
                            param.name, dtypeName(param.dtype)));
  }
  return t;
}

} // namespace moec::detail
