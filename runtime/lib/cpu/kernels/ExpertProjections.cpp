//===- ExpertProjections.cpp - routed per-assignment projections ----------===//
//
// moe.expert_map (x_t W_e per kept assignment, MoA's routed queries) and
// moe.expert_reduce (the gated sum over a token's assignments of c_tj W_e,
// MoA's output projection), with their gradients. Both run on the rows of
// ExpertGroups: gather, one gemm per expert (all experts' gemms of a phase
// in one GemmBatch), scatter or combine.
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "ExpertGroups.h"
#include "GemmBatch.h"
#include "Kernels.h"

#include <fmt/format.h>

namespace moec::cpu {

namespace {

/// The operands both ops share: a per-token input `in` ([..., d] for map,
/// [..., k * h] for reduce), the routing, and the expert weights.
struct Projection {
  const TensorView &in, &expert, &slot, &weight;
  int64_t n, k, numExperts, rowsIn, colsOut;
};

/// `inIndex` etc. are the operand positions; `inWidthPerChoice` says whether
/// the input holds one block per choice (reduce) or one row per token (map).
template <typename T>
Projection projection(const KernelContext &ctx, size_t inIndex,
                      const char *inName, size_t weightIndex, size_t slotIndex,
                      bool perChoice) {
  Projection p{requireInput(ctx, inIndex, inName),
               requireInput(ctx, 1, "expert"),
               requireInput(ctx, slotIndex, "slot"),
               requireInput(ctx, weightIndex, "weight"),
               0,
               0,
               0,
               0,
               0};
  if (p.in.rank() == 0 || p.expert.rank() == 0)
    ctx.fail(fmt::format("{} must be [..., width] and expert [..., k]",
                         inName));
  DType dt = dtypeOf<T>();
  RowShape rows = rowShape(p.in);
  p.n = rows.rows;
  p.k = rowShape(p.expert).width;
  expectRows(ctx, p.expert, p.n, p.k, DType::I32, "expert");
  expectRows(ctx, p.slot, p.n, p.k, DType::I32, "slot");
  expectDType(ctx, p.in, dt, inName);
  expectDType(ctx, p.weight, dt, "weight");
  expectRank(ctx, p.weight, 3, "weight");
  p.numExperts = p.weight.dim(0);
  p.rowsIn = p.weight.dim(1);
  p.colsOut = p.weight.dim(2);
  int64_t expectedWidth = perChoice ? p.k * p.rowsIn : p.rowsIn;
  if (rows.width != expectedWidth)
    ctx.fail(fmt::format("{} has width {} but the weight {} needs {}", inName,
                         rows.width, shapeString(p.weight.shape),
                         expectedWidth));
  checkExpertIndices(ctx, p.expert, &p.slot, p.numExperts);
  return p;
}

template <typename T> void expertMap(KernelContext &ctx) {
  Projection p = projection<T>(ctx, 0, "x", 3, 2, false);
  const TensorView &y = ctx.out(0);
  int64_t d = p.rowsIn, h = p.colsOut;
  expectRows(ctx, y, p.n, p.k * h, dtypeOf<T>(), "the result");
  if (!y.present())
    return;
  ExpertGroups groups = groupByExpert(p.expert, p.slot, p.numExperts);
  Scratch scratch;
  T *xg = scratch.get<T>(groups.rows() * d);
  T *out = scratch.get<T>(groups.rows() * h);
  gatherRows(p.in.as<T>(), groups, p.k, d, xg);
  GemmBatch<T> batch;
  for (int64_t e = 0; e < p.numExperts; ++e) {
    int64_t r0 = groups.offset[e];
    batch.add(false, false, groups.count(e), h, d, T(1), xg + r0 * d, d,
              p.weight.as<T>() + e * d * h, h, T(0), out + r0 * h, h);
  }
  batch.run();
  // Row a of the result (block j of token t) is grouped row rowOf[a], or 0.
  T *dst = y.as<T>();
  parallelFor(p.n * p.k, h, [&](int64_t a) {
    int64_t r = groups.rowOf[a];
    for (int64_t c = 0; c < h; ++c)
      dst[a * h + c] = r < 0 ? T(0) : out[r * h + c];
  });
}

template <typename T> void expertMapGrad(KernelContext &ctx) {
  Projection p = projection<T>(ctx, 0, "x", 3, 2, false);
  const TensorView &dy = requireInput(ctx, 4, "dy");
  int64_t d = p.rowsIn, h = p.colsOut;
  DType dt = dtypeOf<T>();
  expectRows(ctx, dy, p.n, p.k * h, dt, "dy");
  const TensorView &dx = ctx.out(0), &dw = ctx.out(1);
  expectRows(ctx, dx, p.n, d, dt, "dx");
  if (dw.present()) {
    expectDType(ctx, dw, dt, "dweight");
    expectShape(ctx, dw, p.weight.shape, "dweight");
  }
  ExpertGroups groups = groupByExpert(p.expert, p.slot, p.numExperts);
  int64_t rows = groups.rows();
  Scratch scratch;
  // dy per grouped row (the assignment's own block).
  T *dyg = scratch.get<T>(rows * h);
  gatherRows(dy.as<T>(), groups, 1, h, dyg);
  T *xg = dw.present() ? scratch.get<T>(rows * d) : nullptr;
  T *dxg = dx.present() ? scratch.get<T>(rows * d) : nullptr;
  if (xg)
    gatherRows(p.in.as<T>(), groups, p.k, d, xg);
  GemmBatch<T> batch;
  if (xg)
    addWeightGrads(batch, groups, d, h, xg, dyg, dw.as<T>());
  if (dxg)
    addInputGrads(batch, groups, d, h, dyg, p.weight.as<T>(), T(0), dxg);
  batch.run();
  if (dxg) {
    combineRows(
        p.n, p.k, d, groups, dxg, [](int64_t) { return 1.0; }, dx.as<T>());
  }
}

template <typename T> void expertReduce(KernelContext &ctx) {
  Projection p = projection<T>(ctx, 0, "c", 4, 3, true);
  const TensorView &gates = requireInput(ctx, 2, "gates");
  expectRows(ctx, gates, p.n, p.k, dtypeOf<T>(), "gates");
  const TensorView &y = ctx.out(0);
  int64_t h = p.rowsIn, d = p.colsOut;
  expectRows(ctx, y, p.n, d, dtypeOf<T>(), "the result");
  if (!y.present())
    return;
  ExpertGroups groups = groupByExpert(p.expert, p.slot, p.numExperts);
  Scratch scratch;
  T *cg = scratch.get<T>(groups.rows() * h);
  T *out = scratch.get<T>(groups.rows() * d);
  gatherRows(p.in.as<T>(), groups, 1, h, cg);
  GemmBatch<T> batch;
  for (int64_t e = 0; e < p.numExperts; ++e) {
    int64_t r0 = groups.offset[e];
    batch.add(false, false, groups.count(e), d, h, T(1), cg + r0 * h, h,
              p.weight.as<T>() + e * h * d, d, T(0), out + r0 * d, d);
  }
  batch.run();
  const T *g = gates.as<T>();
  combineRows(
      p.n, p.k, d, groups, out, [&](int64_t a) { return g[a]; }, y.as<T>());
}

template <typename T> void expertReduceGrad(KernelContext &ctx) {
  Projection p = projection<T>(ctx, 0, "c", 4, 3, true);
  const TensorView &gates = requireInput(ctx, 2, "gates");
  const TensorView &dy = requireInput(ctx, 5, "dy");
  DType dt = dtypeOf<T>();
  int64_t h = p.rowsIn, d = p.colsOut, n = p.n, k = p.k;
  expectRows(ctx, gates, n, k, dt, "gates");
  expectRows(ctx, dy, n, d, dt, "dy");
  const TensorView &dc = ctx.out(0), &dgates = ctx.out(1), &dw = ctx.out(2);
  expectRows(ctx, dc, n, k * h, dt, "dc");
  expectRows(ctx, dgates, n, k, dt, "dgates");
  if (dw.present()) {
    expectDType(ctx, dw, dt, "dweight");
    expectShape(ctx, dw, p.weight.shape, "dweight");
  }
  ExpertGroups groups = groupByExpert(p.expert, p.slot, p.numExperts);
  int64_t rows = groups.rows();
  const T *g = gates.as<T>();
  Scratch scratch;
  T *dyg = scratch.get<T>(rows * d);
  T *cg = scratch.get<T>(rows * h);
  gatherRows(dy.as<T>(), groups, k, d, dyg);
  gatherRows(p.in.as<T>(), groups, 1, h, cg);
  // dW_e = c^T (g dy) over the expert's rows; G = dy W_e^T per grouped
  // row, then dc = g G and dgates = <G, c>.
  T *dys = dw.present() ? scratch.get<T>(rows * d) : nullptr;
  T *grow = dc.present() || dgates.present() ? scratch.get<T>(rows * h)
                                             : nullptr;
  if (dys)
    parallelFor(rows, d, [&](int64_t r) {
      T gate = g[groups.assignments[r]];
      for (int64_t c = 0; c < d; ++c)
        dys[r * d + c] = gate * dyg[r * d + c];
    });
  GemmBatch<T> batch;
  if (dys)
    addWeightGrads(batch, groups, h, d, cg, dys, dw.as<T>());
  if (grow)
    addInputGrads(batch, groups, h, d, dyg, p.weight.as<T>(), T(0), grow);
  batch.run();
  if (!grow)
    return;
  T *dcp = dc.as<T>(), *dgp = dgates.as<T>();
  parallelFor(n * k, 2 * h, [&](int64_t a) {
    int64_t r = groups.rowOf[a];
    if (r < 0) { // dropped: nothing flows back
      if (dcp)
        std::fill(dcp + a * h, dcp + (a + 1) * h, T(0));
      if (dgp)
        dgp[a] = T(0);
      return;
    }
    if (dcp) {
      T gate = g[a];
      for (int64_t c = 0; c < h; ++c)
        dcp[a * h + c] = gate * grow[r * h + c];
    }
    if (dgp)
      dgp[a] = static_cast<T>(dotInDouble(grow + r * h, cg + r * h, h));
  });
}

} // namespace

void expertMapKernel(KernelContext &ctx) {
  checkArity(ctx, 4, 4, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { expertMap<decltype(tag)>(ctx); });
}

void expertMapGradKernel(KernelContext &ctx) {
  checkArity(ctx, 5, 5, 2, 2);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { expertMapGrad<decltype(tag)>(ctx); });
}

void expertReduceKernel(KernelContext &ctx) {
  checkArity(ctx, 5, 5, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "c"), "c",
                [&](auto tag) { expertReduce<decltype(tag)>(ctx); });
}

void expertReduceGradKernel(KernelContext &ctx) {
  checkArity(ctx, 6, 6, 3, 3);
  dispatchFloat(ctx, requireInput(ctx, 0, "c"), "c",
                [&](auto tag) { expertReduceGrad<decltype(tag)>(ctx); });
}

} // namespace moec::cpu
