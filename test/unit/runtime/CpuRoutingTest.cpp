//===- CpuRoutingTest.cpp - router, expert FFN and balance loss cases -----===//

#include "KernelTestUtil.h"

#include "moec/Error.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace moec;
using namespace moec::test;

namespace {

struct Routed {
  Tensor probs, expert, gates, slot;
};

/// Routes `logits [N, E]` with `k` and the given options on top of raw,
/// capacity none, token_order.
Routed route(const Tensor &logits, int64_t k, const Json &options = {},
             const Tensor &mask = absent(), const Tensor &seed = absent()) {
  int64_t n = logits.shape()[0];
  Json attrs = {{"k", k},
                {"gate", "raw"},
                {"capacity", "none"},
                {"priority", "token_order"},
                {"capacity_factor", 1.0},
                {"min_capacity", 0}};
  if (options.is_object())
    attrs.update(options);
  std::vector<Tensor> out =
      runKernel("moe.topk_router", {logits, mask, seed},
                {like(logits), zeros(DType::I32, {n, k}),
                 zeros(logits.dtype(), {n, k}), zeros(DType::I32, {n, k})},
                attrs);
  return {out[0], out[1], out[2], out[3]};
}

Tensor expertLoad(const Routed &r, int64_t numExperts) {
  return runKernel1("moe.expert_load", {r.expert, r.slot},
                    zeros(DType::F32, {numExperts}),
                    {{"num_experts", numExperts}});
}

TEST(CpuRouting, TiesGoToTheLowerExpert) {
  Tensor logits = Tensor::of<double>({2, 4}, {1, 3, 3, 0, 0, 0, 0, 0});
  Routed r = route(logits, 2);
  expectValues(r.expert, {1, 2, 0, 1}, 0, "expert");
  // Expert 1 is token 0's first choice, so token 1's second choice queues
  // behind it.
  expectValues(r.slot, {0, 0, 0, 1}, 0, "slot");
  expectValues(r.probs,
               {0.06193487661559987, 0.4576402777930156, 0.4576402777930156,
                0.022784567798369113, 0.25, 0.25, 0.25, 0.25},
               1e-15, "probs");
  expectValues(r.gates, {0.4576402777930156, 0.4576402777930156, 0.25, 0.25},
               1e-15, "gates");
}

TEST(CpuRouting, GateWeightings) {
  // p = [1/2, 1/4, 1/8, 1/8]; the top two are experts 0 and 1.
  Tensor logits =
      Tensor::of<double>({1, 4}, {std::log(4.0), std::log(2.0), 0.0, 0.0});
  expectValues(route(logits, 2, {{"gate", "raw"}}).gates, {0.5, 0.25}, 1e-15,
               "raw");
  expectValues(route(logits, 2, {{"gate", "renorm_detached"}}).gates,
               {2.0 / 3, 1.0 / 3}, 1e-15, "renorm_detached");
  expectValues(route(logits, 2, {{"gate", "softmax_topk"}}).gates,
               {2.0 / 3, 1.0 / 3}, 1e-15, "softmax_topk");
  expectValues(route(logits, 2, {{"gate", "unit"}}).gates, {1, 1}, 0, "unit");
  expectValues(route(logits, 2, {{"gate", "renorm"}}).gates,
               {2.0 / 3, 1.0 / 3}, 1e-15, "renorm");
  // renorm leaves a single choice raw (Tutel renormalises only for k > 1).
  expectValues(route(logits, 1, {{"gate", "renorm"}}).gates, {0.5}, 1e-15,
               "renorm k = 1");
}

TEST(CpuRouting, TokenOrderAndBprKeepDifferentTokens) {
  // Tokens 0-2 prefer expert 0 with top-1 probabilities sig(1) < sig(3) >
  // sig(2); token 3 prefers expert 1 with sig(1), tying token 0. Switch
  // capacity ceil(0.5 * 1 * 4 / 2) = 1.
  Tensor logits = Tensor::of<float>({4, 2}, {1, 0, 3, 0, 2, 0, 0, 1});
  Json options = {{"capacity", "switch"}, {"capacity_factor", 0.5}};
  options["priority"] = "token_order";
  Routed inOrder = route(logits, 1, options);
  expectValues(inOrder.slot, {0, -1, -1, 0}, 0, "token_order slots");
  options["priority"] = "bpr";
  Routed bpr = route(logits, 1, options);
  // BPR visits tokens 1, 2, 0, 3 (0 before 3 on the tie).
  expectValues(bpr.slot, {-1, 0, -1, 0}, 0, "bpr slots");
  // Dropped assignments have gate 0; kept ones keep p.
  EXPECT_EQ(bpr.gates.at(0), 0.0);
  EXPECT_EQ(bpr.gates.at(2), 0.0);
  EXPECT_EQ(bpr.gates.at(1), bpr.probs.at(2));
  EXPECT_EQ(inOrder.gates.at(1), 0.0);
  expectValues(expertLoad(bpr, 2), {1, 1}, 0, "load");
}

TEST(CpuRouting, CapacityFormulas) {
  // 10 tokens all choosing experts 0 then 1 (E = 4, k = 2): each of the two
  // experts gets 10 assignments, so the kept count is min(10, C).
  std::vector<float> values;
  for (int t = 0; t < 10; ++t)
    values.insert(values.end(), {3.0f + 0.1f * t, 2.0f, 0.0f, -1.0f});
  Tensor logits = Tensor::of<float>({10, 4}, values);
  auto kept = [&](Json options) {
    return expertLoad(route(logits, 2, options), 4);
  };
  // switch: ceil(1 * 2 * 10 / 4) = 5.
  expectValues(kept({{"capacity", "switch"}}), {5, 5, 0, 0}, 0, "switch");
  // tutel: 2 * floor(1 * ceil(10 / 4)) = 6.
  expectValues(kept({{"capacity", "tutel"}}), {6, 6, 0, 0}, 0, "tutel");
  // sparse_mixer: round_half_even(10 / 4 = 2.5) = 2.
  expectValues(kept({{"capacity", "sparse_mixer"}}), {2, 2, 0, 0}, 0,
               "sparse_mixer");
  expectValues(kept({{"capacity", "none"}}), {10, 10, 0, 0}, 0, "none");
  // fraction: ceil(0.25 * 10) = 3, whatever k and E.
  expectValues(kept({{"capacity", "fraction"}, {"capacity_factor", 0.25}}),
               {3, 3, 0, 0}, 0, "fraction");
  // min_capacity lifts each formula.
  expectValues(kept({{"capacity", "switch"}, {"min_capacity", 7}}),
               {7, 7, 0, 0}, 0, "switch with min_capacity");
  // 1.5 rounds up to 2 (half to even), 0.5 * 2 * 10 / 4 = 2.5 ceils to 3.
  expectValues(kept({{"capacity", "sparse_mixer"}, {"capacity_factor", 0.6}}),
               {2, 2, 0, 0}, 0, "sparse_mixer 1.5");
  expectValues(kept({{"capacity", "switch"}, {"capacity_factor", 0.5}}),
               {3, 3, 0, 0}, 0, "switch 2.5");
  // Second choices queue behind all first choices: with C = 5 the first
  // five tokens keep expert 0 and expert 1 alike.
  Routed r = route(logits, 2, {{"capacity", "switch"}});
  for (int t = 0; t < 10; ++t) {
    EXPECT_EQ(r.slot.at(2 * t), t < 5 ? t : -1);
    EXPECT_EQ(r.slot.at(2 * t + 1), t < 5 ? t : -1);
  }
}

TEST(CpuRouting, TutelCapacityDropsSecondChoicesBeforeFirstChoices) {
  // MH-MoE's rule on random sub-tokens: C = k * ceil(S / E); no expert keeps
  // more than C, every first choice claims its slot before any second
  // choice, and a slot counts the earlier assignments dropped or not.
  const int64_t s = 37, e = 4, k = 2, capacity = k * ((s + e - 1) / e);
  std::vector<float> values;
  uint64_t x = 12345;
  for (int64_t i = 0; i < s * e; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    // Skewed towards expert 0 so that it overflows.
    values.push_back(static_cast<float>((x >> 40) % 1000) / 250.0f +
                     (i % e == 0 ? 1.5f : 0.0f));
  }
  Routed r = route(Tensor::of<float>({s, e}, values), k,
                   {{"capacity", "tutel"}});
  std::vector<int64_t> queued(e, 0), keptCount(e, 0);
  std::vector<bool> firstDropped(e, false);
  int64_t dropped = 0;
  for (int64_t choice = 0; choice < k; ++choice)
    for (int64_t t = 0; t < s; ++t) {
      int64_t expert = static_cast<int64_t>(r.expert.at(t * k + choice));
      int64_t slot = static_cast<int64_t>(r.slot.at(t * k + choice));
      int64_t position = queued[expert]++;
      EXPECT_EQ(slot, position < capacity ? position : -1)
          << "sub-token " << t << " choice " << choice;
      if (slot < 0) {
        ++dropped;
        firstDropped[expert] = firstDropped[expert] || choice == 0;
        EXPECT_EQ(r.gates.at(t * k + choice), 0.0);
      } else {
        ++keptCount[expert];
        EXPECT_FALSE(firstDropped[expert])
            << "a second choice kept after a first choice was dropped";
      }
    }
  EXPECT_GT(dropped, 0);
  for (int64_t i = 0; i < e; ++i)
    EXPECT_LE(keptCount[i], capacity);
  expectValues(expertLoad(r, e),
               std::vector<double>(keptCount.begin(), keptCount.end()), 0,
               "load");
}

TEST(CpuRouting, RoutingStatsByHand) {
  // Two tokens of two sub-tokens (rows), k = 2, E = 3. Token 0 keeps
  // experts 0 and 1 on row 0 and expert 0 again on row 1; token 1 keeps
  // only expert 2 on row 2, and row 3 lost both choices.
  Tensor expert = Tensor::of<int32_t>({4, 2}, {0, 1, 0, 2, 1, 2, 1, 0});
  Tensor slot = Tensor::of<int32_t>({4, 2}, {0, 0, 1, -1, -1, 0, -1, -1});
  Tensor stats = runKernel1("moe.routing_stats", {expert, slot},
                            zeros(DType::F32, {6}),
                            {{"parts", 2}, {"num_experts", 3}});
  // assignments, kept, rows, active rows, tokens * E, distinct experts.
  expectValues(stats, {8, 4, 4, 3, 6, 3}, 0, "stats");
  EXPECT_THROW(runKernel1("moe.routing_stats", {expert, slot},
                          zeros(DType::F32, {6}),
                          {{"parts", 3}, {"num_experts", 3}}),
               Error);
}

TEST(CpuRouting, RouterRejectsBadOptions) {
  Tensor logits = zeros(DType::F32, {2, 3});
  EXPECT_THROW(route(logits, 4), Error);
  EXPECT_THROW(route(logits, 1, {{"capacity", "gshard"}}), Error);
  Tensor bad = Tensor::of<float>({1, 2}, {std::nanf(""), 0});
  EXPECT_THROW(route(bad, 1), Error);
}

TEST(CpuRouting, ExpertFfnTwoTokensTwoExperts) {
  // d = F = 2, relu. Expert 0: W1 = I, b1 = [0, -1], W2 = I, b2 = 0.
  // Expert 1: W1 = [[1, 1], [0, 1]], b1 = 0, W2 = diag(2, 1), b2 = [1, 1].
  Tensor x = Tensor::of<double>({2, 2}, {1, 2, -1, 1});
  Tensor expert = Tensor::of<int32_t>({2, 2}, {0, 1, 1, 0});
  Tensor gates = Tensor::of<double>({2, 2}, {0.75, 0.25, 0.5, 0.5});
  Tensor slot = Tensor::of<int32_t>({2, 2}, {0, 0, 1, -1});
  Tensor w1 = Tensor::of<double>({2, 2, 2}, {1, 0, 0, 1, 1, 1, 0, 1});
  Tensor b1 = Tensor::of<double>({2, 2}, {0, -1, 0, 0});
  Tensor w2 = Tensor::of<double>({2, 2, 2}, {1, 0, 0, 1, 2, 0, 0, 1});
  Tensor b2 = Tensor::of<double>({2, 2}, {0, 0, 1, 1});
  // Token 0: expert 0 gives [1, 1], expert 1 gives [3, 4]:
  //   0.75 [1, 1] + 0.25 [3, 4] = [1.5, 1.75].
  // Token 1: expert 1 gives relu([-1, 0]) W2 + b2 = [1, 1], times 0.5; its
  //   second assignment is dropped.
  Tensor y = runKernel1("moe.expert_ffn",
                        {x, expert, gates, slot, w1, b1, w2, b2, absent()},
                        like(x), {{"activation", "relu"}});
  expectValues(y, {1.5, 1.75, 0.5, 0.5}, 1e-15, "expert_ffn");
  // dgates = <dy_t, o> for kept assignments, 0 for the dropped one.
  Tensor dy = Tensor::of<double>({2, 2}, {1, 2, 3, 4});
  std::vector<Tensor> grads =
      runKernel("moe.expert_ffn_grad",
                {x, expert, gates, slot, w1, b1, w2, b2, absent(), dy},
                {like(x), like(gates), like(w1), like(b1), like(w2), like(b2)},
                {{"activation", "relu"}});
  expectValues(grads[1], {3, 11, 7, 0}, 1e-15, "dgates");
  // An out-of-range kept expert is an error; a dropped one is never read.
  Tensor badExpert = Tensor::of<int32_t>({2, 2}, {0, 1, 2, 0});
  EXPECT_THROW(runKernel1("moe.expert_ffn",
                          {x, badExpert, gates, slot, w1, b1, w2, b2, absent()},
                          like(x), {{"activation", "relu"}}),
               Error);
}

TEST(CpuRouting, ExpertFfnGradZeroesExpertsWithoutTokens) {
  // Three experts; nothing routes to expert 2 (and one assignment is
  // dropped), so its weight gradients must be written as zeros.
  Tensor x = randomTensor(DType::F32, {3, 4}, 1);
  Tensor expert = Tensor::of<int32_t>({3, 2}, {0, 1, 1, 0, 0, 2});
  Tensor slot = Tensor::of<int32_t>({3, 2}, {0, 0, 1, 1, 2, -1});
  Tensor gates = randomTensor(DType::F32, {3, 2}, 2);
  Tensor w1 = randomTensor(DType::F32, {3, 4, 5}, 3);
  Tensor b1 = randomTensor(DType::F32, {3, 5}, 4);
  Tensor w2 = randomTensor(DType::F32, {3, 5, 4}, 5);
  Tensor w3 = randomTensor(DType::F32, {3, 4, 5}, 6);
  std::vector<Tensor> grads = runKernel(
      "moe.expert_ffn_grad",
      {x, expert, gates, slot, w1, b1, w2, absent(), w3,
       randomTensor(DType::F32, {3, 4}, 7)},
      {like(x), like(gates), like(w1), like(b1), like(w2), absent(), like(w3)},
      {{"activation", "silu"}});
  for (int i : {2, 3, 4, 6}) {
    std::vector<double> v = values(grads[i]);
    int64_t perExpert = grads[i].numel() / 3;
    for (int64_t j = 2 * perExpert; j < 3 * perExpert; ++j)
      EXPECT_EQ(v[j], 0.0) << "result " << i << " element " << j;
    EXPECT_NE(v[0], 0.0) << "result " << i;
  }
  EXPECT_EQ(grads[1].at(5), 0.0);
}

TEST(CpuRouting, SwitchLossVariants) {
  // P = [0.3, 0.45, 0.25]; token 0 picks experts 0, 1; token 1 picks 1, 2.
  Tensor probs = Tensor::of<double>({2, 3}, {0.5, 0.3, 0.2, 0.1, 0.6, 0.3});
  Tensor expert = Tensor::of<int32_t>({2, 2}, {0, 1, 1, 2});
  auto loss = [&](const char *variant) {
    return runKernel1("moe.switch_loss", {probs, expert}, zeros(DType::F64, {}),
                      {{"variant", variant}})
        .at(0);
  };
  // f = [1, 2, 1] / 4.
  EXPECT_NEAR(loss("all_slots"), 3 * (0.25 * 0.3 + 0.5 * 0.45 + 0.25 * 0.25),
              1e-15);
  // f = [1, 1, 0] / 2.
  EXPECT_NEAR(loss("top1"), 3 * (0.5 * 0.3 + 0.5 * 0.45), 1e-15);
  // f = [1, 2, 1] / 2.
  EXPECT_NEAR(loss("any_topk"), 3 * (0.5 * 0.3 + 1.0 * 0.45 + 0.5 * 0.25),
              1e-15);
  Tensor dprobs =
      runKernel1("moe.switch_loss_grad", {probs, expert, scalarF64(2.0)},
                 like(probs), {{"variant", "top1"}});
  // 2 * E * f_e / N = 3 f_e.
  expectValues(dprobs, {1.5, 1.5, 0, 1.5, 1.5, 0}, 1e-15, "switch_loss_grad");
}

TEST(CpuRouting, MaskedTokensAreNotRoutedAndTakeNoCapacity) {
  // Token 1 is padding: probability 0, every choice dropped (slot -1, gate
  // 0), and token 2's choice of expert 0 gets slot 0, not 1.
  Tensor logits =
      Tensor::of<double>({3, 3}, {2, 1, 0, 3, 0, 0, 2, 0, 1});
  Tensor mask = Tensor::of<int32_t>({3}, {1, 0, 1});
  for (const char *gate : {"raw", "renorm_detached", "softmax_topk", "unit"}) {
    SCOPED_TRACE(gate);
    Routed r = route(logits, 2, {{"gate", gate}}, mask);
    for (int64_t e = 0; e < 3; ++e)
      EXPECT_EQ(r.probs.at(3 + e), 0.0);
    expectValues(r.slot, {0, 0, -1, -1, 1, 0}, 0, "slot");
    EXPECT_EQ(r.gates.at(2), 0.0);
    EXPECT_EQ(r.gates.at(3), 0.0);
    EXPECT_GT(r.gates.at(0), 0.0);
    expectValues(expertLoad(r, 3), {2, 1, 1}, 0, "load");
    // The gradient of a masked token's logits is 0 whatever flows in.
    Tensor dgates = Tensor::of<double>({3, 2}, {1, 2, 3, 4, 5, 6});
    Tensor dprobs = randomTensor(DType::F64, {3, 3}, 7);
    Tensor dlogits = runKernel1(
        "moe.topk_router_grad",
        {r.probs, r.expert, r.gates, r.slot, dgates, dprobs}, like(logits),
        {{"gate", gate}});
    for (int64_t e = 0; e < 3; ++e)
      EXPECT_EQ(dlogits.at(3 + e), 0.0);
    EXPECT_FALSE(std::isnan(dlogits.at(0)));
  }
}

TEST(CpuRouting, SampledChoicesAreDistinctReproducibleAndFollowP) {
  // k = 2, sample = 1: the first choice is the argmax, the second is drawn
  // from the rest with weights p + 1e-6.
  const int64_t n = 4000, experts = 4;
  std::vector<double> row;
  for (int64_t t = 0; t < n; ++t)
    for (double v : {3.0, std::log(2.0), std::log(1.0), std::log(1.0)})
      row.push_back(v);
  Tensor logits = Tensor::of<double>({n, experts}, row);
  Json options = {{"sample", 1}, {"stream", 5}};
  Routed a = route(logits, 2, options, absent(), scalarI64(11));
  Routed b = route(logits, 2, options, absent(), scalarI64(11));
  Routed c = route(logits, 2, options, absent(), scalarI64(12));
  expectValues(a.expert, values(b.expert), 0, "same seed, same draws");
  std::vector<int64_t> counts(experts, 0);
  int64_t differ = 0;
  for (int64_t t = 0; t < n; ++t) {
    EXPECT_EQ(a.expert.at(2 * t), 0);
    int32_t second = static_cast<int32_t>(a.expert.at(2 * t + 1));
    ASSERT_NE(second, 0);
    ++counts[second];
    differ += a.expert.at(2 * t + 1) != c.expert.at(2 * t + 1);
    // The gate is the drawn expert's probability.
    EXPECT_EQ(a.gates.at(2 * t + 1), a.probs.at(t * experts + second));
  }
  EXPECT_GT(differ, 0) << "another seed draws differently";
  // Among experts 1..3 the weights are 2 : 1 : 1.
  EXPECT_NEAR(counts[1] / double(n), 0.5, 0.03);
  EXPECT_NEAR(counts[2] / double(n), 0.25, 0.03);
  EXPECT_NEAR(counts[3] / double(n), 0.25, 0.03);
  // sample > k, or sampling without a seed, is refused.
  EXPECT_THROW(route(logits, 2, {{"sample", 3}}, absent(), scalarI64(1)),
               Error);
  EXPECT_THROW(route(logits, 2, {{"sample", 1}}), Error);
}

TEST(CpuRouting, SwitchLossCountsLiveAssignmentsOnly) {
  // Token 1 is masked (all probabilities 0): f and P are over tokens 0 and
  // 2 only, exactly as if token 1 were absent.
  Tensor probs = Tensor::of<double>(
      {3, 3}, {0.5, 0.3, 0.2, 0, 0, 0, 0.1, 0.6, 0.3});
  Tensor expert = Tensor::of<int32_t>({3, 2}, {0, 1, 0, 1, 1, 2});
  Tensor probs2 = Tensor::of<double>({2, 3}, {0.5, 0.3, 0.2, 0.1, 0.6, 0.3});
  Tensor expert2 = Tensor::of<int32_t>({2, 2}, {0, 1, 1, 2});
  for (const char *variant : {"all_slots", "top1", "any_topk"}) {
    SCOPED_TRACE(variant);
    auto loss = [&](const Tensor &p, const Tensor &e) {
      return runKernel1("moe.switch_loss", {p, e}, zeros(DType::F64, {}),
                        {{"variant", variant}})
          .at(0);
    };
    EXPECT_NEAR(loss(probs, expert), loss(probs2, expert2), 1e-15);
    Tensor d = runKernel1("moe.switch_loss_grad",
                          {probs, expert, scalarF64(1.0)}, like(probs),
                          {{"variant", variant}});
    Tensor d2 = runKernel1("moe.switch_loss_grad",
                           {probs2, expert2, scalarF64(1.0)}, like(probs2),
                           {{"variant", variant}});
    EXPECT_NEAR(d.at(0), d2.at(0), 1e-15);
  }
}

TEST(CpuRouting, ExpertMapAndReduceByHand) {
  // Two tokens, k = 2, E = 2 experts of 1 x 2 (map) and 2 x 1 (reduce);
  // token 1's second choice is dropped.
  Tensor x = Tensor::of<double>({2, 1}, {2, 3});
  Tensor expert = Tensor::of<int32_t>({2, 2}, {1, 0, 0, 1});
  Tensor slot = Tensor::of<int32_t>({2, 2}, {0, 0, 1, -1});
  Tensor wq = Tensor::of<double>({2, 1, 2}, {1, 10, 100, 1000});
  Tensor q = runKernel1("moe.expert_map", {x, expert, slot, wq},
                        zeros(DType::F64, {2, 4}));
  // Token 0: expert 1 then 0; token 1: expert 0, then 0 (dropped).
  expectValues(q, {200, 2000, 2, 20, 3, 30, 0, 0}, 0, "map");
  Tensor gates = Tensor::of<double>({2, 2}, {0.5, 0.25, 2, 0});
  Tensor wo = Tensor::of<double>({2, 2, 1}, {1, 2, 3, 4});
  Tensor y = runKernel1("moe.expert_reduce", {q, expert, gates, slot, wo},
                        zeros(DType::F64, {2, 1}));
  // y0 = 0.5 (200*3 + 2000*4) + 0.25 (2*1 + 20*2); y1 = 2 (3*1 + 30*2).
  expectValues(y, {0.5 * 8600 + 0.25 * 42, 2 * 63}, 1e-12, "reduce");
  // A c whose width is not k * h is refused.
  EXPECT_THROW(runKernel1("moe.expert_reduce",
                          {x, expert, gates, slot, wo},
                          zeros(DType::F64, {2, 1})),
               Error);
}

TEST(CpuRouting, CvLossByHand) {
  // Importance [1, 3] -> q = [0.25, 0.75], mean 0.5, unbiased variance
  // 0.125, loss 0.125 / (0.25 + 1e-10).
  Tensor gates = Tensor::of<double>({2, 1}, {1, 3});
  Tensor expert = Tensor::of<int32_t>({2, 1}, {0, 1});
  auto cv = [&](int64_t experts) {
    return runKernel1("moe.cv_loss", {gates, expert}, zeros(DType::F64, {}),
                      {{"num_experts", experts}})
        .at(0);
  };
  EXPECT_NEAR(cv(2), 0.125 / (0.25 + 1e-10), 1e-12);
  // A third expert with no importance: q = [0.25, 0.75, 0].
  double mean = 1.0 / 3;
  double var = (std::pow(0.25 - mean, 2) + std::pow(0.75 - mean, 2) +
                std::pow(mean, 2)) /
               2;
  EXPECT_NEAR(cv(3), var / (mean * mean + 1e-10), 1e-12);
  Tensor one = Tensor::of<int32_t>({2, 1}, {0, 0});
  EXPECT_EQ(runKernel1("moe.cv_loss", {gates, one}, zeros(DType::F64, {}),
                       {{"num_experts", 1}})
                .at(0),
            0.0);
}

TEST(CpuRouting, ExpertLoadCountsKeptAssignments) {
  Tensor expert = Tensor::of<int32_t>({3, 2}, {0, 2, 2, 1, 0, 2});
  Tensor slot = Tensor::of<int32_t>({3, 2}, {0, 0, 1, 0, -1, -1});
  Tensor load = runKernel1("moe.expert_load", {expert, slot},
                           zeros(DType::F32, {3}), {{"num_experts", 3}});
  expectValues(load, {1, 1, 2}, 0, "load");
}

} // namespace
