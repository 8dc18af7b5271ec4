//===- CpuKernelsTest.cpp - hand-computed cases of the dense cpu kernels --===//

#include "KernelTestUtil.h"

#include "cpu/Kernel.h"
#include "cpu/kernels/Kernels.h"
#include "moec/Error.h"
#include "Philox.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <limits>

using namespace moec;
using namespace moec::test;

namespace {

TEST(CpuKernels, RegistryHasEveryOp) {
  std::vector<std::string> names = cpu::kernelNames();
  for (const char *op : {"moe.embedding",        "moe.embedding_grad",
                         "moe.add_positions",    "moe.add_positions_grad",
                         "moe.rope",
                         "moe.linear",           "moe.linear_grad",
                         "moe.layer_norm",       "moe.layer_norm_grad",
                         "moe.rms_norm",         "moe.rms_norm_grad",
                         "moe.cast",
                         "moe.activation",       "moe.activation_grad",
                         "moe.dropout",          "moe.dropout_grad",
                         "moe.attention",        "moe.attention_grad",
                         "moe.kv_cache_write",   "moe.topk_router",
                         "moe.topk_router_grad", "moe.expert_load",
                         "moe.expert_ffn",       "moe.expert_ffn_grad",
                         "moe.expert_map",       "moe.expert_map_grad",
                         "moe.expert_reduce",    "moe.expert_reduce_grad",
                         "moe.cv_loss",          "moe.cv_loss_grad",
                         "moe.switch_loss",      "moe.switch_loss_grad",
                         "moe.z_loss",           "moe.z_loss_grad",
                         "moe.cross_entropy",    "moe.cross_entropy_grad",
                         "moe.normalize_rows",   "moe.normalize_rows_grad",
                         "moe.finite_or_min",    "moe.finite_or_min_grad",
                         "moe.rescale_rows",
                         "moe.batch_norm",       "moe.batch_norm_grad",
                         "moe.window_mean",      "moe.window_mean_grad",
                         "moe.head_mixture",     "moe.head_mixture_grad",
                         "moe.sample_expert",    "moe.gate_stats",
                         "moe.lr_schedule",      "moe.global_norm",
                         "moe.adam_update",      "moe.sgd_update",
                         "arith.addf",           "arith.subf",
                         "arith.mulf",           "arith.divf",
                         "arith.negf",           "arith.maximumf",
                         "arith.minimumf"}) {
    EXPECT_NE(cpu::lookupKernel(op), nullptr) << op;
  }
  EXPECT_EQ(names.size(), 61u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(cpu::lookupKernel("moe.no_such_op"), nullptr);
}

TEST(CpuKernels, LinearWithAndWithoutBias) {
  Tensor x = Tensor::of<double>({2, 2}, {1, 2, 3, 4});
  Tensor w = Tensor::of<double>({2, 3}, {1, 0, -1, 2, 1, 0});
  Tensor b = Tensor::of<double>({3}, {0.5, -1, 2});
  Tensor y =
      runKernel1("moe.linear", {x, w, absent()}, zeros(DType::F64, {2, 3}));
  expectValues(y, {5, 2, -1, 11, 4, -3}, 0, "x W");
  y = runKernel1("moe.linear", {x, w, b}, zeros(DType::F64, {2, 3}));
  expectValues(y, {5.5, 1, 1, 11.5, 3, -1}, 0, "x W + b");
}

TEST(CpuKernels, LinearTransposedWeight) {
  // W^T of the case above, stored [N, K]; leading dims [1, 2] are tokens.
  Tensor x = Tensor::of<float>({1, 2, 2}, {1, 2, 3, 4});
  Tensor wt = Tensor::of<float>({3, 2}, {1, 2, 0, 1, -1, 0});
  Tensor b = Tensor::of<float>({3}, {0.5, -1, 2});
  Tensor y = runKernel1("moe.linear", {x, wt, b}, zeros(DType::F32, {1, 2, 3}),
                        {{"transpose_weight", true}});
  expectValues(y, {5.5, 1, 1, 11.5, 3, -1}, 0, "x W^T + b");
}

TEST(CpuKernels, LinearRejectsMismatchedWeight) {
  Tensor x = zeros(DType::F32, {2, 3});
  Tensor w = zeros(DType::F32, {4, 5});
  EXPECT_THROW(runKernel1("moe.linear", {x, w}, zeros(DType::F32, {2, 5})),
               Error);
  EXPECT_THROW(runKernel1("moe.linear", {x, zeros(DType::F32, {3, 5})},
                          zeros(DType::F32, {2, 4})),
               Error);
}

TEST(CpuKernels, LayerNorm) {
  // mean 2.5, biased var 1.25; eps 0.75 makes var + eps = 2.
  Tensor x = Tensor::of<double>({1, 4}, {1, 2, 3, 4});
  Tensor gamma = Tensor::of<double>({4}, {1, 2, 1, 1});
  Tensor beta = Tensor::of<double>({4}, {0, 0, 1, 0});
  Tensor y =
      runKernel1("moe.layer_norm", {x, gamma, beta}, like(x), {{"eps", 0.75}});
  double r = 1 / std::sqrt(2.0);
  expectValues(y, {-1.5 * r, -0.5 * r * 2, 0.5 * r + 1, 1.5 * r}, 1e-15,
               "layer_norm");
}

TEST(CpuKernels, RmsNorm) {
  // mean(x^2) = 3, eps 1: r = 1/2.
  Tensor x = Tensor::of<double>({1, 3}, {1, 2, 2});
  Tensor gamma = Tensor::of<double>({3}, {2, 1, -1});
  Tensor y = runKernel1("moe.rms_norm", {x, gamma}, like(x), {{"eps", 1.0}});
  expectValues(y, {1, 1, -1}, 1e-15, "rms_norm");
}

TEST(CpuKernels, ActivationsAtFixedPoints) {
  Tensor x = Tensor::of<double>({4}, {-1, 0, 0.5, 2});
  auto run = [&](const char *kind) {
    return runKernel1("moe.activation", {x}, like(x), {{"kind", kind}});
  };
  expectValues(run("identity"), {-1, 0, 0.5, 2}, 0, "identity");
  expectValues(run("relu"), {0, 0, 0.5, 2}, 0, "relu");
  expectValues(
      run("tanh"),
      {-0.7615941559557649, 0, 0.46211715726000974, 0.9640275800758169}, 1e-12,
      "tanh");
  expectValues(run("silu"),
               {-0.2689414213699951, 0, 0.3112296656009273, 1.7615941559557646},
               1e-12, "silu");
  expectValues(
      run("gelu_erf"),
      {-0.15865525393145707, 0, 0.34573123063700656, 1.9544997361036416}, 1e-12,
      "gelu_erf");
  expectValues(
      run("gelu_tanh"),
      {-0.15880800939172324, 0, 0.34571400982514394, 1.954597694087775}, 1e-12,
      "gelu_tanh");
  // relu'(0) = 0.
  Tensor dy = Tensor::of<double>({4}, {1, 1, 1, 1});
  Tensor dx =
      runKernel1("moe.activation_grad", {x, dy}, like(x), {{"kind", "relu"}});
  expectValues(dx, {0, 0, 1, 1}, 0, "relu'");
  EXPECT_THROW(run("swish"), Error);
}

TEST(CpuKernels, EmbeddingLooksUpRows) {
  Tensor table = Tensor::of<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor ids = Tensor::of<int32_t>({1, 3}, {2, 0, 2});
  Tensor y =
      runKernel1("moe.embedding", {ids, table}, zeros(DType::F32, {1, 3, 2}));
  expectValues(y, {5, 6, 1, 2, 5, 6}, 0, "embedding");
  // The gradient sums repeated ids.
  Tensor dy = Tensor::of<float>({1, 3, 2}, {1, 1, 2, 2, 3, 3});
  Tensor dtable = runKernel1("moe.embedding_grad", {ids, dy},
                             zeros(DType::F32, {3, 2}), {{"vocab", 3}});
  expectValues(dtable, {2, 2, 0, 0, 4, 4}, 0, "embedding_grad");
}

TEST(CpuKernels, EmbeddingRejectsOutOfRangeIds) {
  Tensor table = zeros(DType::F32, {3, 2});
  for (int32_t bad : {3, -1}) {
    Tensor ids = Tensor::of<int32_t>({2, 2}, {0, 1, bad, 2});
    try {
      runKernel1("moe.embedding", {ids, table}, zeros(DType::F32, {2, 2, 2}));
      ADD_FAILURE() << "no error for id " << bad;
    } catch (const Error &e) {
      std::string message = e.what();
      EXPECT_NE(message.find("moe.embedding"), std::string::npos) << message;
      EXPECT_NE(message.find("ids[1, 0] = " + std::to_string(bad)),
                std::string::npos)
          << message;
      EXPECT_NE(message.find("[0, 3)"), std::string::npos) << message;
    }
  }
}

TEST(CpuKernels, AddPositionsWithStartAndRangeCheck) {
  Tensor x = Tensor::of<double>({2, 2, 1}, {1, 2, 3, 4});
  Tensor table = Tensor::of<double>({4, 1}, {10, 20, 30, 40});
  Tensor y = runKernel1("moe.add_positions", {x, table, scalarI64(1)}, like(x));
  expectValues(y, {21, 32, 23, 34}, 0, "add_positions");
  Tensor dtable = runKernel1("moe.add_positions_grad", {x, scalarI64(1)},
                             zeros(DType::F64, {4, 1}), {{"max_len", 4}});
  expectValues(dtable, {0, 4, 6, 0}, 0, "add_positions_grad");
  EXPECT_THROW(
      runKernel1("moe.add_positions", {x, table, scalarI64(3)}, like(x)),
      Error);
}

TEST(CpuKernels, CrossEntropyIgnoresNegativeTargets) {
  // Row 0 uniform over 3 (loss ln 3); row 1 p = [1/4, 1/2, 1/4], target 1
  // (loss ln 2); row 2 ignored.
  double ln2 = std::log(2.0);
  Tensor logits = Tensor::of<double>({3, 3}, {0, 0, 0, 0, ln2, 0, 5, -3, 2});
  Tensor targets = Tensor::of<int32_t>({3}, {1, 1, -1});
  Tensor loss =
      runKernel1("moe.cross_entropy", {logits, targets}, zeros(DType::F64, {}));
  EXPECT_NEAR(loss.at(0), std::log(6.0) / 2, 1e-15);
  // Smoothing 0.1: row 0 stays ln 3; row 1 is 0.9 ln 2 + (0.1 / 3) 5 ln 2.
  loss = runKernel1("moe.cross_entropy", {logits, targets},
                    zeros(DType::F64, {}), {{"label_smoothing", 0.1}});
  EXPECT_NEAR(loss.at(0), 0.9189846406326924, 1e-15);
  // All ignored: 0 / max(1, 0).
  loss = runKernel1("moe.cross_entropy",
                    {logits, Tensor::of<int32_t>({3}, {-1, -1, -1})},
                    zeros(DType::F64, {}));
  EXPECT_EQ(loss.at(0), 0.0);
  Tensor dlogits = runKernel1("moe.cross_entropy_grad",
                              {logits, targets, scalarF64(2.0)}, like(logits));
  expectValues(dlogits,
               {1.0 / 3, 1.0 / 3 - 1, 1.0 / 3, 0.25, 0.5 - 1, 0.25, 0, 0, 0},
               1e-15, "cross_entropy_grad");
}

TEST(CpuKernels, CrossEntropyCountsTargetsAtTheFirstLargestLogit) {
  // Rows: argmax 2 (hit); a tie of 1 and 3 goes to 1 (hit); argmax 0
  // against target 2 (miss); ignored although its argmax is its target;
  // all -inf: index 0 (hit).
  float inf = std::numeric_limits<float>::infinity();
  // clang-format off
  Tensor logits = Tensor::of<float>({5, 4}, {0.5f, -1, 2.5f, 2,
                                             0, 7, 1, 7,
                                             3, 1, 2, -4,
                                             0, 0, 9, 0,
                                             -inf, -inf, -inf, -inf});
  // clang-format on
  Tensor targets = Tensor::of<int32_t>({5}, {2, 1, 2, -1, 0});
  std::vector<Tensor> out =
      runKernel("moe.cross_entropy", {logits, targets},
                {absent(), zeros(DType::F32, {}), zeros(DType::F32, {})});
  EXPECT_EQ(out[1].at(0), 4.0);
  EXPECT_EQ(out[2].at(0), 3.0);
  // The tie's other index, and a miss on the all -inf row.
  targets = Tensor::of<int32_t>({5}, {2, 3, 2, -1, 1});
  out = runKernel("moe.cross_entropy", {logits, targets},
                  {absent(), absent(), zeros(DType::F32, {})});
  EXPECT_EQ(out[2].at(0), 1.0);
}

// A masked vocabulary entry (-inf) takes no probability: without label
// smoothing the loss and gradient stay finite, in f32 and f64, also for a
// smoothing too small for a float. Smoothing puts mass on it, so the loss
// is then +inf.
TEST(CpuKernels, CrossEntropyOfMaskedLogits) {
  const double inf = std::numeric_limits<double>::infinity();
  const double ln3 = std::log(3.0);
  Tensor targets = Tensor::of<int32_t>({2}, {0, 3});
  for (DType dtype : {DType::F32, DType::F64}) {
    SCOPED_TRACE(dtypeName(dtype));
    // Row 0: p = [1/2, 0, 1/2, 0], target 0 (loss ln 2); row 1:
    // p = [0, 1/4, 0, 3/4], target 3 (loss ln 4 - ln 3).
    Tensor logits =
        Tensor::of<double>({2, 4}, {0, -inf, 0, -inf, -inf, 0, -inf, ln3})
            .to(dtype);
    double tolerance = dtype == DType::F32 ? 1e-6 : 1e-15;
    Tensor loss =
        runKernel1("moe.cross_entropy", {logits, targets}, zeros(dtype, {}));
    EXPECT_NEAR(loss.at(0), (std::log(2.0) + std::log(4.0) - ln3) / 2,
                tolerance);
    Tensor dlogits =
        runKernel1("moe.cross_entropy_grad",
                   {logits, targets, Tensor::of<double>({}, {2.0}).to(dtype)},
                   zeros(dtype, {2, 4}));
    expectValues(dlogits, {0.5 - 1, 0, 0.5, 0, 0, 0.25, 0, 0.75 - 1}, tolerance,
                 "cross_entropy_grad");
    // A smoothing that rounds to 0 in float is 0, as the device library
    // sees it: the same finite loss and gradient.
    const Json tiny = {{"label_smoothing", 1e-50}};
    EXPECT_EQ(runKernel1("moe.cross_entropy", {logits, targets},
                         zeros(dtype, {}), tiny)
                  .at(0),
              loss.at(0));
    Tensor tinyGrad =
        runKernel1("moe.cross_entropy_grad",
                   {logits, targets, Tensor::of<double>({}, {2.0}).to(dtype)},
                   zeros(dtype, {2, 4}), tiny);
    for (int64_t i = 0; i < 8; ++i)
      EXPECT_EQ(tinyGrad.at(i), dlogits.at(i)) << "element " << i;
    loss = runKernel1("moe.cross_entropy", {logits, targets}, zeros(dtype, {}),
                      {{"label_smoothing", 0.1}});
    EXPECT_EQ(loss.at(0), inf);
  }
}

// f32 logits take their exps in float through the vectorised exp, f64 ones
// in double. Over a vocabulary of 5003 with logits whose exps underflow
// beside the random ones, with and without label smoothing, the f32 loss
// keeps to the double result on the same values within a few f32 ulps,
// and its gradient within a few ulps of its largest element.
TEST(CpuKernels, CrossEntropyInFloatTracksDouble) {
  const int64_t rows = 6, vocab = 5003;
  const std::vector<int32_t> tg = {1, 16, 4000, -1, 5002, 9};
  Tensor targets = Tensor::of<int32_t>({rows}, tg);
  for (double smoothing : {0.0, 0.1}) {
    SCOPED_TRACE(smoothing);
    Tensor logits = randomTensor(DType::F32, {rows, vocab}, 41, -12.0, 12.0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t v = r; v < vocab; v += 7)
        logits.set(r * vocab + v, -100.0);
      if (tg[r] >= 0)
        logits.set(r * vocab + tg[r], 2.5 + static_cast<double>(r));
    }
    Tensor exact = logits.to(DType::F64);
    const Json attrs = {{"label_smoothing", smoothing}};
    double loss = runKernel1("moe.cross_entropy", {logits, targets},
                             zeros(DType::F32, {}), attrs)
                      .at(0);
    double reference = runKernel1("moe.cross_entropy", {exact, targets},
                                  zeros(DType::F64, {}), attrs)
                           .at(0);
    EXPECT_GT(reference, 1.0);
    EXPECT_NEAR(loss, reference, 0x1p-21 * reference);
    Tensor grad =
        runKernel1("moe.cross_entropy_grad", {logits, targets, scalarF32(1.5f)},
                   zeros(DType::F32, {rows, vocab}), attrs);
    Tensor gradReference =
        runKernel1("moe.cross_entropy_grad", {exact, targets, scalarF64(1.5)},
                   zeros(DType::F64, {rows, vocab}), attrs);
    double worst = 0, largest = 0;
    for (int64_t i = 0; i < rows * vocab; ++i) {
      worst = std::max(worst, std::abs(grad.at(i) - gradReference.at(i)));
      largest = std::max(largest, std::abs(gradReference.at(i)));
    }
    EXPECT_GT(largest, 0.1);
    EXPECT_LE(worst, 0x1p-21 * largest);
  }
}

TEST(CpuKernels, CrossEntropyRejectsTargetPastVocab) {
  Tensor logits = zeros(DType::F32, {2, 4});
  Tensor targets = Tensor::of<int32_t>({2}, {0, 4});
  try {
    runKernel1("moe.cross_entropy", {logits, targets}, zeros(DType::F32, {}));
    ADD_FAILURE() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("targets[1] = 4"), std::string::npos)
        << e.what();
  }
}

TEST(CpuKernels, ZLoss) {
  // lse of row 0 is ln 2, of row 1 ln 4: mean of squares 2.5 ln^2 2.
  double ln3 = std::log(3.0);
  Tensor logits = Tensor::of<double>({2, 2}, {0, 0, ln3, 0});
  Tensor loss = runKernel1("moe.z_loss", {logits}, zeros(DType::F64, {}));
  EXPECT_NEAR(loss.at(0), 1.2011325347955035, 1e-15);
  // Large logits stay finite (max-shifted logsumexp).
  Tensor big = Tensor::of<float>({1, 2}, {1000, 1000});
  loss = runKernel1("moe.z_loss", {big}, zeros(DType::F32, {}));
  EXPECT_NEAR(loss.at(0), std::pow(1000 + std::log(2.0), 2), 1.0);
}

TEST(CpuKernels, ElementwiseBroadcastsScalars) {
  Tensor v = Tensor::of<double>({3}, {1, 2, 4});
  Tensor s = scalarF64(10);
  auto run = [&](const char *op, const Tensor &a, const Tensor &b) {
    return runKernel1(op, {a, b}, zeros(DType::F64, {3}));
  };
  expectValues(run("arith.addf", v, s), {11, 12, 14}, 0, "addf");
  expectValues(run("arith.subf", s, v), {9, 8, 6}, 0, "subf");
  expectValues(run("arith.mulf", v, s), {10, 20, 40}, 0, "mulf");
  expectValues(run("arith.divf", s, v), {10, 5, 2.5}, 0, "divf");
  expectValues(run("arith.addf", v, v), {2, 4, 8}, 0, "same shape");
  expectValues(runKernel1("arith.negf", {v}, like(v)), {-1, -2, -4}, 0, "negf");
  Tensor scalarOut =
      runKernel1("arith.mulf", {s, scalarF64(3)}, zeros(DType::F64, {}));
  EXPECT_EQ(scalarOut.at(0), 30);

  double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor a = Tensor::of<double>({3}, {1, nan, -0.0});
  Tensor b = Tensor::of<double>({3}, {2, 0, 0.0});
  Tensor mx = run("arith.maximumf", a, b), mn = run("arith.minimumf", a, b);
  EXPECT_EQ(mx.at(0), 2);
  EXPECT_TRUE(std::isnan(mx.at(1)));
  EXPECT_FALSE(std::signbit(mx.at(2)));
  EXPECT_EQ(mn.at(0), 1);
  EXPECT_TRUE(std::isnan(mn.at(1)));
  EXPECT_TRUE(std::signbit(mn.at(2)));
  EXPECT_THROW(run("arith.addf", v, zeros(DType::F64, {2})), Error);
}

// Casts between f32 and bf16 convert directly on the cpu device (not
// through its f32 staging): rounding to nearest even, ties both ways,
// NaN kept, overflow to infinity; bf16 to f32 exactly; anything else is
// left to the staged kernel.
TEST(CpuKernels, CastsBetweenF32AndBf16Directly) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 1 + 2^-8 ties down to 1, 1 + 3 * 2^-8 ties up to 1 + 2^-6; 1 + 2^-8 +
  // 2^-20 rounds up; the largest float rounds to infinity.
  Tensor x = Tensor::of<float>(
      {8}, {1.0f, 1.00390625f, 1.01171875f, 1.0039072f, -2.5f, nan,
            std::numeric_limits<float>::max(), -0.0f});
  Tensor y = zeros(DType::BF16, {8});
  auto run = [](const Tensor &in, const Tensor &out) {
    cpu::KernelContext ctx{"moe.cast",   {in.view()},
                           {out.view()}, cpu::Attrs(Json::object(), "moe.cast"),
                           nullptr,      {}};
    return cpu::castWithBf16(ctx);
  };
  ASSERT_TRUE(run(x, y));
  const std::vector<uint16_t> want = {0x3f80, 0x3f80, 0x3f82, 0x3f81,
                                      0xc020, 0x7fc0, 0x7f80, 0x8000};
  for (int64_t i = 0; i < 8; ++i)
    EXPECT_EQ(y.data<uint16_t>()[i], want[size_t(i)]) << "element " << i;

  Tensor back = zeros(DType::F32, {8});
  ASSERT_TRUE(run(y, back));
  const std::vector<float> exact = {1.0f, 1.0f, 1.015625f, 1.0078125f, -2.5f};
  for (int64_t i = 0; i < 5; ++i)
    EXPECT_EQ(back.data<float>()[i], exact[size_t(i)]) << "element " << i;
  EXPECT_TRUE(std::isnan(back.data<float>()[5]));
  EXPECT_TRUE(std::isinf(back.data<float>()[6]));
  EXPECT_TRUE(std::signbit(back.data<float>()[7]));

  Tensor copy = zeros(DType::BF16, {8});
  ASSERT_TRUE(run(y, copy));
  EXPECT_EQ(std::memcmp(copy.raw(), y.raw(), 16), 0);

  EXPECT_FALSE(run(x, zeros(DType::F32, {8})));
  EXPECT_FALSE(run(convert(x, DType::F64), zeros(DType::BF16, {8})));
  EXPECT_FALSE(run(x, zeros(DType::BF16, {4})));
}

TEST(CpuKernels, DropoutMaskIsReproducibleAndPreservesTheMean) {
  const int64_t n = 100003;
  Tensor x = randomTensor(DType::F32, {n}, 7, 0.5, 1.5);
  Json attrs = {{"rate", 0.3}, {"stream", 42}};
  Tensor y1 = runKernel1("moe.dropout", {x, scalarI64(11)}, like(x), attrs);
  Tensor y2 = runKernel1("moe.dropout", {x, scalarI64(11)}, like(x), attrs);
  Tensor y3 = runKernel1("moe.dropout", {x, scalarI64(12)}, like(x), attrs);
  int64_t kept = 0, differ = 0;
  double sumX = 0, sumY = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(y1.at(i), y2.at(i));
    differ += (y1.at(i) == 0) != (y3.at(i) == 0);
    bool keep = philoxUniform(11, 42, i) < 0.7;
    ASSERT_EQ(y1.at(i) != 0, keep) << i;
    if (keep) {
      EXPECT_EQ(y1.data<float>()[i], x.data<float>()[i] / 0.7f);
    }
    kept += keep;
    sumX += x.at(i);
    sumY += y1.at(i);
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.7, 0.01);
  EXPECT_NEAR(sumY / sumX, 1.0, 0.01);
  EXPECT_GT(differ, n / 4);
  // The backward draws the same mask.
  Tensor dx =
      runKernel1("moe.dropout_grad", {x, scalarI64(11)}, like(x), attrs);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(dx.at(i), y1.at(i));
  // A 64-bit stream id (as from streamId) reinterprets as uint64.
  uint64_t stream = streamId("layers.0.dropout");
  Tensor y4 =
      runKernel1("moe.dropout", {x, scalarI64(-5)}, like(x),
                 {{"rate", 0.5}, {"stream", static_cast<int64_t>(stream)}});
  for (int64_t i = 0; i < 100; ++i)
    EXPECT_EQ(y4.at(i) != 0, philoxUniform(static_cast<uint64_t>(int64_t(-5)),
                                           stream, i) < 0.5);
}

TEST(CpuKernels, DropoutKeepsExactlyTheDrawsBelowTheKeepProbability) {
  // Rates whose keep probability times 2^24 is whole (0, 0.25, 1) and not
  // (0.1, 0.3, a keep probability below 2^-24): the mask is the uniform
  // draw's test, element for element, over a length no task size divides.
  const int64_t n = 4099;
  Tensor x = randomTensor(DType::F32, {n}, 5, 0.5, 1.5);
  for (double rate : {0.0, 0.1, 0.25, 0.3, 1.0, 1.0 - 1e-9}) {
    Tensor y = runKernel1("moe.dropout", {x, scalarI64(3)}, like(x),
                          {{"rate", rate}, {"stream", 9}});
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(y.at(i) != 0, philoxUniform(3, 9, i) < 1.0 - rate)
          << "rate " << rate << ", element " << i;
  }
}

TEST(CpuKernels, GlobalNormSumsAllOperands) {
  Tensor a = Tensor::of<float>({2}, {3, 4});
  Tensor b = Tensor::of<double>({1}, {12});
  Tensor norm = runKernel1("moe.global_norm", {a, b}, zeros(DType::F32, {}));
  EXPECT_EQ(norm.at(0), 13);
  norm = runKernel1("moe.global_norm", {a}, zeros(DType::F64, {}));
  EXPECT_EQ(norm.at(0), 5);
}

// Lengths around the 16 partial sums and the 32768-element chunks: the norm
// is that of a long double sum over every element, f32 and f64 operands.
TEST(CpuKernels, GlobalNormOfRaggedLengths) {
  std::vector<Tensor> grads = {randomTensor(DType::F32, {65536 + 13}, 31),
                               randomTensor(DType::F32, {15}, 32),
                               randomTensor(DType::F64, {32768 + 17}, 33),
                               randomTensor(DType::F32, {1}, 34)};
  long double sum = 0;
  for (const Tensor &g : grads)
    for (int64_t i = 0; i < g.numel(); ++i)
      sum += static_cast<long double>(g.at(i)) * g.at(i);
  Tensor norm = runKernel1("moe.global_norm", grads, zeros(DType::F64, {}));
  EXPECT_NEAR(norm.at(0), std::sqrt(static_cast<double>(sum)),
              1e-13 * std::sqrt(static_cast<double>(sum)));
}

} // namespace
