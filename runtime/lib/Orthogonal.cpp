//===- Orthogonal.cpp - orthonormalising a matrix -------------------------===//

#include "Orthogonal.h"

#include <cmath>

namespace moec::detail {

namespace {

/// Q (row-major [m, k], m >= k) of the thin QR of the row-major [m, k] `r`
/// with a non-negative diag(R); `r` is overwritten.
std::vector<double> thinQ(std::vector<double> r, int64_t m, int64_t k) {
  // Reflection j maps column j of the remaining rows onto alpha_j e_j; it
  // is H_j = I - 2 v v^T / (v^T v) on rows j..m-1 (v = 0: no reflection).
  std::vector<std::vector<double>> vs(k);
  std::vector<double> alphas(k);
  for (int64_t j = 0; j < k; ++j) {
    double norm2 = 0;
    for (int64_t i = j; i < m; ++i)
      norm2 += r[i * k + j] * r[i * k + j];
    double x0 = r[j * k + j];
    double alpha = (x0 < 0 ? 1.0 : -1.0) * std::sqrt(norm2);
    std::vector<double> &v = vs[j];
    v.clear();
    for (int64_t i = j; i < m; ++i)
      v.push_back(r[i * k + j]);
    v[0] -= alpha;
    double vv = 0;
    for (double e : v)
      vv += e * e;
    alphas[j] = vv > 0 ? alpha : x0;
    if (!(vv > 0)) {
      v.clear();
      continue;
    }
    for (int64_t c = j; c < k; ++c) {
      double dot = 0;
      for (int64_t i = j; i < m; ++i)
        dot += v[i - j] * r[i * k + c];
      double f = 2 * dot / vv;
      for (int64_t i = j; i < m; ++i)
        r[i * k + c] -= f * v[i - j];
    }
  }
  // Q = H_0 H_1 ... H_{k-1} I[:, :k], applied from the last reflection.
  std::vector<double> q(m * k, 0.0);
  for (int64_t j = 0; j < k; ++j)
    q[j * k + j] = 1.0;
  for (int64_t j = k - 1; j >= 0; --j) {
    const std::vector<double> &v = vs[j];
    if (v.empty())
      continue;
    double vv = 0;
    for (double e : v)
      vv += e * e;
    for (int64_t c = 0; c < k; ++c) {
      double dot = 0;
      for (int64_t i = j; i < m; ++i)
        dot += v[i - j] * q[i * k + c];
      double f = 2 * dot / vv;
      for (int64_t i = j; i < m; ++i)
        q[i * k + c] -= f * v[i - j];
    }
  }
  // R[j][j] = alpha_j: flip the columns where it is negative (torch's
  // Q * sign(diag(R)), with sign(0) taken as +1).
  for (int64_t j = 0; j < k; ++j)
    if (alphas[j] < 0)
      for (int64_t i = 0; i < m; ++i)
        q[i * k + j] = -q[i * k + j];
  return q;
}

} // namespace

std::vector<double> orthogonalFactor(const std::vector<double> &a, int64_t rows,
                                     int64_t cols) {
  if (rows >= cols)
    return thinQ(a, rows, cols);
  std::vector<double> t(a.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < cols; ++c)
      t[c * rows + i] = a[i * cols + c];
  std::vector<double> q = thinQ(std::move(t), cols, rows);
  std::vector<double> out(a.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < cols; ++c)
      out[i * cols + c] = q[c * rows + i];
  return out;
}

} // namespace moec::detail
