//===- MhMoeReferenceTest.cpp - MH-MoE against an independent PyTorch layer ===//
//
// A decoder whose one block is an MH-MoE layer, on random weights and
// tokens: the training step's loss terms and gradients (capacity dropping
// assignments) and the eval forward's logits (dropless) are written next to
// the weights, and test/reference/mhmoe_reference.py recomputes them with
// PyTorch from the authors' layer.
//
//===----------------------------------------------------------------------===//

#include "moec/Checkpoint.h"
#include "moec/Compiler.h"
#include "moec/Session.h"
#include "RandomWeights.h"

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
  std::string name;
  /// The layer's settings, as written in the spec.
  std::string settings;
  /// The same, for the reference (JSON values).
  std::map<std::string, std::string> config;
};

void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

class MhMoeReference : public ::testing::TestWithParam<Case> {};

TEST_P(MhMoeReference, MatchesPyTorch) {
  if (!torchAvailable())
    GTEST_SKIP() << kPython << " cannot import torch (install python3-torch)";
  const Case &c = GetParam();
  std::string spec = R"(moe 1
model ref {
  vocab = 30
  d_model = 16
  max_seq = 10
  norm = rms_norm(eps = 1e-5)
  repeat 1 {
    mh_moe()" + c.settings + R"()
  }
}
train {
  batch = 2
  seq_len = 10
  balance_loss = 0.05
  z_loss = 0.01
}
data {
  source = synthetic("markov")
}
)";
  Bundle bundle = compileSource(spec, "ref.moe");
  Session session(bundle);
  std::map<std::string, Tensor> file;
  uint64_t seed = 11;
  for (const ParamInfo &p : bundle.params()) {
    bool norm = p.name.size() > 2 && p.name.substr(p.name.size() - 2) == ".g";
    double scale = p.name.find("router") != std::string::npos ? 1.5 : 0.4;
    Tensor value = randomWeights(p.shape, seed++, scale);
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

  std::string path = (std::filesystem::temp_directory_path() /
                      ("moec-mhmoe-reference-" + c.name + ".safetensors"))
                         .string();
  std::map<std::string, std::string> config = c.config;
  config["balance"] = "0.05";
  saveCheckpoint(path, file, config);
  std::string command = std::string(kPython) + " " MOEC_SOURCE_DIR
                        "/test/reference/mhmoe_reference.py " + path;
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(
    Layers, MhMoeReference,
    ::testing::Values(
        // The authors' run: both projections, SwiGLU experts without
        // biases; C = 2 * ceil(80 / 4) = 40 is the mean load, so some
        // expert overflows.
        Case{"swiglu_top2",
             "heads = 4, experts = 4, k = 2, hidden = 8",
             {{"heads", "4"},
              {"experts", "4"},
              {"k", "2"},
              {"activation", "\"silu\""},
              {"glu", "true"},
              {"capacity_factor", "1.0"},
              {"expect_drops", "true"}}},
        // "w/o MLP" on the way in, biased GELU experts, top-1 with a
        // capacity of 1 * floor(0.5 * ceil(40 / 4)) = 5.
        Case{"gelu_top1_no_head_proj",
             "heads = 2, experts = 4, k = 1, hidden = 8, head_proj = false, "
             "activation = gelu_erf, glu = false, bias = true, "
             "capacity = tutel(factor = 0.5)",
             {{"heads", "2"},
              {"experts", "4"},
              {"k", "1"},
              {"activation", "\"gelu_erf\""},
              {"glu", "false"},
              {"capacity_factor", "0.5"},
              {"expect_drops", "true"}}},
        // The X-MoE gate (gradients at the stored embedding: the rescale
        // to norm 1.5 belongs to the training step, not to `backward`).
        Case{"xmoe_top2",
             "heads = 4, experts = 4, k = 2, hidden = 8, router = xmoe(dim = 6)",
             {{"heads", "4"},
              {"experts", "4"},
              {"k", "2"},
              {"activation", "\"silu\""},
              {"glu", "true"},
              {"capacity_factor", "1.0"},
              {"expect_drops", "true"}}}),
    [](const auto &info) { return info.param.name; });

} // namespace
