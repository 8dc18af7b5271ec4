//===- ModelGradientTest.cpp - whole-model gradients vs finite differences ===//
//
// Compiles small models in float64 and compares every parameter gradient of
// the `backward` program with central differences of the `loss` program.
// Together the variants cover every differentiable op and every routing
// option, so autodiff, the gradient ops and the cpu kernels are checked as
// one system.
//
//===----------------------------------------------------------------------===//

#include "moec/Compiler.h"
#include "Philox.h"
#include "moec/Session.h"

#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>

using namespace moec;

namespace {

struct Variant {
  const char *name;
  const char *model; // the body of `model m { ... }`
  const char *train; // extra train settings
};

// Test names show the variant, not its bytes.
void PrintTo(const Variant &v, std::ostream *os) { *os << v.name; }

std::string specOf(const Variant &v) {
  return std::string("moe 1\nmodel m {\n  vocab = 256\n  d_model = 8\n  "
                     "max_seq = 6\n  dtype = f64\n  init_std = 0.3\n") +
         v.model + "\n}\ntrain {\n  batch = 2\n  seq_len = 5\n  seed = 3\n" +
         v.train + "\n}\ndata {\n  source = synthetic(\"grammar\")\n}\n";
}

const Variant kVariants[] = {
    {"PreNormDropless",
     "repeat 2 as i {\n attention(heads = 2)\n if i == 0 { ffn(hidden = 12) } "
     "else { moe(experts = 4, k = 2, hidden = 6, activation = gelu_tanh) }\n}",
     "balance_loss = 0.5\n z_loss = 0.1"},
    {"PostNormGluCapacity",
     "norm = rms_norm\n norm_position = post\n tie_embeddings = true\n"
     "positions = none\n"
     "block {\n attention(heads = 4, kv_heads = 2, bias = true)\n"
     " moe(experts = 3, k = 2, hidden = 5, activation = silu, glu = true, "
     "bias = true, router_bias = true, gate = softmax_topk, "
     "capacity = tutel(factor = 1.0), priority = bpr, balance = top1)\n}",
     "balance_loss = 0.3\n z_loss = 0.05\n label_smoothing = 0.1"},
    // renorm_detached is left out on purpose: its denominator is a
    // stop-gradient, so its backward is not the derivative finite differences
    // measure (the kernel tests check it against the detached formula).
    {"SwitchCapacityDropout",
     "dropout = 0.2\n"
     "block {\n attention(heads = 1)\n"
     " moe(experts = 4, k = 2, hidden = 6, activation = relu, "
     "gate = raw, capacity = switch(factor = 0.75), "
     "balance = any_topk)\n ffn(hidden = 8, activation = gelu_erf, glu = true)\n}",
     "balance_loss = 0.2"},
    {"MultiHeadRenorm",
     "norm = rms_norm\n"
     "block {\n attention(heads = 2)\n"
     " mh_moe(heads = 2, experts = 3, k = 2, hidden = 4, gate = renorm, "
     "capacity = none)\n}",
     "balance_loss = 0.3"},
    {"RopeGroupedQuery",
     "positions = rope(base = 100, fraction = 0.5)\n"
     "repeat 2 {\n attention(heads = 2, kv_heads = 1)\n"
     " moe(experts = 3, k = 2, hidden = 6)\n}",
     ""},
    // MAE trained jointly: the gate's BatchNorm in training mode (batch
    // statistics over the B * S per-position summaries), tanh MLP with
    // dropout, the per-head scales.
    {"MaeJointPrefix",
     "block {\n mae(heads = 2, gate_hidden = 6, gate_dropout = 0.3)\n"
     " ffn(hidden = 8)\n}",
     ""},
    {"MaeLastWindowPostNorm",
     "norm_position = post\n"
     "repeat 2 {\n mae(heads = 4, head_dim = 3, bias = true, gate_hidden = 5, "
     "gate_dropout = 0, pool = last(size = 2))\n ffn(hidden = 8)\n}",
     ""},
    {"UnitGateMultiQuery",
     "block {\n attention(heads = 2, kv_heads = 1)\n"
     " moe(experts = 4, k = 3, hidden = 4, activation = tanh, gate = unit)\n}",
     ""},
};

Tensor tokensOf(const std::vector<int32_t> &values) {
  return Tensor::of<int32_t>({2, 5}, values);
}

class ModelGradient : public ::testing::TestWithParam<Variant> {};

TEST_P(ModelGradient, MatchesCentralDifferences) {
  Bundle bundle = compileSource(specOf(GetParam()), "m.moe");
  Session session(bundle);
  std::map<std::string, Tensor> inputs = {
      {"tokens", tokensOf({84, 104, 101, 32, 99, 97, 116, 32, 115, 97})},
      {"targets", tokensOf({104, 101, 32, 99, 97, 116, 32, 115, 97, 116})}};
  std::vector<std::string> names = bundle.programInputs("loss");
  if (std::find(names.begin(), names.end(), "rng") != names.end())
    inputs["rng"] = Tensor::of<int64_t>({}, {12345});

  std::map<std::string, Tensor> grads = session.run("backward", inputs);
  auto lossAt = [&]() { return session.run("loss", inputs).at("loss").at(0); };
  const double base = lossAt();
  ASSERT_TRUE(std::isfinite(base));
  EXPECT_NEAR(grads.at("loss").at(0), base, 1e-12);

  const double h = 1e-6;
  int checked = 0;
  for (const ParamInfo &p : bundle.params()) {
    if (p.frozen)
      continue; // running statistics: no gradient
    const Tensor &grad = grads.at("grad:" + p.name);
    ASSERT_EQ(grad.shape(), p.shape) << p.name;
    Tensor value = session.param(p.name);
    // A few elements of every parameter, chosen by a fixed stream.
    int64_t n = value.numel();
    for (int k = 0; k < std::min<int64_t>(n, 6); ++k) {
      int64_t i = static_cast<int64_t>(philoxUniform(9, streamId(p.name), k) *
                                       static_cast<double>(n));
      double original = value.data<double>()[i];
      value.data<double>()[i] = original + h;
      session.setParam(p.name, value);
      double plus = lossAt();
      value.data<double>()[i] = original - h;
      session.setParam(p.name, value);
      double minus = lossAt();
      value.data<double>()[i] = original;
      session.setParam(p.name, value);
      double numeric = (plus - minus) / (2 * h);
      double analytic = grad.at(i);
      double scale = std::max({std::abs(numeric), std::abs(analytic), 1e-3});
      EXPECT_LT(std::abs(numeric - analytic) / scale, 1e-5)
          << p.name << "[" << i << "]: finite difference " << numeric
          << ", backward " << analytic;
      ++checked;
    }
  }
  EXPECT_GT(checked, 30);
}

INSTANTIATE_TEST_SUITE_P(Variants, ModelGradient,
                         ::testing::ValuesIn(kVariants),
                         [](const auto &info) { return info.param.name; });

} // namespace
