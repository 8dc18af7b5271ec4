//===- Orthogonal.h - orthonormalising a matrix -----------------*- C++ -*-===//

#ifndef MOEC_RUNTIME_ORTHOGONAL_H
#define MOEC_RUNTIME_ORTHOGONAL_H

#include <cstdint>
#include <vector>

namespace moec::detail {

/// torch.nn.init.orthogonal_'s matrix for the row-major [rows, cols] `a`:
/// the Q factor of a's QR decomposition with the signs of diag(R) folded in
/// (the QR whose R has a non-negative diagonal, unique for full-rank a),
/// taken of a's transpose and transposed back when rows < cols. So rows are
/// orthonormal when rows <= cols, columns otherwise. Householder
/// reflections in double, in a fixed order.
std::vector<double> orthogonalFactor(const std::vector<double> &a, int64_t rows,
                                     int64_t cols);

} // namespace moec::detail

#endif // MOEC_RUNTIME_ORTHOGONAL_H
