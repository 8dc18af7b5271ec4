//===- Initializers.cpp - parameter initial values ------------------------===//

#include "Initializers.h"
#include "BoxMuller.h"
#include "Orthogonal.h"
#include "Philox.h"
#include "moec/Error.h"
#include "moec/support/MoeDefs.h"

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

/// Standard normals 4 first .. 4 (first + blocks) - 1 of the stream into
/// `out`: both Box-Muller normals of each block's words (0, 1) and (2, 3).
void standardNormals(uint64_t seed, uint64_t stream, int64_t first,
                     int64_t blocks, double *out) {
  std::vector<uint32_t> words(4 * blocks);
  philoxBlocks(seed, stream, first, blocks, words.data());
  boxMullerPairs(words.data(), 2 * blocks, out);
}

/// Elements i .. i + 3 (i a multiple of 4) of the parameter's initial value
/// into out[0 .. 3], for the initialisers drawn four at a time.
void valuesAt(defs::Init init, const ParamInfo &param, uint64_t seed,
              uint64_t stream, double bound, int64_t i, double *out) {
  switch (init) {
  case defs::Init::Zeros:
    return;
  case defs::Init::Ones:
    std::fill(out, out + 4, 1.0);
    return;
  case defs::Init::Normal:
    return; // drawn a chunk at a time: see initialValue
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
  std::vector<double> a((n + 3) / 4 * 4);
  standardNormals(seed, stream, 0, (n + 3) / 4, a.data());
  a.resize(n);
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
  // Values come four at a time from one Philox block; chunks of blocks
  // are drawn in parallel, each value still a function of its index alone.
  auto fill = [&](auto *out, auto convert) {
    constexpr int64_t kChunk = 4096; // elements, a multiple of 4
    const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
      const int64_t blocks = (end - begin + 3) / 4;
      std::vector<double> v(4 * blocks, 0.0);
      if (!whole.empty()) {
        std::copy(whole.begin() + begin, whole.begin() + end, v.begin());
      } else if (*init == defs::Init::Normal) {
        standardNormals(seed, stream, begin / 4, blocks, v.data());
        for (double &x : v)
          x *= param.scale;
      } else {
        for (int64_t b = 0; b < blocks; ++b)
          valuesAt(*init, param, seed, stream, bound, begin + 4 * b, &v[4 * b]);
      }
      for (int64_t j = begin; j < end; ++j)
        out[j] = convert(v[j - begin]);
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
