//===- Horner.h - polynomials by Horner's rule ------------------*- C++ -*-===//
//
// The series of the vectorised math loops (FastMath.cpp, BoxMuller.cpp) as
// lists of coefficients. The loop is unrolled into the same multiplies and
// adds a hand-written chain does. Every version of a target_clones loop
// rounds alike only where contraction is off (-ffp-contract=off, which
// runtime/CMakeLists.txt sets on those files): a new includer needs it too.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_HORNER_H
#define MOEC_RUNTIME_HORNER_H

#include <array>
#include <cstddef>

namespace moec {

/// c[0] x^(N-1) + c[1] x^(N-2) + ... + c[N-1]: the coefficients from the
/// highest power down.
template <typename T, size_t N>
inline T horner(T x, const std::array<T, N> &c) {
  static_assert(N >= 1, "a polynomial needs a coefficient");
  T p = c[0];
#pragma GCC unroll 32
  for (size_t i = 1; i < N; ++i)
    p = p * x + c[i];
  return p;
}

} // namespace moec

#endif // MOEC_RUNTIME_HORNER_H
