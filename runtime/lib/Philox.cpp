//===- Philox.cpp - counter-based random numbers --------------------------===//

#include "Philox.h"

#include <algorithm>
#include <cmath>

namespace moec {

namespace {

/// The ten rounds, inlined into each caller below (a block is about 50
/// instructions; the call and the arrays through memory cost as much).
inline PhiloxBlock philoxRounds(PhiloxBlock c, PhiloxKey k) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
#pragma GCC unroll 10
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kMul0) * c[0];
    uint64_t p1 = static_cast<uint64_t>(kMul1) * c[2];
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k = {k[0] + kWeyl0, k[1] + kWeyl1};
  }
  return c;
}

inline PhiloxBlock blockOf(uint64_t seed, uint64_t stream, uint64_t block) {
  PhiloxBlock counter = {static_cast<uint32_t>(block),
                         static_cast<uint32_t>(block >> 32),
                         static_cast<uint32_t>(stream),
                         static_cast<uint32_t>(stream >> 32)};
  PhiloxKey key = {static_cast<uint32_t>(seed),
                   static_cast<uint32_t>(seed >> 32)};
  return philoxRounds(counter, key);
}

} // namespace

PhiloxBlock philox4x32(PhiloxBlock c, PhiloxKey k) {
  return philoxRounds(c, k);
}

PhiloxBlock philoxBlock(uint64_t seed, uint64_t stream, uint64_t block) {
  return blockOf(seed, stream, block);
}

void philoxBlocks(uint64_t seed, uint64_t stream, uint64_t first, int64_t count,
                  uint32_t *words) {
  for (int64_t b = 0; b < count; ++b) {
    PhiloxBlock w = blockOf(seed, stream, first + static_cast<uint64_t>(b));
    std::copy(w.begin(), w.end(), words + 4 * b);
  }
}

double uniformFromWord(uint32_t word) {
  return static_cast<double>(word >> 8) * (1.0 / 16777216.0);
}

double normalFromWords(uint32_t first, uint32_t second) {
  // u1 in (0, 1] keeps the logarithm finite.
  double u1 = static_cast<double>((first >> 8) + 1) * (1.0 / 16777216.0);
  double u2 = uniformFromWord(second);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

double philoxUniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return uniformFromWord(philoxBlock(seed, stream, index / 4)[index % 4]);
}

double philoxNormal(uint64_t seed, uint64_t stream, uint64_t index) {
  PhiloxBlock words = philoxBlock(seed, stream, index / 2);
  int first = 2 * static_cast<int>(index % 2);
  return normalFromWords(words[first], words[first + 1]);
}

uint64_t streamId(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

} // namespace moec
