//===- CpuBlas.cpp - which BLAS kernels the cpu device runs ---------------===//
//
// The OpenBLAS queries are weak symbols, so that moec still links against a
// BLAS without them and reports it as unknown.
//
//===----------------------------------------------------------------------===//

#include "moec/CpuBlas.h"

#include <cstdlib>
#include <fmt/format.h>

extern "C" {
char *openblas_get_config(void) __attribute__((weak));
char *openblas_get_corename(void) __attribute__((weak));
}

namespace moec {

CpuBlas cpuBlas() {
  CpuBlas blas;
  if (!openblas_get_config || !openblas_get_corename) {
    blas.library = "unknown BLAS";
    return blas;
  }
  blas.library = openblas_get_config();
  blas.kernels = openblas_get_corename();
  // OpenBLAS reads the variable once, when it loads; so does this.
  const char *forced = std::getenv("OPENBLAS_CORETYPE");
  blas.chosenBy = forced ? fmt::format("OPENBLAS_CORETYPE={}", forced)
                         : "OpenBLAS, for this CPU";
  return blas;
}

} // namespace moec
