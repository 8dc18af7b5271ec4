//===- ExpertGroups.h - routed assignments grouped by expert ----*- C++ -*-===//
//
// The kept (token, choice) assignments of a router, grouped by expert in
// assignment order, and the gathers and combines every routed op (expert
// FFN, expert map, expert reduce) builds on: rows are gathered into one
// matrix per call, each expert's block goes through its gemms, and results
// are combined per token in ascending choice order, so outputs do not depend
// on the grouping.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CPU_KERNELS_EXPERTGROUPS_H
#define MOEC_RUNTIME_CPU_KERNELS_EXPERTGROUPS_H

#include "Common.h"
#include "GemmBatch.h"

#include <cstring>
#include <vector>

namespace moec::cpu {

/// Kept assignments a = t * k + j grouped by expert, assignment order within
/// one: grouped row r is assignment assignments[r], expert e owns rows
/// [offset[e], offset[e + 1]), and rowOf[a] is a's row (-1 when dropped).
struct ExpertGroups {
  std::vector<int64_t> offset, assignments, rowOf;
  int64_t rows() const { return offset.back(); }
  int64_t count(int64_t e) const { return offset[e + 1] - offset[e]; }
};

/// Groups the assignments of expert/slot (i32, slot < 0: dropped); the
/// indices must have been checked against numExperts.
inline ExpertGroups groupByExpert(const TensorView &expert,
                                  const TensorView &slot, int64_t numExperts) {
  ExpertGroups groups;
  groups.offset.assign(numExperts + 1, 0);
  const int32_t *ex = expert.as<int32_t>(), *sl = slot.as<int32_t>();
  int64_t total = expert.numel();
  for (int64_t a = 0; a < total; ++a)
    if (sl[a] >= 0)
      ++groups.offset[ex[a] + 1];
  for (int64_t e = 0; e < numExperts; ++e)
    groups.offset[e + 1] += groups.offset[e];
  groups.assignments.resize(groups.rows());
  groups.rowOf.assign(total, -1);
  std::vector<int64_t> fill(groups.offset.begin(), groups.offset.end() - 1);
  for (int64_t a = 0; a < total; ++a) {
    if (sl[a] < 0)
      continue;
    int64_t r = fill[ex[a]]++;
    groups.assignments[r] = a;
    groups.rowOf[a] = r;
  }
  return groups;
}

/// Copies `width` elements per grouped row r from row assignments[r] / div
/// of `src` into `dst`: div = k reads a token's row, div = 1 the
/// assignment's own row.
template <typename T>
void gatherRows(const T *src, const ExpertGroups &groups, int64_t div,
                int64_t width, T *dst) {
  parallelFor(groups.rows(), width, [&](int64_t r) {
    std::memcpy(dst + r * width, src + (groups.assignments[r] / div) * width,
                width * sizeof(T));
  });
}

/// sum of a[i] * b[i] in double, in laneSum's eight partial sums (a fixed
/// order the compiler can vectorise).
template <typename T>
double dotInDouble(const T *a, const T *b, int64_t count) {
  return laneSum(count,
                 [&](int64_t i) { return static_cast<double>(a[i]) * b[i]; });
}

/// out_t = sum over kept j, ascending, of weight(a) * rows[rowOf[a]] with
/// a = t k + j, accumulated in double; n tokens, `d` columns.
template <typename T, typename Weight>
void combineRows(int64_t n, int64_t k, int64_t d, const ExpertGroups &groups,
                 const T *rows, Weight &&weight, T *out) {
  parallelFor(n, d * k, [&](int64_t t) {
    // One accumulator row per thread, kept between calls.
    thread_local std::vector<double> acc;
    acc.assign(d, 0.0);
    for (int64_t a = t * k; a < (t + 1) * k; ++a) {
      int64_t r = groups.rowOf[a];
      if (r < 0)
        continue;
      double w = weight(a);
      for (int64_t c = 0; c < d; ++c)
        acc[c] += w * rows[r * d + c];
    }
    for (int64_t c = 0; c < d; ++c)
      out[t * d + c] = static_cast<T>(acc[c]);
  });
}

/// out[e, c] = sum over expert e's grouped rows, ascending, of in[r, c], in
/// double. Each task owns one expert's block of columns and walks its rows
/// in order, so the order of every sum is fixed and rows are read whole.
template <typename T>
void expertColumnSums(const T *in, const ExpertGroups &groups, int64_t width,
                      T *out) {
  constexpr int64_t kBlock = 64;
  int64_t experts = static_cast<int64_t>(groups.offset.size()) - 1;
  int64_t blocks = (width + kBlock - 1) / kBlock;
  parallelFor(experts * blocks,
              kBlock * groups.rows() / std::max<int64_t>(1, experts),
              [&](int64_t task) {
                int64_t e = task / blocks, c0 = (task % blocks) * kBlock;
                int64_t c1 = std::min(width, c0 + kBlock);
                double acc[kBlock] = {};
                for (int64_t r = groups.offset[e]; r < groups.offset[e + 1];
                     ++r)
                  for (int64_t c = c0; c < c1; ++c)
                    acc[c - c0] += in[r * width + c];
                for (int64_t c = c0; c < c1; ++c)
                  out[e * width + c] = static_cast<T>(acc[c - c0]);
              });
}

/// For expert projections y_e = x_e W_e over grouped rows (x rows of `in`
/// elements, y rows of `out`, W [E, in, out]), adds to `batch` the weight
/// gradients dW_e = x_e^T dy_e. An expert without rows gets zeros (K = 0).
template <typename T>
void addWeightGrads(GemmBatch<T> &batch, const ExpertGroups &groups, int64_t in,
                    int64_t out, const T *x, const T *dy, T *dw) {
  const int64_t experts = static_cast<int64_t>(groups.offset.size()) - 1;
  for (int64_t e = 0; e < experts; ++e) {
    int64_t r0 = groups.offset[e];
    batch.add(true, false, in, out, groups.count(e), T(1), x + r0 * in, in,
              dy + r0 * out, out, T(0), dw + e * in * out, out);
  }
}

/// The same projections' input gradients: dx_e = dy_e W_e^T + beta dx_e.
template <typename T>
void addInputGrads(GemmBatch<T> &batch, const ExpertGroups &groups, int64_t in,
                   int64_t out, const T *dy, const T *w, T beta, T *dx) {
  const int64_t experts = static_cast<int64_t>(groups.offset.size()) - 1;
  for (int64_t e = 0; e < experts; ++e) {
    int64_t r0 = groups.offset[e];
    batch.add(false, true, groups.count(e), in, out, T(1), dy + r0 * out, out,
              w + e * in * out, out, beta, dx + r0 * in, in);
  }
}

} // namespace moec::cpu

#endif // MOEC_RUNTIME_CPU_KERNELS_EXPERTGROUPS_H
