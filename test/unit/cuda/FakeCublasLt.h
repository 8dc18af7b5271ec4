//===- FakeCublasLt.h - a host stand-in for libcublasLt ---------*- C++ -*-===//
//
// What the fake cuBLASLt (FakeCublasLt.cpp) records, and its failure
// switches. It computes every product on host memory, as the fake driver
// keeps "device" memory there.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TEST_UNIT_CUDA_FAKECUBLASLT_H
#define MOEC_TEST_UNIT_CUDA_FAKECUBLASLT_H

#include <cstdint>

namespace moec::fake {

struct CublasLtState {
  int64_t handles = 0;
  /// Descriptors, layouts and preferences not yet destroyed.
  int64_t liveObjects = 0;
  int64_t heuristicQueries = 0;
  /// Heuristic queries for a bias epilogue whose bias pointer was not set.
  int64_t queriesWithoutBiasPointer = 0;
  int64_t matmuls = 0;
  /// The last product's column-major m, n, k.
  uint64_t lastM = 0, lastN = 0, lastK = 0;
  /// cublasLtCreate fails (CUBLAS_STATUS_NOT_INITIALIZED); the heuristic
  /// finds no algorithm; cublasLtMatmul fails.
  bool failCreate = false;
  bool noAlgorithm = false;
  bool failMatmul = false;
};

} // namespace moec::fake

extern "C" moec::fake::CublasLtState *fakeCublasLtState();

#endif // MOEC_TEST_UNIT_CUDA_FAKECUBLASLT_H
