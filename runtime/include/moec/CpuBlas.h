//===- CpuBlas.h - the BLAS behind the cpu device's GEMMs -------*- C++ -*-===//
//
// The cpu device computes its GEMMs with OpenBLAS, whose DYNAMIC_ARCH build
// picks its kernels by CPU model when it loads, unless OPENBLAS_CORETYPE
// names them. The choice decides most of the cpu device's speed (on an
// AVX-512 CPU the AVX2 "Haswell" kernels run at about half the rate of the
// AVX-512 ones), so `moec info` reports it.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_CPUBLAS_H
#define MOEC_CPUBLAS_H

#include <string>

namespace moec {

struct CpuBlas {
  /// The library's own description ("OpenBLAS 0.3.21 DYNAMIC_ARCH ..."), or
  /// "unknown BLAS" for one that is not OpenBLAS.
  std::string library;
  /// The kernels it runs ("Cooperlake", "Haswell", ...); empty if unknown.
  std::string kernels;
  /// Who chose them: OpenBLAS for this CPU, or OPENBLAS_CORETYPE.
  std::string chosenBy;
};

CpuBlas cpuBlas();

} // namespace moec

#endif // MOEC_CPUBLAS_H
