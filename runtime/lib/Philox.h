//===- Philox.h - counter-based random numbers -----------------*- C++ -*-===//
//
// Philox-4x32-10 (Salmon et al., SC'11). Every random number moec draws is a
// pure function of (seed, stream, index), so parameter initialisation and
// dropout masks are identical on every device and in every thread order.
// The same functions are compiled into the CUDA device library.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_PHILOX_H
#define MOEC_RUNTIME_PHILOX_H

#include <array>
#include <cstdint>
#include <string_view>

namespace moec {

using PhiloxBlock = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

/// Ten rounds of Philox-4x32 on `counter` with `key`.
PhiloxBlock philox4x32(PhiloxBlock counter, PhiloxKey key);

/// The i-th uniform in [0, 1) of the stream keyed by (seed, stream): the
/// counter is (i / 4 low, i / 4 high, stream low, stream high), the key the
/// two halves of seed, and the result word i % 4 scaled by 2^-32 (24-bit
/// mantissa so that it converts exactly to float).
double philoxUniform(uint64_t seed, uint64_t stream, uint64_t index);

/// The i-th standard normal of the stream, by Box-Muller on uniforms 2i and
/// 2i + 1 of the stream.
double philoxNormal(uint64_t seed, uint64_t stream, uint64_t index);

/// Block `block` of the stream: uniforms 4 block .. 4 block + 3 are its
/// words through uniformFromWord, and normals 2 block and 2 block + 1 are
/// normalFromWords of words (0, 1) and (2, 3); the two functions above
/// compute one block per number. Initialisers draw whole blocks, and take
/// both normals of each pair of words (boxMullerPairs, BoxMuller.h).
PhiloxBlock philoxBlock(uint64_t seed, uint64_t stream, uint64_t block);
double uniformFromWord(uint32_t word);
double normalFromWords(uint32_t first, uint32_t second);

/// Blocks first .. first + count - 1 of the stream, word after word, into
/// words[0 .. 4 count - 1] (one call, so that the rounds are inlined).
void philoxBlocks(uint64_t seed, uint64_t stream, uint64_t first, int64_t count,
                  uint32_t *words);

/// A stable 64-bit stream id for a name (FNV-1a), e.g. a parameter's name.
uint64_t streamId(std::string_view name);

} // namespace moec

#endif // MOEC_RUNTIME_PHILOX_H
