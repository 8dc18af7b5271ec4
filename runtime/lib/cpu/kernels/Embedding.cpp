//===- Embedding.cpp - token and position embeddings ----------------------===//

#include "Common.h"
#include "Kernels.h"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

namespace moec::cpu {

namespace {

template <typename T> void embedding(KernelContext &ctx) {
  const TensorView &ids = requireInput(ctx, 0, "ids");
  const TensorView &table = requireInput(ctx, 1, "table");
  const TensorView &y = ctx.out(0);
  expectDType(ctx, ids, DType::I32, "ids");
  expectRank(ctx, table, 2, "table");
  int64_t vocab = table.dim(0), d = table.dim(1), n = ids.numel();
  expectRows(ctx, y, n, d, dtypeOf<T>(), "the result");

  const int32_t *id = ids.as<int32_t>();
  for (int64_t t = 0; t < n; ++t)
    if (id[t] < 0 || id[t] >= vocab)
      ctx.fail(fmt::format("ids{} = {} is outside the vocabulary [0, {})",
                           indexString(ids.shape, t), id[t], vocab));
  if (!y.present())
    return;
  const T *src = table.as<T>();
  T *dst = y.as<T>();
  double scale = ctx.attrs.getFloat(defs::ops::embedding::kScale,
                                    defs::ops::embedding::kScaleDefault);
  parallelFor(n, d, [&](int64_t t) {
    if (scale == 1.0) {
      std::memcpy(dst + t * d, src + id[t] * d, d * sizeof(T));
      return;
    }
    for (int64_t c = 0; c < d; ++c)
      dst[t * d + c] = static_cast<T>(scale * src[id[t] * d + c]);
  });
}

template <typename T> void embeddingGrad(KernelContext &ctx) {
  const TensorView &ids = requireInput(ctx, 0, "ids");
  const TensorView &dy = requireInput(ctx, 1, "dy");
  const TensorView &dtable = ctx.out(0);
  expectDType(ctx, ids, DType::I32, "ids");
  int64_t vocab = ctx.attrs.getInt(defs::ops::embedding_grad::kVocab);
  int64_t n = ids.numel();
  int64_t d = rowShape(dy).width;
  expectRows(ctx, dy, n, d, dtypeOf<T>(), "dy");
  if (!dtable.present())
    return;
  expectShape(ctx, dtable, {vocab, d}, "dtable");
  expectDType(ctx, dtable, dtypeOf<T>(), "dtable");

  // Bucket positions by id (a stable counting sort), so each table row sums
  // its positions in increasing order and rows are independent.
  const int32_t *id = ids.as<int32_t>();
  std::vector<int64_t> start(vocab + 1, 0);
  for (int64_t t = 0; t < n; ++t) {
    if (id[t] < 0 || id[t] >= vocab)
      ctx.fail(fmt::format("ids{} = {} is outside the vocabulary [0, {})",
                           indexString(ids.shape, t), id[t], vocab));
    ++start[id[t] + 1];
  }
  for (int64_t v = 0; v < vocab; ++v)
    start[v + 1] += start[v];
  std::vector<int64_t> positions(n), fill(start.begin(), start.end() - 1);
  for (int64_t t = 0; t < n; ++t)
    positions[fill[id[t]]++] = t;

  const T *g = dy.as<T>();
  T *out = dtable.as<T>();
  double scale = ctx.attrs.getFloat(defs::ops::embedding_grad::kScale,
                                    defs::ops::embedding_grad::kScaleDefault);
#pragma omp parallel if (n * d >= kMinParallelWork)
  {
    std::vector<double> acc(d);
#pragma omp for schedule(static)
    for (int64_t v = 0; v < vocab; ++v) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t i = start[v]; i < start[v + 1]; ++i) {
        const T *row = g + positions[i] * d;
        for (int64_t c = 0; c < d; ++c)
          acc[c] += row[c];
      }
      for (int64_t c = 0; c < d; ++c)
        out[v * d + c] = static_cast<T>(scale * acc[c]);
    }
  }
}

/// x `[B, S, d]` (any rank >= 2: the last two dimensions are S and d).
struct PositionDims {
  int64_t batch, seq, d;
};

PositionDims positionDims(const KernelContext &ctx, const TensorView &x,
                          std::string_view name) {
  if (x.rank() < 2)
    ctx.fail(fmt::format("{} must be [B, S, d], got shape {}", name,
                         shapeString(x.shape)));
  int64_t seq = x.dim(-2), d = x.dim(-1);
  int64_t batch = seq * d == 0 ? 0 : x.numel() / (seq * d);
  return {batch, seq, d};
}

int64_t checkedStart(const KernelContext &ctx, const TensorView &startView,
                     int64_t seq, int64_t maxLen) {
  int64_t start = scalarInt(ctx, startView, "start");
  if (start < 0 || start + seq > maxLen)
    ctx.fail(fmt::format("positions [{}, {}) are outside the position table "
                         "of max_len {} (start = {}, S = {})",
                         start, start + seq, maxLen, start, seq));
  return start;
}

template <typename T> void addPositions(KernelContext &ctx) {
  const TensorView &x = requireInput(ctx, 0, "x");
  const TensorView &table = requireInput(ctx, 1, "table");
  const TensorView &y = ctx.out(0);
  PositionDims dims = positionDims(ctx, x, "x");
  expectRank(ctx, table, 2, "table");
  expectDType(ctx, table, dtypeOf<T>(), "table");
  if (table.dim(1) != dims.d)
    ctx.fail(fmt::format("table {} does not match the width {} of x",
                         shapeString(table.shape), dims.d));
  int64_t start = checkedStart(ctx, ctx.in(2), dims.seq, table.dim(0));
  expectRows(ctx, y, dims.batch * dims.seq, dims.d, dtypeOf<T>(), "the result");
  if (!y.present())
    return;
  const T *src = x.as<T>(), *pos = table.as<T>() + start * dims.d;
  T *dst = y.as<T>();
  int64_t rows = dims.batch * dims.seq, d = dims.d, seq = dims.seq;
  parallelFor(rows, d, [&](int64_t r) {
    const T *p = pos + (r % seq) * d;
    for (int64_t c = 0; c < d; ++c)
      dst[r * d + c] = src[r * d + c] + p[c];
  });
}

template <typename T> void addPositionsGrad(KernelContext &ctx) {
  const TensorView &dy = requireInput(ctx, 0, "dy");
  const TensorView &dtable = ctx.out(0);
  PositionDims dims = positionDims(ctx, dy, "dy");
  int64_t maxLen = ctx.attrs.getInt(defs::ops::add_positions_grad::kMaxLen);
  int64_t start = checkedStart(ctx, ctx.in(1), dims.seq, maxLen);
  if (!dtable.present())
    return;
  expectShape(ctx, dtable, {maxLen, dims.d}, "dtable");
  expectDType(ctx, dtable, dtypeOf<T>(), "dtable");
  const T *g = dy.as<T>();
  T *out = dtable.as<T>();
  int64_t d = dims.d, seq = dims.seq, batch = dims.batch;
  std::fill(out, out + maxLen * d, T(0));
  // One position per iteration, batches summed in ascending order.
  parallelFor(seq, d * batch, [&](int64_t s) {
    for (int64_t c = 0; c < d; ++c) {
      double acc = 0;
      for (int64_t b = 0; b < batch; ++b)
        acc += g[(b * seq + s) * d + c];
      out[(start + s) * d + c] = static_cast<T>(acc);
    }
  });
}

} // namespace

void embeddingKernel(KernelContext &ctx) {
  checkArity(ctx, 2, 2, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 1, "table"), "table",
                [&](auto tag) { embedding<decltype(tag)>(ctx); });
}

void embeddingGradKernel(KernelContext &ctx) {
  checkArity(ctx, 2, 2, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 1, "dy"), "dy",
                [&](auto tag) { embeddingGrad<decltype(tag)>(ctx); });
}

void addPositionsKernel(KernelContext &ctx) {
  checkArity(ctx, 3, 3, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { addPositions<decltype(tag)>(ctx); });
}

void addPositionsGradKernel(KernelContext &ctx) {
  checkArity(ctx, 2, 2, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "dy"), "dy",
                [&](auto tag) { addPositionsGrad<decltype(tag)>(ctx); });
}

} // namespace moec::cpu
