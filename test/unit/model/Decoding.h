//===- Decoding.h - incremental decoding checks for model tests -*- C++ -*-===//
//
// The KV-cache tests of every family check the same thing: running
// `decode` over a prefix, then one token at a time, reproduces the logits of
// one full pass.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TEST_MODEL_DECODING_H
#define MOEC_TEST_MODEL_DECODING_H

#include "moec/Session.h"

#include <cmath>
#include <gtest/gtest.h>
#include <map>
#include <string>
#include <vector>

namespace moec::test {

/// Every element of `t`, as doubles.
inline std::vector<double> tensorValues(const Tensor &t) {
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i)
    v[i] = t.at(i);
  return v;
}

/// The logits of `decode` run over ids[0, prefill), then over each later
/// id alone, concatenated; `extra` inputs (a source mask) go to every call.
inline std::vector<double>
decodeIncrementally(Session &session, const std::vector<int32_t> &ids,
                    int64_t prefill,
                    const std::map<std::string, Tensor> &extra = {}) {
  std::vector<double> logits;
  for (int64_t begin = 0; begin < static_cast<int64_t>(ids.size());) {
    int64_t end = begin == 0 ? prefill : begin + 1;
    std::map<std::string, Tensor> inputs = extra;
    inputs["tokens"] = Tensor::of<int32_t>(
        {1, end - begin},
        std::vector<int32_t>(ids.begin() + begin, ids.begin() + end));
    inputs["past"] = Tensor::of<int64_t>({}, {begin});
    std::vector<double> step =
        tensorValues(session.run("decode", inputs).at("logits"));
    logits.insert(logits.end(), step.begin(), step.end());
    begin = end;
  }
  return logits;
}

/// Element by element within 1e-4, relative to the larger values.
inline void expectAllClose(const std::vector<double> &got,
                           const std::vector<double> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << i;
}

} // namespace moec::test

#endif // MOEC_TEST_MODEL_DECODING_H
