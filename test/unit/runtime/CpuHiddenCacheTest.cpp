//===- CpuHiddenCacheTest.cpp - the expert FFN's saved hidden layer -------===//

#include "KernelTestUtil.h"
#include "cpu/HiddenCache.h"

#include <algorithm>
#include <gtest/gtest.h>

using namespace moec;
using namespace moec::test;

namespace {

struct FfnCase {
  std::vector<Tensor> inputs; // x, expert, gates, slot, w1, b1, w2, b2, w3
  Tensor dy;
  std::vector<Tensor> gradOutputs() const {
    auto grad = [](const Tensor &t) { return t.empty() ? absent() : like(t); };
    return {like(inputs[0]), like(inputs[2]), grad(inputs[4]),
            grad(inputs[5]),  grad(inputs[6]), grad(inputs[7]),
            grad(inputs[8])};
  }
};

FfnCase ffnCase(bool glu) {
  DType f = DType::F32;
  Tensor logits = randomTensor(f, {300, 4}, 1, -2, 2);
  std::vector<Tensor> routed = runKernel(
      "moe.topk_router", {logits},
      {like(logits), zeros(DType::I32, {300, 2}), zeros(f, {300, 2}),
       zeros(DType::I32, {300, 2})},
      {{"k", 2}, {"gate", "raw"}, {"capacity", "none"},
       {"priority", "token_order"}});
  FfnCase c;
  c.inputs = {randomTensor(f, {300, 24}, 2), routed[1], routed[2], routed[3],
              randomTensor(f, {4, 24, 40}, 3),
              glu ? absent() : randomTensor(f, {4, 40}, 4),
              randomTensor(f, {4, 40, 24}, 5),
              glu ? absent() : randomTensor(f, {4, 24}, 6),
              glu ? randomTensor(f, {4, 24, 40}, 7) : absent()};
  c.dy = randomTensor(f, {300, 24}, 8);
  return c;
}

std::vector<Tensor> withDy(const FfnCase &c) {
  std::vector<Tensor> in = c.inputs;
  in.push_back(c.dy);
  return in;
}

// The gradient that finds the forward's hidden layer computes what the one
// that recomputes it does, bit for bit, and uses the entry up.
TEST(CpuHiddenCache, GradientWithTheSavedHiddenLayerIsTheSame) {
  for (bool glu : {false, true}) {
    SCOPED_TRACE(glu ? "glu" : "gelu");
    FfnCase c = ffnCase(glu);
    Json attrs = {{"activation", glu ? "silu" : "gelu_tanh"}};
    std::vector<Tensor> recomputed =
        runKernel("moe.expert_ffn_grad", withDy(c), c.gradOutputs(), attrs);
    std::vector<TensorView> key;
    for (const Tensor &t : c.inputs)
      key.push_back(t.empty() ? TensorView() : t.view());
    cpu::HiddenCache cache;
    Tensor y = runKernel1("moe.expert_ffn", c.inputs, like(c.inputs[0]),
                          attrs);
    Tensor yCached = like(y);
    runKernel("moe.expert_ffn", c.inputs, {yCached}, attrs, &cache);
    expectValues(yCached, values(y), 0, "y");
    // The forward saved a (and u): one buffer each.
    EXPECT_EQ(cache.take(key, "expert_ffn").size(), glu ? 2u : 1u);
    runKernel("moe.expert_ffn", c.inputs, {yCached}, attrs, &cache);
    std::vector<Tensor> saved = runKernel(
        "moe.expert_ffn_grad", withDy(c), c.gradOutputs(), attrs, &cache);
    for (size_t i = 0; i < saved.size(); ++i)
      if (!saved[i].empty()) {
        std::vector<double> v = values(saved[i]);
        ASSERT_TRUE(std::any_of(v.begin(), v.end(),
                                [](double e) { return e != 0; }))
            << "result " << i;
        expectValues(saved[i], values(recomputed[i]), 0,
                     "result " + std::to_string(i));
      }
    EXPECT_TRUE(cache.take(key, "expert_ffn").empty());
  }
}

// Under bf16 staging the kernel sees f32 copies that live for one step; it
// keys the hidden layer by the operands as stored (storedInputs), which the
// gradient's step sees again.
TEST(CpuHiddenCache, StagedOperandsAreKeyedByTheirStorage) {
  FfnCase c = ffnCase(false);
  Json attrs = {{"activation", "gelu_tanh"}};
  std::vector<Tensor> stored;
  std::vector<TensorView> staged, storedKey;
  for (const Tensor &t : c.inputs) {
    stored.push_back(t.empty() ? Tensor() : clone(t));
    staged.push_back(t.empty() ? TensorView() : t.view());
    storedKey.push_back(t.empty() ? TensorView() : stored.back().view());
  }
  cpu::HiddenCache cache;
  Tensor y = like(c.inputs[0]);
  cpu::KernelContext ctx{"moe.expert_ffn", staged,
                         {y.view()},       cpu::Attrs(attrs, "moe.expert_ffn"),
                         &cache,           storedKey};
  cpu::lookupKernel("moe.expert_ffn")(ctx);
  EXPECT_TRUE(cache.take(staged, "expert_ffn").empty());
  EXPECT_EQ(cache.take(storedKey, "expert_ffn").size(), 1u);
  cache.clear();
}

// An entry is found only for the same operands, and dies when a step writes
// over any byte of one of them.
TEST(CpuHiddenCache, WritesOverAnOperandDropTheEntry) {
  Tensor x = randomTensor(DType::F32, {8, 4}, 1),
         w = randomTensor(DType::F32, {4, 4}, 2),
         other = randomTensor(DType::F32, {8, 4}, 3);
  std::vector<TensorView> key = {x.view(), w.view()};
  cpu::HiddenCache cache;
  cache.put(key, "t", cache.allocate(1, 64));
  EXPECT_TRUE(cache.take({other.view(), w.view()}, "t").empty());
  EXPECT_TRUE(cache.take(key, "u").empty());
  cache.invalidate(other.view());
  EXPECT_EQ(cache.take(key, "t").size(), 1u);

  cache.put(key, "t", cache.allocate(1, 64));
  // The last row of x, seen as its own tensor (a plan's view).
  TensorView lastRow{DType::F32, {4}, x.data<float>() + 28};
  cache.invalidate(lastRow);
  EXPECT_TRUE(cache.take(key, "t").empty());
  cache.clear();
}

} // namespace
