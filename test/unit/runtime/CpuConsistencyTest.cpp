//===- CpuConsistencyTest.cpp - f32 vs f64 and thread-count independence -===//

#include "KernelTestUtil.h"

#include <gtest/gtest.h>
#include <omp.h>

using namespace moec;
using namespace moec::test;

namespace {

bool isFloat(const Tensor &t) {
  return !t.empty() && (t.dtype() == DType::F32 || t.dtype() == DType::F64);
}

std::vector<Tensor> withDType(const std::vector<Tensor> &ts, DType dtype) {
  std::vector<Tensor> out;
  for (const Tensor &t : ts)
    out.push_back(isFloat(t)  ? convert(t, dtype)
                  : t.empty() ? absent()
                              : clone(t));
  return out;
}

/// Runs `op` on f64 inputs and on the same inputs rounded to f32; every
/// result must agree to `rel`.
void expectF32MatchesF64(const char *op, const std::vector<Tensor> &inputs,
                         const std::vector<Tensor> &outputs, const Json &attrs,
                         double rel = 1e-5) {
  SCOPED_TRACE(op);
  std::vector<Tensor> ref =
      runKernel(op, inputs, withDType(outputs, DType::F64), attrs);
  std::vector<Tensor> f32 = runKernel(op, withDType(inputs, DType::F32),
                                      withDType(outputs, DType::F32), attrs);
  for (size_t i = 0; i < ref.size(); ++i)
    if (!ref[i].empty())
      expectClose(f32[i], ref[i], rel, "result " + std::to_string(i));
}

TEST(CpuConsistency, F32MatchesF64) {
  DType f = DType::F64;
  Tensor x = randomTensor(f, {7, 16}, 1);
  Tensor w = randomTensor(f, {16, 9}, 2), b = randomTensor(f, {9}, 3);
  Tensor dy = randomTensor(f, {7, 9}, 4);
  expectF32MatchesF64("moe.linear", {x, w, b}, {zeros(f, {7, 9})}, {});
  expectF32MatchesF64("moe.linear_grad", {x, w, dy},
                      {like(x), like(w), like(b)}, {{"has_bias", true}});

  Tensor gamma = randomTensor(f, {16}, 5, 0.5, 1.5),
         beta = randomTensor(f, {16}, 6);
  expectF32MatchesF64("moe.layer_norm", {x, gamma, beta}, {like(x)}, {});
  expectF32MatchesF64("moe.rms_norm_grad", {x, gamma, x},
                      {like(x), like(gamma)}, {});

  Tensor q = randomTensor(f, {2, 5, 32}, 7), k = randomTensor(f, {2, 5, 16}, 8);
  Tensor v = randomTensor(f, {2, 5, 16}, 9);
  Json attn = {
      {"num_heads", 4}, {"num_kv_heads", 2}, {"scale", 0.35}, {"causal", true}};
  std::vector<Tensor> fwd = runKernel("moe.attention", {q, k, v, absent()},
                                      {like(q), zeros(f, {2, 4, 5})}, attn);
  expectF32MatchesF64("moe.attention", {q, k, v, absent()},
                      {like(q), zeros(f, {2, 4, 5})}, attn);
  expectF32MatchesF64("moe.attention_grad", {q, k, v, fwd[0], fwd[1], q},
                      {like(q), like(k), like(v)}, attn);

  Tensor logits = randomTensor(f, {8, 4}, 10, -3, 3);
  Json router = {{"k", 2},
                 {"gate", "softmax_topk"},
                 {"capacity", "none"},
                 {"priority", "token_order"}};
  std::vector<Tensor> routed =
      runKernel("moe.topk_router", {logits},
                {like(logits), zeros(DType::I32, {8, 2}), zeros(f, {8, 2}),
                 zeros(DType::I32, {8, 2})},
                router);
  expectF32MatchesF64("moe.topk_router", {logits},
                      {like(logits), zeros(DType::I32, {8, 2}),
                       zeros(f, {8, 2}), zeros(DType::I32, {8, 2})},
                      router);

  Tensor xs = randomTensor(f, {8, 8}, 11);
  std::vector<Tensor> ffnInputs = {xs,
                                   routed[1],
                                   routed[2],
                                   routed[3],
                                   randomTensor(f, {4, 8, 16}, 12),
                                   absent(),
                                   randomTensor(f, {4, 16, 8}, 13),
                                   randomTensor(f, {4, 8}, 14),
                                   randomTensor(f, {4, 8, 16}, 15)};
  expectF32MatchesF64("moe.expert_ffn", ffnInputs, {like(xs)},
                      {{"activation", "gelu_tanh"}});
  std::vector<Tensor> ffnGradInputs = ffnInputs;
  ffnGradInputs.push_back(randomTensor(f, {8, 8}, 16));
  expectF32MatchesF64("moe.expert_ffn_grad", ffnGradInputs,
                      {like(xs), like(routed[2]), zeros(f, {4, 8, 16}),
                       absent(), zeros(f, {4, 16, 8}), zeros(f, {4, 8}),
                       zeros(f, {4, 8, 16})},
                      {{"activation", "gelu_tanh"}});

  Tensor vocabLogits = randomTensor(f, {6, 11}, 17, -4, 4);
  Tensor targets = Tensor::of<int32_t>({6}, {1, 10, -1, 0, 5, 5});
  expectF32MatchesF64("moe.cross_entropy", {vocabLogits, targets},
                      {zeros(f, {})}, {{"label_smoothing", 0.1}});
}

/// Runs `op` with one OpenMP thread and with several; results must be
/// bitwise equal.
void expectThreadCountIndependent(const char *op,
                                  const std::vector<Tensor> &inputs,
                                  const std::vector<Tensor> &outputs,
                                  const Json &attrs) {
  SCOPED_TRACE(op);
  int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  std::vector<Tensor> serial = runKernel(op, inputs, outputs, attrs);
  std::vector<Tensor> fresh;
  for (const Tensor &t : outputs)
    fresh.push_back(t.empty() ? absent() : like(t));
  omp_set_num_threads(3);
  std::vector<Tensor> parallel = runKernel(op, inputs, fresh, attrs);
  omp_set_num_threads(saved);
  for (size_t i = 0; i < serial.size(); ++i)
    if (!serial[i].empty())
      expectValues(parallel[i], values(serial[i]), 0,
                   "result " + std::to_string(i));
}

TEST(CpuConsistency, ResultsDoNotDependOnThreadCount) {
  DType f = DType::F32;
  std::vector<int32_t> idValues;
  for (int i = 0; i < 2000; ++i)
    idValues.push_back((i * 37) % 50);
  Tensor ids = Tensor::of<int32_t>({2000}, idValues);
  expectThreadCountIndependent("moe.embedding_grad",
                               {ids, randomTensor(f, {2000, 70}, 1)},
                               {zeros(f, {50, 70})}, {{"vocab", 50}});

  Tensor x = randomTensor(f, {300, 130}, 2);
  expectThreadCountIndependent(
      "moe.layer_norm_grad",
      {x, randomTensor(f, {130}, 3), randomTensor(f, {300, 130}, 4)},
      {like(x), zeros(f, {130}), zeros(f, {130})}, {});
  expectThreadCountIndependent(
      "moe.linear_grad",
      {x, randomTensor(f, {130, 20}, 5), randomTensor(f, {300, 20}, 6)},
      {like(x), zeros(f, {130, 20}), zeros(f, {20})}, {{"has_bias", true}});

  // One row of C (a decoding step's products) and one column go through
  // BLAS gemv, which must not split its sums over threads.
  Tensor row = randomTensor(f, {1, 700}, 24);
  expectThreadCountIndependent("moe.linear",
                               {row, randomTensor(f, {700, 600}, 25)},
                               {zeros(f, {1, 600})}, {});
  expectThreadCountIndependent(
      "moe.linear", {randomTensor(f, {900, 700}, 26), row.reshaped({700, 1})},
      {zeros(f, {900, 1})}, {});
  // One block of 64 columns: our loop does not fork.
  expectThreadCountIndependent("moe.linear",
                               {row, randomTensor(f, {700, 64}, 27)},
                               {zeros(f, {1, 64})}, {});

  Tensor q = randomTensor(f, {3, 17, 16}, 7),
         k = randomTensor(f, {3, 17, 8}, 8);
  Json attn = {
      {"num_heads", 4}, {"num_kv_heads", 2}, {"scale", 0.5}, {"causal", true}};
  std::vector<Tensor> fwd = runKernel("moe.attention", {q, k, k, absent()},
                                      {like(q), zeros(f, {3, 4, 17})}, attn);
  expectThreadCountIndependent("moe.attention_grad",
                               {q, k, k, fwd[0], fwd[1], q},
                               {like(q), like(k), like(k)}, attn);

  Tensor logits = randomTensor(f, {200, 8}, 9, -2, 2);
  std::vector<Tensor> routed = runKernel(
      "moe.topk_router", {logits},
      {like(logits), zeros(DType::I32, {200, 2}), zeros(f, {200, 2}),
       zeros(DType::I32, {200, 2})},
      {{"k", 2}, {"gate", "raw"}, {"capacity", "switch"}, {"priority", "bpr"}});
  Tensor xs = randomTensor(f, {200, 16}, 10);
  expectThreadCountIndependent(
      "moe.expert_ffn_grad",
      {xs, routed[1], routed[2], routed[3], randomTensor(f, {8, 16, 32}, 11),
       randomTensor(f, {8, 32}, 12), randomTensor(f, {8, 32, 16}, 13),
       randomTensor(f, {8, 16}, 14), absent(), randomTensor(f, {200, 16}, 15)},
      {like(xs), like(routed[2]), zeros(f, {8, 16, 32}), zeros(f, {8, 32}),
       zeros(f, {8, 32, 16}), zeros(f, {8, 16}), absent()},
      {{"activation", "silu"}});
  // Wide enough that each expert's gemms split into several blocks, with
  // the GLU branch (a second gemm into the same blocks of dx).
  Tensor wideLogits = randomTensor(f, {700, 4}, 18, -2, 2);
  std::vector<Tensor> wide = runKernel(
      "moe.topk_router", {wideLogits},
      {like(wideLogits), zeros(DType::I32, {700, 2}), zeros(f, {700, 2}),
       zeros(DType::I32, {700, 2})},
      {{"k", 2}, {"gate", "raw"}, {"capacity", "none"},
       {"priority", "token_order"}});
  Tensor wx = randomTensor(f, {700, 90}, 19);
  expectThreadCountIndependent(
      "moe.expert_ffn_grad",
      {wx, wide[1], wide[2], wide[3], randomTensor(f, {4, 90, 300}, 20),
       absent(), randomTensor(f, {4, 300, 90}, 21), absent(),
       randomTensor(f, {4, 90, 300}, 22), randomTensor(f, {700, 90}, 23)},
      {like(wx), like(wide[2]), zeros(f, {4, 90, 300}), absent(),
       zeros(f, {4, 300, 90}), absent(), zeros(f, {4, 90, 300})},
      {{"activation", "silu"}});
  expectThreadCountIndependent("moe.switch_loss", {routed[0], routed[1]},
                               {zeros(f, {})}, {{"variant", "any_topk"}});
  expectThreadCountIndependent(
      "moe.global_norm",
      {randomTensor(f, {100000}, 16), randomTensor(f, {77}, 17)},
      {zeros(f, {})}, {});
}

} // namespace
