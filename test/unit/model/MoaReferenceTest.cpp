//===- MoaReferenceTest.cpp - MoA against an independent PyTorch layer ----===//
//
// A decoder with one MoA layer, on random weights (a non-zero router) and
// tokens: its logits, loss terms and every gradient are written next to
// the weights, and test/reference/moa_reference.py recomputes them with
// PyTorch from the paper's definitions, for both gate weightings and both
// ways of adding the auxiliary losses.
//
//===----------------------------------------------------------------------===//

#include "moec/Checkpoint.h"
#include "moec/Compiler.h"
#include "moec/Session.h"
#include "RandomWeights.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <gtest/gtest.h>

using namespace moec;
using moec::test::randomWeights;

namespace {

/// Debian's interpreter, where python3-torch installs.
const char *kPython = "/usr/bin/python3";

bool torchAvailable() {
  std::string command =
      std::string(kPython) + " -c 'import torch' >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

struct Case {
  std::string gate, aux;
};

void PrintTo(const Case &c, std::ostream *os) {
  *os << "gate " << c.gate << ", aux " << c.aux;
}

class MoaReference : public ::testing::TestWithParam<Case> {};

TEST_P(MoaReference, MatchesPyTorch) {
  if (!torchAvailable())
    GTEST_SKIP() << kPython << " cannot import torch (install python3-torch)";
  const Case &c = GetParam();
  std::string spec = R"(moe 1
model ref {
  vocab = 30
  d_model = 16
  max_seq = 10
  repeat 1 {
    moa(experts = 4, k = 2, head_dim = 8, gate = )" +
                     c.gate + ", aux = " + c.aux + R"()
  }
}
train {
  batch = 2
  seq_len = 10
  balance_loss = 0.05
  z_loss = 0.01
  cv_loss = 0.1
}
data {
  source = synthetic("markov")
}
)";
  Bundle bundle = compileSource(spec, "ref.moe");
  Session session(bundle);
  std::map<std::string, Tensor> file;
  uint64_t seed = 1;
  for (const ParamInfo &p : bundle.params()) {
    bool norm = p.name.find(".g") == p.name.size() - 2;
    Tensor value = randomWeights(p.shape, seed++, p.name.find("router") !=
                                                         std::string::npos
                                                     ? 1.0
                                                     : 0.4);
    if (norm)
      for (int64_t i = 0; i < value.numel(); ++i)
        value.set(i, 1.0 + 0.5 * value.at(i));
    session.setParam(p.name, value);
    file["param:" + p.name] = value;
  }
  Tensor tokens(DType::I32, {2, 10}), targets(DType::I32, {2, 10});
  for (int64_t i = 0; i < 20; ++i) {
    tokens.data<int32_t>()[i] = static_cast<int32_t>((i * 11 + 3) % 30);
    targets.data<int32_t>()[i] =
        i % 7 == 3 ? -1 : static_cast<int32_t>((i * 5 + 1) % 30);
  }
  file["tokens"] = tokens;
  file["targets"] = targets;
  std::map<std::string, Tensor> outputs =
      session.run("backward", {{"tokens", tokens}, {"targets", targets}});
  for (const auto &[name, tensor] : outputs)
    if (name.rfind("load:", 0) != 0)
      file[name] = tensor;
  file["logits"] = session.run("forward", {{"tokens", tokens}}).at("logits");

  std::string path =
      (std::filesystem::temp_directory_path() /
       ("moec-moa-reference-" + c.gate + "-" + c.aux + ".safetensors"))
          .string();
  saveCheckpoint(path, file,
                 {{"experts", "4"},
                  {"k", "2"},
                  {"scale", std::to_string(1.0 / std::sqrt(8.0))},
                  {"gate", "\"" + c.gate + "\""},
                  {"aux", "\"" + c.aux + "\""},
                  {"balance", "0.05"},
                  {"z", "0.01"},
                  {"cv", "0.1"}});
  std::string command = std::string(kPython) + " " MOEC_SOURCE_DIR
                        "/test/reference/moa_reference.py " + path;
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(
    Gates, MoaReference,
    ::testing::Values(Case{"raw", "per_token"}, Case{"renorm_detached", "mean"}),
    [](const auto &info) {
      return info.param.gate + "_" + info.param.aux;
    });

} // namespace
