//===- GemmTestBundle.h - a program of one library GEMM ---------*- C++ -*-===//
//
// The plan hands dense GEMMs that fuse nothing to cuBLASLt. These build a
// bundle whose only program is such a GEMM, in any storage order the plan
// writes, its operands and the product the host expects: the fake
// cuBLASLt's tests and the GPU's (against the real library) share them.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TEST_UNIT_CUDA_GEMMTESTBUNDLE_H
#define MOEC_TEST_UNIT_CUDA_GEMMTESTBUNDLE_H

#include "BundleData.h"
#include "moec/Tensor.h"

#include <string>
#include <vector>

namespace moec::test {

/// d = A B (+ bias): sizes as dimension expressions of the symbol B, A and
/// B stored row- or column-major with their leading dimensions.
struct GemmCase {
  std::string m, n, k;
  bool aCol = false, bCol = false;
  int64_t lda = 0, ldb = 0;
  DType in = DType::F32, out = DType::F32;
  bool bias = false;
  /// The stored shapes of A and B.
  std::vector<detail::DimExpr> aDims{}, bDims{};
};

/// A linear layer's product: x [B, 5] times W [5, 3], both row-major.
GemmCase linearGemmCase();

/// One program, "forward", inputs a, b, bias, output d: the case's GEMM as
/// the plan records it, launched by a stand-in kernel (the scale kernel)
/// when the library declines.
detail::BundleData gemmBundle(const GemmCase &c);

/// Values that are not round in bf16 and differ from element to element.
Tensor gemmOperand(DType dtype, Shape shape, double phase);

/// The case's operands at B = batch, and its sizes there; another `phase`
/// gives other values.
struct GemmOperands {
  Tensor a, b, bias;
  int64_t m = 0, n = 0, k = 0;
};
GemmOperands gemmOperands(const GemmCase &c, int64_t batch, double phase = 0);

/// d[i, j] as the case defines it, in double.
double gemmExpected(const GemmCase &c, const GemmOperands &o, int64_t i,
                    int64_t j);

} // namespace moec::test

#endif // MOEC_TEST_UNIT_CUDA_GEMMTESTBUNDLE_H
