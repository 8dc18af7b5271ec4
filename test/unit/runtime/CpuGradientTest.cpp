//===- CpuGradientTest.cpp - finite-difference checks of every grad op ----===//
//
// Each test draws f64 inputs, projects the forward op's result onto a random
// r (loss = <r, y>) and compares the grad op, fed dy = r, with central
// differences of that loss.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"

#include <algorithm>
#include <gtest/gtest.h>
#include <numeric>
#include <random>

using namespace moec;
using namespace moec::test;

namespace {

constexpr DType F64 = DType::F64;
const char *const kActivations[] = {"identity", "relu", "gelu_tanh",
                                    "gelu_erf", "silu", "tanh"};

TEST(CpuGradients, Embedding) {
  Tensor ids = Tensor::of<int32_t>({2, 3}, {1, 4, 1, 0, 2, 4});
  Tensor table = randomTensor(F64, {5, 3}, 1);
  Tensor r = randomTensor(F64, {2, 3, 3}, 2);
  auto loss = [&] {
    return dotProduct(runKernel1("moe.embedding", {ids, table}, like(r)), r);
  };
  Tensor dtable =
      runKernel1("moe.embedding_grad", {ids, r}, like(table), {{"vocab", 5}});
  expectGradient(loss, table, dtable, "dtable");
}

TEST(CpuGradients, AddPositions) {
  Tensor x = randomTensor(F64, {2, 3, 2}, 1);
  Tensor table = randomTensor(F64, {6, 2}, 2);
  Tensor start = scalarI64(2), r = randomTensor(F64, {2, 3, 2}, 3);
  auto loss = [&] {
    return dotProduct(
        runKernel1("moe.add_positions", {x, table, start}, like(x)), r);
  };
  Tensor dtable = runKernel1("moe.add_positions_grad", {r, start}, like(table),
                             {{"max_len", 6}});
  expectGradient(loss, table, dtable, "dtable");
  expectGradient(loss, x, r, "dx = dy");
}

TEST(CpuGradients, Rope) {
  // The gradient is the inverse rotation (moe.rope with `inverse`), with
  // part of each head passing through and a start past 0.
  for (int64_t rotary : {2, 6}) {
    SCOPED_TRACE(rotary);
    Tensor x = randomTensor(F64, {2, 3, 12}, 1);
    Tensor start = scalarI64(4), r = randomTensor(F64, {2, 3, 12}, 2);
    Json attrs = {{"num_heads", 2},
                  {"head_dim", 6},
                  {"rotary_dim", rotary},
                  {"base", 50.0}};
    auto loss = [&] {
      return dotProduct(runKernel1("moe.rope", {x, start}, like(x), attrs), r);
    };
    Json inverse = attrs;
    inverse["inverse"] = true;
    Tensor dx = runKernel1("moe.rope", {r, start}, like(x), inverse);
    expectGradient(loss, x, dx, "dx");
  }
}

TEST(CpuGradients, Linear) {
  for (bool transposed : {false, true}) {
    for (bool bias : {false, true}) {
      SCOPED_TRACE(testing::Message()
                   << "transposed " << transposed << " bias " << bias);
      Tensor x = randomTensor(F64, {2, 3, 4}, 1);
      Tensor w = randomTensor(F64, transposed ? Shape{5, 4} : Shape{4, 5}, 2);
      Tensor b = bias ? randomTensor(F64, {5}, 3) : absent();
      Tensor r = randomTensor(F64, {2, 3, 5}, 4);
      Json attrs = Json::object();
      if (transposed)
        attrs["transpose_weight"] = true;
      auto loss = [&] {
        return dotProduct(runKernel1("moe.linear", {x, w, b}, like(r), attrs),
                          r);
      };
      Json gradAttrs = attrs;
      std::vector<Tensor> outs = {like(x), like(w)};
      if (bias) {
        gradAttrs["has_bias"] = true;
        outs.push_back(like(b));
      }
      std::vector<Tensor> grads =
          runKernel("moe.linear_grad", {x, w, r}, outs, gradAttrs);
      expectGradient(loss, x, grads[0], "dx");
      expectGradient(loss, w, grads[1], "dweight");
      if (bias)
        expectGradient(loss, b, grads[2], "dbias");
    }
  }
}

// 13 columns: the row sums take both laneSum's eight-wide body and its tail.
TEST(CpuGradients, LayerNorm) {
  Tensor x = randomTensor(F64, {3, 13}, 1, -2, 2);
  Tensor gamma = randomTensor(F64, {13}, 2, 0.5, 1.5);
  Tensor beta = randomTensor(F64, {13}, 3);
  Tensor r = randomTensor(F64, {3, 13}, 4);
  auto loss = [&] {
    return dotProduct(runKernel1("moe.layer_norm", {x, gamma, beta}, like(x)),
                      r);
  };
  std::vector<Tensor> grads = runKernel("moe.layer_norm_grad", {x, gamma, r},
                                        {like(x), like(gamma), like(beta)});
  expectGradient(loss, x, grads[0], "dx");
  expectGradient(loss, gamma, grads[1], "dgamma");
  expectGradient(loss, beta, grads[2], "dbeta");
}

TEST(CpuGradients, RmsNorm) {
  Tensor x = randomTensor(F64, {3, 13}, 1, -2, 2);
  Tensor gamma = randomTensor(F64, {13}, 2, 0.5, 1.5);
  Tensor r = randomTensor(F64, {3, 13}, 4);
  auto loss = [&] {
    return dotProduct(runKernel1("moe.rms_norm", {x, gamma}, like(x)), r);
  };
  std::vector<Tensor> grads =
      runKernel("moe.rms_norm_grad", {x, gamma, r}, {like(x), like(gamma)});
  expectGradient(loss, x, grads[0], "dx");
  expectGradient(loss, gamma, grads[1], "dgamma");
}

TEST(CpuGradients, Activations) {
  for (const char *kind : kActivations) {
    SCOPED_TRACE(kind);
    Tensor x = randomTensor(F64, {24}, 1, -3, 3);
    Tensor r = randomTensor(F64, {24}, 2);
    Json attrs = {{"kind", kind}};
    auto loss = [&] {
      return dotProduct(runKernel1("moe.activation", {x}, like(x), attrs), r);
    };
    Tensor dx = runKernel1("moe.activation_grad", {x, r}, like(x), attrs);
    expectGradient(loss, x, dx, "dx");
  }
}

TEST(CpuGradients, Dropout) {
  Tensor x = randomTensor(F64, {40}, 1);
  Tensor seed = scalarI64(3), r = randomTensor(F64, {40}, 2);
  Json attrs = {{"rate", 0.4}, {"stream", 9}};
  auto loss = [&] {
    return dotProduct(runKernel1("moe.dropout", {x, seed}, like(x), attrs), r);
  };
  Tensor dx = runKernel1("moe.dropout_grad", {r, seed}, like(x), attrs);
  expectGradient(loss, x, dx, "dx");
}

struct AttentionCase {
  int64_t heads, kvHeads, sq, sk;
  bool causal;
};

TEST(CpuGradients, Attention) {
  const int64_t batch = 2, dh = 3;
  for (AttentionCase c :
       {AttentionCase{2, 2, 3, 3, false}, AttentionCase{2, 2, 3, 3, true},
        AttentionCase{4, 2, 3, 3, true}, AttentionCase{4, 2, 3, 3, false},
        AttentionCase{4, 1, 3, 3, true}, AttentionCase{4, 1, 3, 3, false},
        AttentionCase{2, 1, 2, 4, true}, AttentionCase{2, 1, 2, 4, false}}) {
    SCOPED_TRACE(testing::Message()
                 << "H " << c.heads << " Hkv " << c.kvHeads << " Sq " << c.sq
                 << " Sk " << c.sk << " causal " << c.causal);
    Tensor q = randomTensor(F64, {batch, c.sq, c.heads * dh}, 1, -1.5, 1.5);
    Tensor k = randomTensor(F64, {batch, c.sk, c.kvHeads * dh}, 2, -1.5, 1.5);
    Tensor v = randomTensor(F64, {batch, c.sk, c.kvHeads * dh}, 3);
    Tensor r = randomTensor(F64, {batch, c.sq, c.heads * dh}, 4);
    Json attrs = {{"num_heads", c.heads},
                  {"num_kv_heads", c.kvHeads},
                  {"scale", 0.57735026918962576}};
    if (c.causal)
      attrs["causal"] = true;
    // Without a key mask, then with the last key of batch 1 and the first
    // of batch 0 masked (padding on either side).
    Tensor mask(DType::I32, {batch, c.sk});
    for (int64_t i = 0; i < batch * c.sk; ++i)
      mask.set(i, i == 0 || i == batch * c.sk - 1 ? 0 : 1);
    for (const Tensor &keyMask : {absent(), mask}) {
      SCOPED_TRACE(keyMask.numel() ? "key mask" : "no key mask");
      auto forward = [&] {
        return runKernel("moe.attention", {q, k, v, absent(), keyMask},
                         {like(q), zeros(F64, {batch, c.heads, c.sq})}, attrs);
      };
      auto loss = [&] { return dotProduct(forward()[0], r); };
      std::vector<Tensor> fwd = forward();
      std::vector<Tensor> grads = runKernel(
          "moe.attention_grad", {q, k, v, fwd[0], fwd[1], r, keyMask},
          {like(q), like(k), like(v)}, attrs);
      expectGradient(loss, q, grads[0], "dq");
      expectGradient(loss, k, grads[1], "dk");
      expectGradient(loss, v, grads[2], "dv");
    }
  }
}

/// Logits whose entries per token are a permutation of 0, 0.8, 1.6, ... plus
/// small noise, so no perturbation of size h reorders them.
Tensor separatedLogits(int64_t n, int64_t e, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> noise(0.0, 0.1);
  std::vector<double> values;
  for (int64_t t = 0; t < n; ++t) {
    std::vector<int> perm(e);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), gen);
    for (int64_t i = 0; i < e; ++i)
      values.push_back(0.8 * perm[i] + noise(gen));
  }
  return Tensor::of<double>({n, e}, values);
}

struct RouterCase {
  const char *gate;
  const char *capacity;
  const char *priority;
  bool withGates, withProbs;
};

TEST(CpuGradients, TopkRouter) {
  const int64_t n = 6, e = 4, k = 2;
  std::vector<RouterCase> cases;
  for (const char *gate :
       {"raw", "renorm_detached", "softmax_topk", "unit", "renorm"}) {
    cases.push_back({gate, "none", "token_order", true, true});
    cases.push_back({gate, "switch", "bpr", true, true});
    cases.push_back({gate, "switch", "token_order", true, false});
  }
  cases.push_back({"raw", "none", "token_order", false, true});
  for (const RouterCase &c : cases) {
    SCOPED_TRACE(testing::Message()
                 << c.gate << " " << c.capacity << " " << c.priority
                 << " gates " << c.withGates << " probs " << c.withProbs);
    Tensor logits = separatedLogits(n, e, 5);
    Tensor rg = c.withGates ? randomTensor(F64, {n, k}, 6) : absent();
    Tensor rp = c.withProbs ? randomTensor(F64, {n, e}, 7) : absent();
    Json attrs = {{"k", k},
                  {"gate", c.gate},
                  {"capacity", c.capacity},
                  {"capacity_factor", 0.5},
                  {"min_capacity", 0},
                  {"priority", c.priority}};
    auto forward = [&] {
      return runKernel("moe.topk_router", {logits},
                       {like(logits), zeros(DType::I32, {n, k}),
                        zeros(F64, {n, k}), zeros(DType::I32, {n, k})},
                       attrs);
    };
    std::vector<Tensor> base = forward();
    const Tensor &probs0 = base[0], &expert0 = base[1], &slot0 = base[3];
    if (std::string(c.capacity) == "switch") {
      // C = ceil(0.5 * 2 * 6 / 4) = 2 must drop something here.
      std::vector<double> slots = values(slot0);
      ASSERT_NE(std::find(slots.begin(), slots.end(), -1.0), slots.end());
    }
    bool detached = std::string(c.gate) == "renorm_detached";
    auto loss = [&] {
      std::vector<Tensor> out = forward();
      double l = rp.empty() ? 0.0 : dotProduct(out[0], rp);
      if (rg.empty())
        return l;
      if (!detached)
        return l + dotProduct(out[2], rg);
      // renorm_detached: the denominator is a constant at the base point.
      const int32_t *ex = expert0.data<int32_t>();
      for (int64_t t = 0; t < n; ++t) {
        double s0 = 0;
        for (int64_t j = 0; j < k; ++j)
          s0 += probs0.at(t * e + ex[t * k + j]);
        for (int64_t j = 0; j < k; ++j)
          if (slot0.at(t * k + j) >= 0)
            l += rg.at(t * k + j) * out[0].at(t * e + ex[t * k + j]) / s0;
      }
      return l;
    };
    Tensor dlogits = runKernel1("moe.topk_router_grad",
                                {base[0], base[1], base[2], base[3], rg, rp},
                                like(logits), {{"gate", c.gate}});
    expectGradient(loss, logits, dlogits, "dlogits");
  }
}

struct FfnCase {
  const char *activation;
  bool glu, biases;
};

TEST(CpuGradients, ExpertFfn) {
  const int64_t n = 5, d = 3, f = 4, e = 3, k = 2;
  // Routing from the router with a capacity that drops assignments.
  Tensor logits = separatedLogits(n, e, 11);
  std::vector<Tensor> routed =
      runKernel("moe.topk_router", {logits},
                {like(logits), zeros(DType::I32, {n, k}), zeros(F64, {n, k}),
                 zeros(DType::I32, {n, k})},
                {{"k", k},
                 {"gate", "raw"},
                 {"capacity", "switch"},
                 {"capacity_factor", 0.5},
                 {"min_capacity", 0},
                 {"priority", "token_order"}});
  Tensor expert = routed[1], slot = routed[3];
  std::vector<double> slots = values(slot);
  ASSERT_NE(std::find(slots.begin(), slots.end(), -1.0), slots.end());

  std::vector<FfnCase> cases;
  for (const char *activation : kActivations) {
    cases.push_back({activation, false, true});
    cases.push_back({activation, true, true});
  }
  cases.push_back({"gelu_tanh", false, false});
  cases.push_back({"silu", true, false});
  for (const FfnCase &c : cases) {
    SCOPED_TRACE(testing::Message()
                 << c.activation << " glu " << c.glu << " biases " << c.biases);
    Tensor x = randomTensor(F64, {n, d}, 1);
    Tensor gates = randomTensor(F64, {n, k}, 2, 0.2, 1.0);
    Tensor w1 = randomTensor(F64, {e, d, f}, 3);
    Tensor b1 = c.biases ? randomTensor(F64, {e, f}, 4) : absent();
    Tensor w2 = randomTensor(F64, {e, f, d}, 5);
    Tensor b2 = c.biases ? randomTensor(F64, {e, d}, 6) : absent();
    Tensor w3 = c.glu ? randomTensor(F64, {e, d, f}, 7) : absent();
    Tensor r = randomTensor(F64, {n, d}, 8);
    Json attrs = {{"activation", c.activation}};
    auto loss = [&] {
      return dotProduct(runKernel1("moe.expert_ffn",
                                   {x, expert, gates, slot, w1, b1, w2, b2, w3},
                                   like(x), attrs),
                        r);
    };
    auto likeIf = [](const Tensor &t) {
      return t.empty() ? absent() : like(t);
    };
    std::vector<Tensor> grads = runKernel(
        "moe.expert_ffn_grad", {x, expert, gates, slot, w1, b1, w2, b2, w3, r},
        {like(x), like(gates), like(w1), likeIf(b1), like(w2), likeIf(b2),
         likeIf(w3)},
        attrs);
    expectGradient(loss, x, grads[0], "dx");
    expectGradient(loss, gates, grads[1], "dgates");
    expectGradient(loss, w1, grads[2], "dw1");
    expectGradient(loss, w2, grads[4], "dw2");
    if (c.biases) {
      expectGradient(loss, b1, grads[3], "db1");
      expectGradient(loss, b2, grads[5], "db2");
    }
    if (c.glu)
      expectGradient(loss, w3, grads[6], "dw3");
    // Dropped assignments get no gate gradient.
    for (int64_t a = 0; a < n * k; ++a) {
      if (slot.at(a) < 0) {
        EXPECT_EQ(grads[1].at(a), 0.0);
      }
    }

    // The compact result list (only results whose operand exists) agrees.
    std::vector<Tensor> compact = {like(x), like(gates), like(w1)};
    if (c.biases)
      compact.push_back(like(b1));
    compact.push_back(like(w2));
    if (c.biases)
      compact.push_back(like(b2));
    if (c.glu)
      compact.push_back(like(w3));
    compact = runKernel("moe.expert_ffn_grad",
                        {x, expert, gates, slot, w1, b1, w2, b2, w3, r},
                        compact, attrs);
    expectValues(compact[2], values(grads[2]), 0, "compact dw1");
    expectValues(compact.back(),
                 values(c.glu      ? grads[6]
                        : c.biases ? grads[5]
                                   : grads[4]),
                 0, "compact last");
  }
}

/// Routing of n tokens over e experts with k choices and a capacity that
/// drops some assignments (slot -1), for the routed ops' gradient checks.
std::pair<Tensor, Tensor> droppingRoute(int64_t n, int64_t e, int64_t k) {
  Tensor logits = separatedLogits(n, e, 11);
  std::vector<Tensor> routed =
      runKernel("moe.topk_router", {logits},
                {like(logits), zeros(DType::I32, {n, k}), zeros(F64, {n, k}),
                 zeros(DType::I32, {n, k})},
                {{"k", k},
                 {"gate", "raw"},
                 {"capacity", "switch"},
                 {"capacity_factor", 0.5},
                 {"min_capacity", 0},
                 {"priority", "token_order"}});
  std::vector<double> slots = values(routed[3]);
  EXPECT_NE(std::find(slots.begin(), slots.end(), -1.0), slots.end());
  return {routed[1], routed[3]};
}

TEST(CpuGradients, ExpertMap) {
  const int64_t n = 5, d = 3, h = 4, e = 3, k = 2;
  // References, not structured bindings: a lambda captures them (C++17).
  const std::pair<Tensor, Tensor> route = droppingRoute(n, e, k);
  const Tensor &expert = route.first, &slot = route.second;
  Tensor x = randomTensor(F64, {n, d}, 1);
  Tensor w = randomTensor(F64, {e, d, h}, 2);
  Tensor r = randomTensor(F64, {n, k * h}, 3);
  auto loss = [&] {
    return dotProduct(
        runKernel1("moe.expert_map", {x, expert, slot, w}, like(r)), r);
  };
  std::vector<Tensor> grads = runKernel(
      "moe.expert_map_grad", {x, expert, slot, w, r}, {like(x), like(w)});
  expectGradient(loss, x, grads[0], "dx");
  expectGradient(loss, w, grads[1], "dweight");
}

TEST(CpuGradients, ExpertReduce) {
  const int64_t n = 5, d = 3, h = 4, e = 3, k = 2;
  // References, not structured bindings: a lambda captures them (C++17).
  const std::pair<Tensor, Tensor> route = droppingRoute(n, e, k);
  const Tensor &expert = route.first, &slot = route.second;
  Tensor c = randomTensor(F64, {n, k * h}, 1);
  Tensor gates = randomTensor(F64, {n, k}, 2, 0.2, 1.0);
  Tensor w = randomTensor(F64, {e, h, d}, 3);
  Tensor r = randomTensor(F64, {n, d}, 4);
  auto loss = [&] {
    return dotProduct(runKernel1("moe.expert_reduce",
                                 {c, expert, gates, slot, w}, like(r)),
                      r);
  };
  std::vector<Tensor> grads =
      runKernel("moe.expert_reduce_grad", {c, expert, gates, slot, w, r},
                {like(c), like(gates), like(w)});
  expectGradient(loss, c, grads[0], "dc");
  expectGradient(loss, gates, grads[1], "dgates");
  expectGradient(loss, w, grads[2], "dweight");
}

TEST(CpuGradients, CvLoss) {
  const int64_t n = 6, e = 4, k = 2;
  Tensor gates = randomTensor(F64, {n, k}, 1, 0.05, 1.0);
  Tensor expert = Tensor::of<int32_t>({n, k}, {0, 1, 2, 1, 3, 0, 1, 2, 0, 3,
                                               2, 1});
  Tensor r = scalarF64(0.9);
  Json attrs = {{"num_experts", e}};
  auto loss = [&] {
    return dotProduct(
        runKernel1("moe.cv_loss", {gates, expert}, zeros(F64, {}), attrs), r);
  };
  Tensor dgates = runKernel1("moe.cv_loss_grad", {gates, expert, r},
                             like(gates), attrs);
  expectGradient(loss, gates, dgates, "dgates");
}

TEST(CpuGradients, SwitchLoss) {
  const int64_t n = 6, e = 4, k = 2;
  Tensor probs = randomTensor(F64, {n, e}, 1, 0.05, 1.0);
  // expert: each token's two largest entries (any fixed routing works).
  std::vector<int32_t> experts;
  for (int64_t t = 0; t < n; ++t) {
    std::vector<int32_t> order(e);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return probs.at(t * e + a) > probs.at(t * e + b);
    });
    experts.insert(experts.end(), order.begin(), order.begin() + k);
  }
  Tensor expert = Tensor::of<int32_t>({n, k}, experts);
  Tensor r = scalarF64(1.7);
  for (const char *variant : {"all_slots", "top1", "any_topk"}) {
    SCOPED_TRACE(variant);
    Json attrs = {{"variant", variant}};
    auto loss = [&] {
      return dotProduct(
          runKernel1("moe.switch_loss", {probs, expert}, zeros(F64, {}), attrs),
          r);
    };
    Tensor dprobs = runKernel1("moe.switch_loss_grad", {probs, expert, r},
                               like(probs), attrs);
    expectGradient(loss, probs, dprobs, "dprobs");
  }
}

TEST(CpuGradients, ZLoss) {
  Tensor logits = randomTensor(F64, {4, 5}, 1, -2, 2);
  Tensor r = scalarF64(-0.8);
  auto loss = [&] {
    return dotProduct(runKernel1("moe.z_loss", {logits}, zeros(F64, {})), r);
  };
  Tensor dlogits = runKernel1("moe.z_loss_grad", {logits, r}, like(logits));
  expectGradient(loss, logits, dlogits, "dlogits");
}

TEST(CpuGradients, CrossEntropy) {
  Tensor logits = randomTensor(F64, {5, 6}, 1, -2, 2);
  Tensor targets = Tensor::of<int32_t>({5}, {2, -1, 0, 5, 3});
  Tensor r = scalarF64(1.3);
  for (double smoothing : {0.0, 0.1}) {
    SCOPED_TRACE(smoothing);
    Json attrs = {{"label_smoothing", smoothing}};
    auto loss = [&] {
      return dotProduct(runKernel1("moe.cross_entropy", {logits, targets},
                                   zeros(F64, {}), attrs),
                        r);
    };
    Tensor dlogits = runKernel1("moe.cross_entropy_grad", {logits, targets, r},
                                like(logits), attrs);
    expectGradient(loss, logits, dlogits, "dlogits");
  }
}

} // namespace
