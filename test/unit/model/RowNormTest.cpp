//===- RowNormTest.cpp - a row_norm parameter through one SGD step --------===//
//
// The X-MoE gate rescales its expert embeddings wg to row norm 1.5 in place
// before every forward; the step is then taken at the rescaled value. With
// n = normalize(r) and g = dL/dn, the gradient at r is (I - n n^T) g / 1.5
// per row, so one SGD step leaves r - lr (I - n n^T) g / 1.5 behind, and
// that is what the checkpoint holds. Other programs read wg as it is.
//
//===----------------------------------------------------------------------===//

#include "moec/Compiler.h"
#include "moec/Session.h"

#include <cmath>
#include <filesystem>
#include <gtest/gtest.h>
#include <unistd.h>

using namespace moec;

namespace {

constexpr int64_t kExperts = 4, kWidth = 16, kBatch = 2, kSeq = 5;
constexpr double kLr = 0.1, kRowNorm = 1.5, kGain = 0.32;

const char *const kModule = R"mlir(
module attributes {
    moe.model = {name = "row_norm", kind = "decoder", objective = "lm", vocab = 4 : i64, d_model = 16 : i64, max_seq = 8 : i64, dtype = "f32", segments = 0 : i64, moe_layers = [], tokenizer = {kind = "bytes", path = "", sha256 = ""}},
    moe.training = {optimizer = "sgd", schedule = "constant", lr = 0.1 : f64, batch = 2 : i64, seq_len = 5 : i64, steps = 10 : i64, seed = 3 : i64, log_every = 1 : i64},
    moe.data = {kind = "synthetic", task = "copy", paths = [], labels = [], task_seed = 0 : i64, branching = 2 : i64, valid_fraction = 0.1 : f64}} {
  moe.param @wg : tensor<4x16xf32> {init = #moe.init<orthogonal>, scale = 0.32 : f64, row_norm = 1.5 : f64}
  func.func @loss(%wg: tensor<4x16xf32> {moe.param = @wg},
                  %x: tensor<?x?x16xf32> {moe.input = "x", moe.dims = ["B", "S", 16]},
                  %t: tensor<?x?xi32> {moe.input = "targets", moe.dims = ["B", "S"]})
      -> (tensor<f32> {moe.output = "loss"}) attributes {moe.entry = "loss"} {
    %n = moe.normalize_rows %wg : (tensor<4x16xf32>) -> tensor<4x16xf32>
    %l = moe.linear %x, %n {transpose_weight} : (tensor<?x?x16xf32>, tensor<4x16xf32>) -> tensor<?x?x4xf32>
    %ce, %count = moe.cross_entropy %l, %t : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> (tensor<f32>, tensor<f32>)
    return %ce : tensor<f32>
  }
}
)mlir";

using Matrix = std::vector<std::vector<double>>;

Matrix rows(const Tensor &t, int64_t n, int64_t width) {
  Matrix m(n, std::vector<double>(width));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < width; ++c)
      m[i][c] = t.at(i * width + c);
  return m;
}

double dot(const std::vector<double> &a, const std::vector<double> &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

struct Inputs {
  Tensor x{DType::F32, {kBatch, kSeq, kWidth}};
  Tensor targets{DType::I32, {kBatch, kSeq}};
  Inputs() {
    for (int64_t i = 0; i < x.numel(); ++i)
      x.set(i, std::sin(0.7 * i + 0.3) * (1 + i % 3));
    for (int64_t i = 0; i < targets.numel(); ++i)
      targets.set(i, (3 * i + 1) % kExperts);
  }
  std::map<std::string, Tensor> map(bool step) const {
    std::map<std::string, Tensor> m{{"x", x}, {"targets", targets}};
    if (step) {
      Tensor s(DType::I64, {});
      s.set(0, 1);
      m["step"] = s;
    }
    return m;
  }
};

/// dL/dn for the cross-entropy of x n^T (every target counted).
Matrix lossGradientAtUnitRows(const Matrix &n, const Inputs &in) {
  const int64_t tokens = kBatch * kSeq;
  Matrix g(kExperts, std::vector<double>(kWidth, 0.0));
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<double> xt(kWidth), p(kExperts);
    for (int64_t c = 0; c < kWidth; ++c)
      xt[c] = in.x.at(t * kWidth + c);
    double mx = -HUGE_VAL, sum = 0;
    for (int64_t e = 0; e < kExperts; ++e)
      mx = std::max(mx, p[e] = dot(xt, n[e]));
    for (int64_t e = 0; e < kExperts; ++e)
      sum += p[e] = std::exp(p[e] - mx);
    for (int64_t e = 0; e < kExperts; ++e) {
      double dl = (p[e] / sum - (e == in.targets.at(t) ? 1.0 : 0.0)) / tokens;
      for (int64_t c = 0; c < kWidth; ++c)
        g[e][c] += dl * xt[c];
    }
  }
  return g;
}

/// (I - n n^T) g / norm, row by row.
Matrix tangentGradient(const Matrix &n, const Matrix &g, double norm) {
  Matrix out = g;
  for (int64_t e = 0; e < kExperts; ++e) {
    double along = dot(n[e], g[e]);
    for (int64_t c = 0; c < kWidth; ++c)
      out[e][c] = (g[e][c] - n[e][c] * along) / norm;
  }
  return out;
}

void expectRows(const Tensor &actual, const Matrix &expected, double tol,
                const std::string &what) {
  for (int64_t e = 0; e < kExperts; ++e)
    for (int64_t c = 0; c < kWidth; ++c)
      EXPECT_NEAR(actual.at(e * kWidth + c), expected[e][c], tol)
          << what << " [" << e << ", " << c << "]";
}

TEST(RowNorm, OneSgdStepIsTakenAtTheRescaledRows) {
  Bundle bundle = compileModuleSource(kModule, "row_norm.mlir");
  ASSERT_EQ(bundle.params().size(), 1u);
  EXPECT_EQ(bundle.params()[0].rowNorm, kRowNorm);
  EXPECT_EQ(bundle.params()[0].init, "orthogonal");
  Session session(bundle);
  Inputs in;

  // The initial rows: orthonormal times the gain.
  Matrix w0 = rows(session.param("wg"), kExperts, kWidth);
  for (int64_t a = 0; a < kExperts; ++a)
    for (int64_t b = 0; b < kExperts; ++b)
      EXPECT_NEAR(dot(w0[a], w0[b]), a == b ? kGain * kGain : 0.0, 1e-6);

  // Evaluation leaves them alone.
  session.run("loss", in.map(false));
  expectRows(session.param("wg"), w0, 0, "after the loss program");

  // The step: rescaled rows r, n = r / 1.5, r - lr (I - n n^T) g / 1.5.
  Matrix r = w0, n = w0;
  for (int64_t e = 0; e < kExperts; ++e) {
    double norm = std::sqrt(dot(w0[e], w0[e]));
    for (int64_t c = 0; c < kWidth; ++c) {
      r[e][c] = w0[e][c] * kRowNorm / norm;
      n[e][c] = w0[e][c] / norm;
    }
  }
  Matrix grad = tangentGradient(n, lossGradientAtUnitRows(n, in), kRowNorm);
  Matrix expected = r;
  double change = 0;
  for (int64_t e = 0; e < kExperts; ++e)
    for (int64_t c = 0; c < kWidth; ++c) {
      expected[e][c] -= kLr * grad[e][c];
      change = std::max(change, std::fabs(kLr * grad[e][c]));
    }
  ASSERT_GT(change, 1e-3) << "a step too small to tell anything apart";
  session.run("train_step", in.map(true));
  Tensor after = session.param("wg");
  expectRows(after, expected, 2e-6, "after one step");

  // The backward program takes the gradient where wg is (norm 0.32).
  Session fresh(bundle);
  std::map<std::string, Tensor> grads = fresh.run("backward", in.map(false));
  expectRows(grads.at("grad:wg"),
             tangentGradient(n, lossGradientAtUnitRows(n, in), kGain), 1e-6,
             "backward's gradient");

  // The checkpoint holds the rescaled and updated rows.
  std::string path = (std::filesystem::temp_directory_path() /
                      ("moec-" + std::to_string(::getpid()) + "-rownorm"))
                         .string();
  session.saveCheckpoint(path);
  Session restored(bundle);
  restored.loadCheckpoint(path);
  std::filesystem::remove(path);
  Tensor loaded = restored.param("wg");
  for (int64_t i = 0; i < after.numel(); ++i)
    EXPECT_EQ(loaded.at(i), after.at(i)) << i;
}

} // namespace
