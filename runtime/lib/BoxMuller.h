//===- BoxMuller.h - standard normals from Philox words ---------*- C++ -*-===//
//
// Initial weights are mostly normals: a 12-block model draws over a hundred
// million at start-up, where glibc's scalar log and sincos took most of the
// time. These loops compute the same Box-Muller transform with branch-free
// polynomials that the compiler vectorises; the file is built without
// contraction, so the AVX-512, AVX2 and baseline versions give the same
// bits, on every machine.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_BOXMULLER_H
#define MOEC_RUNTIME_BOXMULLER_H

#include <cstdint>

namespace moec {

/// For each pair i of words (first = words[2i], second = words[2i + 1]):
/// out[2i] = r cos(a) and out[2i + 1] = r sin(a), with radius
/// r = sqrt(-2 ln u), u = ((first >> 8) + 1) / 2^24 in (0, 1], and angle
/// a = 2 pi ((second >> 8) / 2^24). Within 4e-15 of the exact values
/// (radii reach 5.8); u = 1 gives radius 0 exactly.
void boxMullerPairs(const uint32_t *words, int64_t pairs, double *out);

} // namespace moec

#endif // MOEC_RUNTIME_BOXMULLER_H
