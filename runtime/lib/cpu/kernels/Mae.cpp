//===- Mae.cpp - the MAE layer's pooled summary, head mixture, sampling ---===//
//
// moe.window_mean and its gradient keep one running sum per (sequence,
// feature) column in double, walking the sequence forward (the forward) or
// backward (the gradient), so every window costs O(1) whatever its length.
// moe.head_mixture's dg and moe.gate_stats sum in double in index order.
// moe.sample_expert draws its uniforms through the Philox helpers
// moe.dropout uses, and its running sum is f32 in index order, as on the
// CUDA devices, so all devices pick the same experts.
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "Kernels.h"
#include "Philox.h"

#include <cmath>
#include <fmt/format.h>
#include <vector>

namespace moec::cpu {

namespace {

using defs::PoolWindow;

/// The window attributes of moe.window_mean and its gradient.
struct Window {
  PoolWindow kind;
  int64_t size;

  /// The first position of the window that ends at position p.
  int64_t first(int64_t p) const {
    return kind == PoolWindow::Last ? std::max<int64_t>(0, p - size + 1) : 0;
  }
};

Window windowAttrs(const KernelContext &ctx) {
  namespace wm = defs::ops::window_mean;
  Window w{enumAttr<PoolWindow>(ctx, wm::kWindow),
           ctx.attrs.getInt(wm::kSize, wm::kSizeDefault)};
  if (w.kind == PoolWindow::Last ? w.size < 1 : w.size != 0)
    ctx.fail(fmt::format("size {} does not fit window {}", w.size,
                         defs::spelling(w.kind)));
  return w;
}

/// [B, S] of x `[B, S, d]`, with the optional mask checked against it.
struct SeqDims {
  int64_t batch, seq, width;
};

SeqDims seqDims(const KernelContext &ctx, const TensorView &x,
                const TensorView &mask, const Window &w) {
  expectRank(ctx, x, 3, "x");
  SeqDims d{x.dim(0), x.dim(1), x.dim(2)};
  if (mask.present()) {
    if (w.kind != PoolWindow::Sequence)
      ctx.fail("mask goes with window sequence only");
    expectDType(ctx, mask, DType::I32, "mask");
    expectShape(ctx, mask, {d.batch, d.seq}, "mask");
  }
  return d;
}

/// Fails unless the output `view` (absent when nobody reads it) holds a
/// tensor of `shape` in `dtype`.
void expectOutput(const KernelContext &ctx, const TensorView &view,
                  DType dtype, const Shape &shape, std::string_view name) {
  expectNumel(ctx, view, numElements(shape), dtype, name);
}

/// Whether position s of sequence b is real (no mask: all are).
bool isReal(const TensorView &mask, int64_t seq, int64_t b, int64_t s) {
  return !mask.present() || mask.as<int32_t>()[b * seq + s] != 0;
}

/// The number of real positions of sequence b.
int64_t realCount(const TensorView &mask, int64_t seq, int64_t b) {
  int64_t count = 0;
  for (int64_t s = 0; s < seq; ++s)
    count += isReal(mask, seq, b, s) ? 1 : 0;
  return count;
}

template <typename T> void windowMean(KernelContext &ctx) {
  const TensorView &x = requireInput(ctx, 0, "x");
  const TensorView &history = ctx.in(1), &pastView = ctx.in(2);
  const TensorView &mask = ctx.in(3);
  const TensorView &y = ctx.out(0);
  Window w = windowAttrs(ctx);
  SeqDims d = seqDims(ctx, x, mask, w);
  if (history.present() != pastView.present())
    ctx.fail("history and past go together");
  // The sequence the windows read: history at positions past.., or x.
  const TensorView &src = history.present() ? history : x;
  int64_t len = d.seq, past = 0;
  if (history.present()) {
    if (w.kind == PoolWindow::Sequence)
      ctx.fail("history goes with the prefix and last windows only");
    expectDType(ctx, history, dtypeOf<T>(), "history");
    expectRank(ctx, history, 3, "history");
    if (history.dim(0) != d.batch || history.dim(2) != d.width)
      ctx.fail(fmt::format("history must be [{}, L, {}]", d.batch, d.width));
    len = history.dim(1);
    past = scalarInt(ctx, pastView, "past");
    if (past < 0 || past + d.seq > len)
      ctx.fail(fmt::format("past = {} and {} new positions exceed the "
                           "history's {}",
                           past, d.seq, len));
  }
  const bool sequence = w.kind == PoolWindow::Sequence;
  const int64_t outSeq = sequence ? 1 : d.seq;
  expectOutput(ctx, y, dtypeOf<T>(), {d.batch, outSeq, d.width},
               "the result");
  if (!y.present())
    return;
  const T *in = src.as<T>();
  T *out = y.as<T>();
  const int64_t width = d.width;
  parallelFor(d.batch * width, 2 * (past + d.seq), [&](int64_t col) {
    const int64_t b = col / width, c = col % width;
    const T *column = in + b * len * width + c;
    auto at = [&](int64_t q) { return static_cast<double>(column[q * width]); };
    if (sequence) {
      double sum = 0;
      int64_t count = 0;
      for (int64_t s = 0; s < d.seq; ++s)
        if (isReal(mask, d.seq, b, s)) {
          sum += at(s);
          ++count;
        }
      out[b * width + c] = static_cast<T>(count > 0 ? sum / count : 0.0);
      return;
    }
    // The window of t = 0 without its last position, then one step per t:
    // position p enters, and for `last` position p - size leaves.
    double sum = 0;
    for (int64_t q = w.first(past); q < past; ++q)
      sum += at(q);
    for (int64_t t = 0; t < d.seq; ++t) {
      const int64_t p = past + t;
      sum += at(p);
      if (w.kind == PoolWindow::Last && t > 0 && p - w.size >= 0)
        sum -= at(p - w.size);
      const int64_t count = p - w.first(p) + 1;
      out[(b * d.seq + t) * width + c] = static_cast<T>(sum / count);
    }
  });
}

template <typename T> void windowMeanGrad(KernelContext &ctx) {
  const TensorView &x = requireInput(ctx, 0, "x");
  const TensorView &dy = requireInput(ctx, 1, "dy");
  const TensorView &mask = ctx.in(2);
  const TensorView &dx = ctx.out(0);
  Window w = windowAttrs(ctx);
  SeqDims d = seqDims(ctx, x, mask, w);
  const bool sequence = w.kind == PoolWindow::Sequence;
  expectDType(ctx, dy, dtypeOf<T>(), "dy");
  expectShape(ctx, dy, {d.batch, sequence ? 1 : d.seq, d.width}, "dy");
  expectOutput(ctx, dx, dtypeOf<T>(), x.shape, "dx");
  if (!dx.present())
    return;
  const T *g = dy.as<T>();
  T *out = dx.as<T>();
  const int64_t width = d.width, seq = d.seq;
  // count(t) of the output at t.
  auto count = [&](int64_t t) {
    return w.kind == PoolWindow::Last ? std::min(t + 1, w.size) : t + 1;
  };
  parallelFor(d.batch * width, 2 * seq, [&](int64_t col) {
    const int64_t b = col / width, c = col % width;
    auto at = [&](int64_t s) -> T & { return out[(b * seq + s) * width + c]; };
    if (sequence) {
      const int64_t real = realCount(mask, seq, b);
      const double share =
          real > 0 ? static_cast<double>(g[b * width + c]) / real : 0.0;
      for (int64_t s = 0; s < seq; ++s)
        at(s) = static_cast<T>(isReal(mask, seq, b, s) ? share : 0.0);
      return;
    }
    // dx[s] sums dy[t] / count(t) over t = s.. (prefix) or s..s+size-1
    // (last): walking s down, t = s enters and t = s + size leaves.
    auto term = [&](int64_t t) {
      return static_cast<double>(g[(b * seq + t) * width + c]) / count(t);
    };
    double sum = 0;
    for (int64_t s = seq - 1; s >= 0; --s) {
      sum += term(s);
      if (w.kind == PoolWindow::Last && s + w.size < seq)
        sum -= term(s + w.size);
      at(s) = static_cast<T>(sum);
    }
  });
}

/// context `[B, S, H * dh]` and g `[B, G, H]` (G = 1 or S).
struct MixtureDims {
  int64_t batch, seq, heads, headDim, groups;

  /// The row of g that position s of sequence b reads.
  int64_t gRow(int64_t b, int64_t s) const {
    return b * groups + (groups == 1 ? 0 : s);
  }
};

MixtureDims mixtureDims(const KernelContext &ctx, const TensorView &context,
                        const TensorView &g) {
  expectRank(ctx, context, 3, "context");
  expectRank(ctx, g, 3, "g");
  int64_t heads = ctx.attrs.getInt(defs::ops::head_mixture::kNumHeads);
  if (heads < 2 || context.dim(2) % heads != 0)
    ctx.fail(fmt::format("num_heads = {} must be >= 2 and divide the "
                         "context width {}",
                         heads, context.dim(2)));
  MixtureDims m{context.dim(0), context.dim(1), heads, context.dim(2) / heads,
                g.dim(1)};
  if (g.dim(0) != m.batch || g.dim(2) != heads ||
      (m.groups != 1 && m.groups != m.seq))
    ctx.fail(fmt::format("g must be [{}, 1 or {}, {}]", m.batch, m.seq,
                         heads));
  return m;
}

/// H (1 - g) / (H - 1): the scale of head j under responsibility g.
double headScale(int64_t heads, double g) {
  return static_cast<double>(heads) * (1.0 - g) / (heads - 1);
}

template <typename T, typename G> void headMixture(KernelContext &ctx) {
  const TensorView &context = requireInput(ctx, 0, "context");
  const TensorView &g = requireInput(ctx, 1, "g");
  const TensorView &y = ctx.out(0);
  MixtureDims m = mixtureDims(ctx, context, g);
  expectOutput(ctx, y, dtypeOf<T>(), context.shape, "the result");
  if (!y.present())
    return;
  const T *in = context.as<T>();
  const G *gp = g.as<G>();
  T *out = y.as<T>();
  const int64_t width = m.heads * m.headDim;
  parallelFor(m.batch * m.seq, width, [&](int64_t row) {
    const int64_t b = row / m.seq, s = row % m.seq;
    const G *gr = gp + m.gRow(b, s) * m.heads;
    for (int64_t j = 0; j < m.heads; ++j) {
      const double scale = headScale(m.heads, gr[j]);
      for (int64_t i = j * m.headDim; i < (j + 1) * m.headDim; ++i)
        out[row * width + i] = static_cast<T>(in[row * width + i] * scale);
    }
  });
}

template <typename T, typename G> void headMixtureGrad(KernelContext &ctx) {
  const TensorView &dy = requireInput(ctx, 0, "dy");
  const TensorView &context = requireInput(ctx, 1, "context");
  const TensorView &g = requireInput(ctx, 2, "g");
  const TensorView &dcontext = ctx.out(0), &dg = ctx.out(1);
  MixtureDims m = mixtureDims(ctx, context, g);
  expectDType(ctx, dy, dtypeOf<T>(), "dy");
  expectShape(ctx, dy, context.shape, "dy");
  expectOutput(ctx, dcontext, dtypeOf<T>(), context.shape, "dcontext");
  expectOutput(ctx, dg, dtypeOf<G>(), g.shape, "dg");
  const T *gy = dy.as<T>(), *in = context.as<T>();
  const G *gp = g.as<G>();
  const int64_t width = m.heads * m.headDim;
  if (dcontext.present()) {
    T *out = dcontext.as<T>();
    parallelFor(m.batch * m.seq, width, [&](int64_t row) {
      const int64_t b = row / m.seq, s = row % m.seq;
      const G *gr = gp + m.gRow(b, s) * m.heads;
      for (int64_t j = 0; j < m.heads; ++j) {
        const double scale = headScale(m.heads, gr[j]);
        for (int64_t i = j * m.headDim; i < (j + 1) * m.headDim; ++i)
          out[row * width + i] = static_cast<T>(gy[row * width + i] * scale);
      }
    });
  }
  if (!dg.present())
    return;
  // dg[b, t, j] = -H / (H - 1) <dy, context> over head j of group t's rows.
  G *out = dg.as<G>();
  const int64_t rowsPerGroup = m.groups == 1 ? m.seq : 1;
  const double factor = -static_cast<double>(m.heads) / (m.heads - 1);
  parallelFor(m.batch * m.groups, rowsPerGroup * width, [&](int64_t group) {
    const int64_t row0 = group * rowsPerGroup;
    for (int64_t j = 0; j < m.heads; ++j) {
      double dot = 0;
      for (int64_t r = row0; r < row0 + rowsPerGroup; ++r)
        for (int64_t i = j * m.headDim; i < (j + 1) * m.headDim; ++i)
          dot += static_cast<double>(gy[r * width + i]) * in[r * width + i];
      out[group * m.heads + j] = static_cast<G>(factor * dot);
    }
  });
}

template <typename T> void sampleExpert(KernelContext &ctx) {
  namespace se = defs::ops::sample_expert;
  const TensorView &p = requireInput(ctx, 0, "p");
  const TensorView &y = ctx.out(0);
  expectRank(ctx, p, 3, "p");
  const int64_t n = ctx.attrs.getInt(se::kNumExperts);
  const bool uniform = ctx.attrs.getFlag(se::kUniform);
  if (n < 2)
    ctx.fail(fmt::format("num_experts must be >= 2, got {}", n));
  if (!uniform && p.dim(2) != n)
    ctx.fail(fmt::format("p must be [B, G, {}], got width {}", n, p.dim(2)));
  const uint64_t seed =
      static_cast<uint64_t>(scalarInt(ctx, ctx.in(1), "seed"));
  const uint64_t stream = static_cast<uint64_t>(ctx.attrs.getInt(se::kStream));
  const int64_t groups = p.dim(1), width = p.dim(2);
  expectOutput(ctx, y, DType::F32, {p.dim(0), groups, n}, "the result");
  if (!y.present())
    return;
  const T *pp = p.as<T>();
  float *out = y.as<float>();
  parallelFor(p.dim(0) * groups, 4 * n, [&](int64_t row) {
    // One draw per sequence, shared by all its rows.
    const double u = philoxUniform(seed, stream,
                                   static_cast<uint64_t>(row / groups));
    int64_t pick = -1;
    if (uniform) {
      pick = std::min<int64_t>(static_cast<int64_t>(u * n), n - 1);
    } else {
      // u has 24 bits, so it is exact as a float.
      const float uf = static_cast<float>(u);
      float running = 0.0f;
      int64_t lastPositive = n - 1;
      for (int64_t j = 0; j < n; ++j) {
        const float v = static_cast<float>(pp[row * width + j]);
        running += v;
        if (pick < 0 && uf < running)
          pick = j;
        if (v > 0.0f)
          lastPositive = j;
      }
      if (pick < 0)
        pick = lastPositive;
    }
    for (int64_t j = 0; j < n; ++j)
      out[row * n + j] = j == pick ? 1.0f : 0.0f;
  });
}

template <typename T> void gateStats(KernelContext &ctx) {
  const TensorView &g = requireInput(ctx, 0, "g");
  const TensorView &stats = ctx.out(0);
  expectRank(ctx, g, 3, "g");
  const int64_t heads = g.dim(2), rows = g.dim(0) * g.dim(1);
  expectNumel(ctx, stats, heads + 1, DType::F32, "stats");
  if (!stats.present())
    return;
  const T *gp = g.as<T>();
  float *out = stats.as<float>();
  // Every sum in row order, in double.
  std::vector<double> sums(heads, 0.0);
  double entropy = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < heads; ++j) {
      const double v = gp[r * heads + j];
      sums[j] += v;
      if (v > 0)
        entropy -= v * std::log(v);
    }
  for (int64_t j = 0; j < heads; ++j)
    out[j] = rows > 0 ? static_cast<float>(sums[j] / rows) : 0.0f;
  out[heads] = rows > 0 ? static_cast<float>(entropy / rows) : 0.0f;
}

} // namespace

void windowMeanKernel(KernelContext &ctx) {
  checkArity(ctx, 1, 4, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { windowMean<decltype(tag)>(ctx); });
}

void windowMeanGradKernel(KernelContext &ctx) {
  checkArity(ctx, 2, 3, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "x"), "x",
                [&](auto tag) { windowMeanGrad<decltype(tag)>(ctx); });
}

void headMixtureKernel(KernelContext &ctx) {
  checkArity(ctx, 2, 2, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "context"), "context", [&](auto t) {
    dispatchFloat(ctx, requireInput(ctx, 1, "g"), "g", [&](auto g) {
      headMixture<decltype(t), decltype(g)>(ctx);
    });
  });
}

void headMixtureGradKernel(KernelContext &ctx) {
  checkArity(ctx, 3, 3, 2, 2);
  dispatchFloat(ctx, requireInput(ctx, 1, "context"), "context", [&](auto t) {
    dispatchFloat(ctx, requireInput(ctx, 2, "g"), "g", [&](auto g) {
      headMixtureGrad<decltype(t), decltype(g)>(ctx);
    });
  });
}

void sampleExpertKernel(KernelContext &ctx) {
  checkArity(ctx, 2, 2, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "p"), "p",
                [&](auto tag) { sampleExpert<decltype(tag)>(ctx); });
}

void gateStatsKernel(KernelContext &ctx) {
  checkArity(ctx, 1, 1, 1, 1);
  dispatchFloat(ctx, requireInput(ctx, 0, "g"), "g",
                [&](auto tag) { gateStats<decltype(tag)>(ctx); });
}

} // namespace moec::cpu
