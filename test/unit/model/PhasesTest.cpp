//===- PhasesTest.cpp - parameter groups and block coordinate descent -----===//
//
// A small decoder whose moe routers form the group "gate" (phi). Under
// `phases = coordinate_descent(...)` a G step runs train_step_g and changes
// the routers only, an F step runs train_step and changes everything but
// them; each optimizer counts its own updates, checkpoints carry the
// counters, and a run resumed inside a G window repeats an unbroken one bit
// for bit. Without phases every group trains at every step with its own
// optimizer.
//
//===----------------------------------------------------------------------===//

#include "BundleData.h"
#include "Decoding.h"
#include "moec/Checkpoint.h"
#include "moec/Compiler.h"
#include "moec/ModelData.h"
#include "moec/Session.h"

#include <cmath>
#include <filesystem>
#include <gtest/gtest.h>
#include <unistd.h>

using namespace moec;
using moec::test::tensorValues;

namespace {

const char *kModel = R"(moe 1
model bcd {
  vocab = 256
  d_model = 16
  max_seq = 8
  repeat 2 {
    attention(heads = 2)
    moe(experts = 4, k = 2, hidden = 16)
  }
}
data {
  source = synthetic("grammar")
}
)";

/// The model with this train section.
std::string withTrain(const std::string &settings) {
  return std::string(kModel) +
         "train {\n  batch = 2\n  seq_len = 8\n"
         "  steps = 12\n  seed = 3\n" +
         settings + "}\n";
}

/// Adam for theta, plain SGD at lr 1 for the routers, G steps the last two
/// of every four.
const std::string kBcd = withTrain(
    "  optimizer = adam(lr = 1e-2)\n"
    "  groups = [group(\"gate\", params = [\"*.router\"], optimizer = "
    "sgd(lr = 1.0))]\n"
    "  phases = coordinate_descent(group = \"gate\", g_steps = every(period "
    "= 4, length = 2))\n");

SessionOptions oneThread() {
  SessionOptions options;
  options.threads = 1;
  return options;
}

std::string tempPath(const std::string &name) {
  return (std::filesystem::temp_directory_path() /
          ("moec-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

using Snapshot = std::map<std::string, std::vector<double>>;

Snapshot parameters(const Session &session) {
  Snapshot values;
  for (const ParamInfo &p : session.bundle().params())
    values[p.name] = tensorValues(session.param(p.name));
  return values;
}

bool inGate(const Bundle &bundle, const std::string &name) {
  for (const ParamInfo &p : bundle.params())
    if (p.name == name)
      return p.group == "gate";
  return false;
}

std::map<std::string, Tensor> lossInputs(const Batch &batch) {
  return {{"tokens", batch.tokens}, {"targets", batch.targets}};
}

TEST(Phases, EachPhaseHasItsOwnPrograms) {
  Bundle bundle = compileSource(kBcd, "bcd.moe");
  for (const char *program : {"loss", "loss_g", "backward", "backward_g",
                              "train_step", "train_step_g"})
    EXPECT_TRUE(bundle.hasProgram(program)) << program;
  ASSERT_TRUE(bundle.training().phases);
  EXPECT_EQ(bundle.training().phases->group, "gate");
  EXPECT_EQ(bundle.training().groups, std::vector<std::string>{"gate"});
  int routers = 0;
  for (const ParamInfo &p : bundle.params()) {
    bool router = p.name.size() > 7 &&
                  p.name.compare(p.name.size() - 7, 7, ".router") == 0;
    EXPECT_EQ(p.group, router ? "gate" : "") << p.name;
    routers += router;
  }
  EXPECT_EQ(routers, 2);

  // Each step counts its own optimizer's updates and reports its rate.
  auto has = [](const std::vector<std::string> &names, const char *name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  std::vector<std::string> f = bundle.programInputs("train_step"),
                           g = bundle.programInputs("train_step_g");
  EXPECT_TRUE(has(f, "step"));
  EXPECT_FALSE(has(f, "step:gate"));
  EXPECT_TRUE(has(g, "step:gate"));
  EXPECT_FALSE(has(g, "step"));
  EXPECT_TRUE(has(bundle.programOutputs("train_step"), "lr"));
  EXPECT_TRUE(has(bundle.programOutputs("train_step_g"), "lr:gate"));
  EXPECT_FALSE(has(bundle.programOutputs("train_step_g"), "lr"));

  // One set of moments per trained parameter: SGD's one for the routers,
  // Adam's two for the rest; train_step updates no router, train_step_g
  // nothing else.
  const detail::BundleData &data = bundle.internals();
  for (const ParamInfo &p : bundle.params()) {
    EXPECT_TRUE(data.findState("opt.m." + p.name)) << p.name;
    EXPECT_EQ(data.findState("opt.v." + p.name) != nullptr, p.group.empty())
        << p.name;
  }
  for (const char *program : {"train_step", "train_step_g"}) {
    bool gStep = std::string(program) == "train_step_g";
    size_t updates = data.program(program).updates.size();
    EXPECT_EQ(updates, gStep ? 2u * 2 : (bundle.params().size() - 2) * 3)
        << program;
    for (const auto &[target, buffer] : data.program(program).updates) {
      std::string param =
          target.rfind("opt.", 0) == 0 ? target.substr(6) : target;
      EXPECT_EQ(inGate(bundle, param), gStep) << program << ": " << target;
    }
  }
}

// The plan of each step computes no gradient of a parameter it does not
// train: no dW GEMM for theta in train_step_g, none for the routers in
// train_step, no expert weight or norm gradients and no embedding gradient
// in train_step_g.
TEST(Phases, PlansSkipTheFrozenBlocksGradients) {
  Bundle bundle = compileSource(kBcd, "bcd.moe");
  const detail::BundleData &data = bundle.internals();
  for (const char *name : {"train_step", "train_step_g"}) {
    const detail::ProgramDesc &program = data.program(name);
    bool gStep = std::string(name) == "train_step_g";
    int weightGrads = 0, routerGrads = 0, expertWeightGrads = 0, normGrads = 0,
        embeddingGrads = 0;
    for (const detail::StepDesc &step : program.steps) {
      if (step.op == "moe.linear_grad") {
        const detail::BufferDesc &w = program.buffers.at(step.in.at(1));
        ASSERT_EQ(w.kind, detail::BufferKind::Param) << name;
        bool computed = step.out.at(1) >= 0;
        EXPECT_EQ(computed, gStep == inGate(bundle, w.bind))
            << name << ": dW of " << w.bind;
        weightGrads += computed;
        routerGrads += computed && inGate(bundle, w.bind);
      } else if (step.op == "moe.expert_ffn_grad") {
        for (size_t i = 2; i < step.out.size(); ++i)
          expertWeightGrads += step.out[i] >= 0;
      } else if (step.op == "moe.layer_norm_grad") {
        normGrads += (step.out.at(1) >= 0) + (step.out.at(2) >= 0);
      } else if (step.op == "moe.embedding_grad" ||
                 step.op == "moe.add_positions_grad") {
        ++embeddingGrads;
      }
    }
    std::printf("%s: %d weight GEMMs (%d of routers), %d expert weight "
                "gradients, %d norm gradients, %d embedding gradients\n",
                name, weightGrads, routerGrads, expertWeightGrads, normGrads,
                embeddingGrads);
    if (gStep) {
      EXPECT_EQ(weightGrads, 2);
      EXPECT_EQ(routerGrads, 2);
      EXPECT_EQ(expertWeightGrads, 0);
      EXPECT_EQ(normGrads, 0);
      EXPECT_EQ(embeddingGrads, 0);
    } else {
      EXPECT_EQ(routerGrads, 0);
      // wq, wk, wv, wo per attention layer and the head.
      EXPECT_EQ(weightGrads, 2 * 4 + 1);
      EXPECT_EQ(expertWeightGrads, 2 * 2);
      EXPECT_GT(normGrads, 0);
      EXPECT_GT(embeddingGrads, 0);
    }
  }
}

// A G step changes the routers and nothing else; an F step everything but
// them. Each reports its phase and its optimizer's rate.
TEST(Phases, GStepsTrainOnlyTheGroupAndFStepsNoneOfIt) {
  Bundle bundle = compileSource(kBcd, "bcd.moe");
  Session session(bundle, oneThread());
  auto data = openDataSource(bundle.data(), 256, session.seed());
  const std::string expected = "FFGGF";
  for (int64_t i = 0; i < static_cast<int64_t>(expected.size()); ++i) {
    Snapshot before = parameters(session);
    StepResult result = session.trainStep(data->batch(i, 2, 8));
    Snapshot after = parameters(session);
    bool gStep = expected[i] == 'G';
    ASSERT_EQ(result.phase, std::string(1, expected[i])) << "step " << i + 1;
    EXPECT_TRUE(std::isfinite(result.scalars.at("loss")));
    EXPECT_EQ(result.scalars.count("lr"), gStep ? 0u : 1u);
    EXPECT_EQ(result.scalars.count("lr:gate"), gStep ? 1u : 0u);
    if (gStep)
      EXPECT_DOUBLE_EQ(result.scalars.at("lr:gate"), 1.0);
    else
      EXPECT_NEAR(result.scalars.at("lr"), 1e-2, 1e-9);
    int changed = 0;
    for (const auto &[name, values] : before) {
      bool moved = values != after.at(name);
      bool trained = inGate(bundle, name) == gStep;
      if (trained)
        EXPECT_TRUE(moved) << "step " << i + 1 << " (" << expected[i]
                           << ") left " << name << " as it was";
      else
        EXPECT_FALSE(moved)
            << "step " << i + 1 << " (" << expected[i] << ") changed " << name;
      changed += moved;
    }
    std::printf("step %lld (%c): %d of %zu parameters changed\n",
                static_cast<long long>(i + 1), expected[i], changed,
                before.size());
  }
}

// The schedule by hand, and each optimizer's update count: every(period =
// 4, length = 2) makes steps 3, 4, 7, 8, 11, 12 G steps; first(3) steps 1
// to 3.
TEST(Phases, ScheduleAndUpdateCounters) {
  struct Case {
    std::string gSteps, phases;
  };
  for (const Case &c :
       {Case{"every(period = 4, length = 2)", "FFGGFFGGFFGG"},
        Case{"every(period = 4, length = 1, offset = 1)", "GFFFGFFFGFFF"},
        Case{"first(3)", "GGGFFFFFFFFF"}}) {
    Bundle bundle = compileSource(
        withTrain("  optimizer = adam(lr = 1e-2)\n"
                  "  groups = [group(\"gate\", params = [\"*.router\"])]\n"
                  "  phases = coordinate_descent(group = \"gate\", g_steps "
                  "= " +
                  c.gSteps + ")\n"),
        "bcd.moe");
    Session session(bundle, oneThread());
    auto data = openDataSource(bundle.data(), 256, session.seed());
    std::string phases;
    int64_t g = 0;
    for (int64_t i = 0; i < 12; ++i) {
      EXPECT_EQ(session.updates(), (std::map<std::string, int64_t>{
                                       {"step", i - g}, {"step:gate", g}}))
          << c.gSteps << " before step " << i + 1;
      std::string next = session.nextPhase();
      StepResult result = session.trainStep(data->batch(i, 2, 8));
      EXPECT_EQ(result.phase, next);
      phases += result.phase;
      g += result.phase == "G";
    }
    EXPECT_EQ(phases, c.phases) << c.gSteps;
  }
}

// Adam's bias correction counts the group's own updates: the first G step
// is the group's first update, whatever the global step (3), so it moves
// each router weight by lr * sign(g).
TEST(Phases, GroupAdamCountsItsOwnUpdates) {
  Bundle bundle = compileSource(
      withTrain("  optimizer = adam(lr = 1e-2)\n"
                "  groups = [group(\"gate\", params = [\"*.router\"], "
                "optimizer = adam(lr = 1e-3))]\n"
                "  phases = coordinate_descent(group = \"gate\", g_steps = "
                "every(period = 4, length = 2))\n"),
      "bcd.moe");
  Session session(bundle, oneThread());
  auto data = openDataSource(bundle.data(), 256, session.seed());
  for (int64_t i = 0; i < 2; ++i)
    ASSERT_EQ(session.trainStep(data->batch(i, 2, 8)).phase, "F");
  Batch batch = data->batch(2, 2, 8);
  const std::string router = "layers.0.moe.router";
  std::vector<double> grad = tensorValues(
      session.run("backward_g", lossInputs(batch)).at("grad:" + router));
  std::vector<double> before = tensorValues(session.param(router));
  ASSERT_EQ(session.trainStep(batch).phase, "G");
  std::vector<double> after = tensorValues(session.param(router));
  int checked = 0;
  for (size_t i = 0; i < grad.size(); ++i) {
    if (std::fabs(grad[i]) < 1e-5)
      continue;
    EXPECT_NEAR(after[i] - before[i], grad[i] > 0 ? -1e-3 : 1e-3, 2e-6) << i;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

// Stopped inside a G window (after step 3; step 4 is a G step too) and
// resumed from its checkpoint, the run repeats the unbroken one bit for
// bit; so does a checkpoint without the update counters, which follow from
// its step and the schedule.
TEST(Phases, ResumedInsideAGWindowMatchesAnUnbrokenRun) {
  Bundle bundle = compileSource(kBcd, "bcd.moe");
  auto data = openDataSource(bundle.data(), 256, 3);
  const int64_t total = 12, stop = 3;
  Session unbroken(bundle, oneThread());
  std::vector<double> losses;
  for (int64_t i = 0; i < total; ++i)
    losses.push_back(
        unbroken.trainStep(data->batch(i, 2, 8)).scalars.at("loss"));

  Session first(bundle, oneThread());
  for (int64_t i = 0; i < stop; ++i)
    first.trainStep(data->batch(i, 2, 8));
  ASSERT_EQ(first.nextPhase(), "G");
  std::string path = tempPath("bcd.safetensors");
  first.saveCheckpoint(path);
  CheckpointContents contents = loadCheckpoint(path);
  EXPECT_EQ(contents.metadata.at("step"), "3");
  EXPECT_EQ(contents.metadata.at("updates"), "2");
  EXPECT_EQ(contents.metadata.at("updates:gate"), "1");

  // The same checkpoint as one written without the counters.
  std::string bare = tempPath("bcd-bare.safetensors");
  std::map<std::string, std::string> metadata = contents.metadata;
  metadata.erase("updates");
  metadata.erase("updates:gate");
  saveCheckpoint(bare, contents.tensors, metadata);

  for (const std::string &checkpoint : {path, bare}) {
    SessionOptions options = oneThread();
    options.seed = 999; // other initial weights, all overwritten
    Session resumed(bundle, options);
    resumed.loadCheckpoint(checkpoint);
    EXPECT_EQ(resumed.step(), stop);
    EXPECT_EQ(resumed.updates(),
              (std::map<std::string, int64_t>{{"step", 2}, {"step:gate", 1}}));
    for (int64_t i = stop; i < total; ++i) {
      StepResult result = resumed.trainStep(data->batch(i, 2, 8));
      EXPECT_EQ(result.scalars.at("loss"), losses[i])
          << checkpoint << ", step " << i + 1;
    }
    EXPECT_EQ(parameters(resumed), parameters(unbroken)) << checkpoint;
    EXPECT_EQ(resumed.updates(), unbroken.updates());
  }
  std::filesystem::remove(path);
  std::filesystem::remove(bare);
}

// Without phases every group trains at every step with its own optimizer:
// the routers take one plain SGD step at lr 0.5 from backward's gradient,
// the rest Adam's first step of lr 1e-2 * sign(g).
TEST(Phases, JointTrainingGivesEachGroupItsOptimizer) {
  Bundle bundle = compileSource(
      withTrain("  optimizer = adam(lr = 1e-2)\n"
                "  groups = [group(\"gate\", params = [\"*.router\"], "
                "optimizer = sgd(lr = 0.5))]\n"),
      "joint.moe");
  EXPECT_FALSE(bundle.training().phases);
  EXPECT_FALSE(bundle.hasProgram("train_step_g"));
  EXPECT_FALSE(bundle.hasProgram("loss_g"));
  Session session(bundle, oneThread());
  auto data = openDataSource(bundle.data(), 256, session.seed());
  Batch batch = data->batch(0, 2, 8);
  std::map<std::string, Tensor> grads =
      session.run("backward", lossInputs(batch));
  Snapshot before = parameters(session);
  StepResult result = session.trainStep(batch);
  Snapshot after = parameters(session);
  EXPECT_EQ(result.phase, "");
  EXPECT_NEAR(result.scalars.at("lr"), 1e-2, 1e-9);
  EXPECT_DOUBLE_EQ(result.scalars.at("lr:gate"), 0.5);
  EXPECT_EQ(session.updates(),
            (std::map<std::string, int64_t>{{"step", 1}, {"step:gate", 1}}));
  int routers = 0, adamChecked = 0;
  for (const auto &[name, values] : before) {
    std::vector<double> g = tensorValues(grads.at("grad:" + name));
    for (size_t i = 0; i < values.size(); ++i) {
      double step = after.at(name)[i] - values[i];
      if (inGate(bundle, name)) {
        EXPECT_NEAR(step, -0.5 * g[i], 1e-6) << name << "[" << i << "]";
      } else if (std::fabs(g[i]) > 1e-5) {
        EXPECT_NEAR(step, g[i] > 0 ? -1e-2 : 1e-2, 1e-5)
            << name << "[" << i << "]";
        ++adamChecked;
      }
    }
    routers += inGate(bundle, name);
  }
  EXPECT_EQ(routers, 2);
  EXPECT_GT(adamChecked, 1000);
}

// Outputs named "gate:<layer>" (the MAE layer's responsibilities and
// entropy) reach StepResult::gates, whatever layer makes them.
TEST(Phases, GateOutputsReachTheStepResult) {
  const char *module = R"mlir(
module attributes {
    moe.model = {name = "gates", kind = "decoder", objective = "lm", vocab = 4 : i64, d_model = 4 : i64, max_seq = 8 : i64, dtype = "f32", segments = 0 : i64, moe_layers = [], tokenizer = {kind = "bytes", path = "", sha256 = ""}},
    moe.training = {optimizer = "sgd", schedule = "constant", lr = 0.1 : f64, batch = 1 : i64, seq_len = 2 : i64, steps = 10 : i64, seed = 3 : i64, log_every = 1 : i64},
    moe.data = {kind = "synthetic", task = "copy", paths = [], labels = [], task_seed = 0 : i64, branching = 2 : i64, valid_fraction = 0.1 : f64}} {
  moe.param @w : tensor<4x4xf32> {init = #moe.init<normal>}
  func.func @loss(%w: tensor<4x4xf32> {moe.param = @w},
                  %ids: tensor<?x?xi32> {moe.input = "tokens", moe.dims = ["B", "S"]},
                  %x: tensor<?x?x4xf32> {moe.input = "x", moe.dims = ["B", "S", 4]},
                  %t: tensor<?x?xi32> {moe.input = "targets", moe.dims = ["B", "S"]})
      -> (tensor<f32> {moe.output = "loss"}, tensor<3xf32> {moe.output = "gate:layers.0.mae"}) attributes {moe.entry = "loss"} {
    %l = moe.linear %x, %w : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
    %ce, %count = moe.cross_entropy %l, %t : (tensor<?x?x4xf32>, tensor<?x?xi32>) -> (tensor<f32>, tensor<f32>)
    %g = arith.constant dense<[0.25, 0.75, 0.5625]> : tensor<3xf32>
    return %ce, %g : tensor<f32>, tensor<3xf32>
  }
}
)mlir";
  Bundle bundle = compileModuleSource(module, "gates.mlir");
  Session session(bundle, oneThread());
  Batch batch;
  batch.tokens = Tensor(DType::I32, {1, 2});
  batch.targets = Tensor::of<int32_t>({1, 2}, {1, 2});
  batch.inputs["x"] = Tensor::of<float>({1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  StepResult result = session.trainStep(batch);
  EXPECT_EQ(result.phase, "");
  ASSERT_EQ(result.gates.size(), 1u);
  EXPECT_EQ(result.gates.at("layers.0.mae"),
            (std::vector<double>{0.25, 0.75, 0.5625}));
  EXPECT_EQ(result.scalars.count("gate:layers.0.mae"), 0u);
}

} // namespace
