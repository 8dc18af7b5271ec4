//===- Session.cpp - a model's parameters and state on a device -----------===//

#include "moec/Session.h"
#include "BeamSearch.h"
#include "BundleData.h"
#include "Device.h"
#include "Initializers.h"
#include "InputCheck.h"
#include "Philox.h"
#include "ProgramRunner.h"
#include "Sampling.h"
#include "data/Sources.h"
#include "moec/Checkpoint.h"
#include "moec/Error.h"
#include "moec/ModelData.h"
#include "moec/Version.h"
#include "moec/support/Stopwatch.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <omp.h>

namespace moec {

using detail::BufferMap;
using detail::ProgramRunner;

struct Session::Impl {
  Bundle bundle;
  const detail::BundleData &data;
  SessionOptions options;
  std::unique_ptr<detail::Device> device;
  uint64_t seed;
  int64_t step = 0;
  /// Updates per optimizer, by the input that counts them ("step",
  /// "step:<group>").
  std::map<std::string, int64_t> updates;
  BufferMap params, states;
  std::map<std::string, std::unique_ptr<ProgramRunner>> runners;
  std::map<std::string, std::vector<double>> load;
  /// moe.routing_stats sums per layer (see ExpertLoad).
  std::map<std::string, std::vector<double>> routing;

  Impl(Bundle b, SessionOptions o)
      : bundle(std::move(b)), data(bundle.internals()), options(std::move(o)),
        device(detail::createDevice(options.device)),
        seed(options.seed.value_or(data.training.seed)) {
    if (options.threads > 0)
      omp_set_num_threads(options.threads);
    device->setBundle(data);
    for (const ParamInfo &p : data.params)
      params[p.name] = device->adopt(detail::initialValue(p, seed));
    resetOptimizerState();
    updates = updatesAt(0);
  }

  /// The update counters' names: "step" and "step:<group>".
  std::vector<std::string> counters() const {
    std::vector<std::string> names{"step"};
    for (const std::string &g : data.training.groups)
      names.push_back("step:" + g);
    return names;
  }

  /// Each optimizer's updates after `steps` steps of an unbroken run: the
  /// group phi counts the G steps, every other optimizer the F steps.
  std::map<std::string, int64_t> updatesAt(int64_t steps) const {
    const std::optional<PhaseConfig> &phases = data.training.phases;
    int64_t g = phases ? phases->gStepsIn(steps) : 0;
    int64_t f = phases ? phases->fStepsIn(steps) : steps;
    std::map<std::string, int64_t> counts;
    for (const std::string &name : counters())
      counts[name] = phases && name == "step:" + phases->group ? g : f;
    return counts;
  }

  bool isGStep() const {
    return data.training.phases && data.training.phases->isGStep(step);
  }

  /// Zeroes every optimizer moment (states that shadow a parameter).
  void resetOptimizerState() {
    for (const detail::StateDesc &s : data.states)
      if (!s.like.empty())
        states[s.name] = device->allocate(
            s.dtype, data.findParam(s.like)->shape);
  }

  ProgramRunner &runner(const std::string &name) {
    auto &slot = runners[name];
    if (!slot)
      slot = std::make_unique<ProgramRunner>(*device, data.program(name));
    return *slot;
  }

  std::map<std::string, Tensor> run(const std::string &name,
                                    std::map<std::string, Tensor> inputs) {
    ProgramRunner &r = runner(name);
    checkTokenInputs(data, name, inputs);
    std::map<std::string, Tensor> outputs = r.run(inputs, params, states);
    for (auto &[output, tensor] : outputs)
      for (auto [prefix, sums] :
           {std::pair<std::string_view, decltype(&load)>{"load:", &load},
            {"routing:", &routing}})
        if (output.rfind(prefix, 0) == 0) {
          std::vector<double> &sum = (*sums)[output.substr(prefix.size())];
          sum.resize(tensor.numel(), 0.0);
          for (int64_t e = 0; e < tensor.numel(); ++e)
            sum[e] += tensor.at(e);
        }
    return outputs;
  }

  static Tensor scalarI64(int64_t v) { return Tensor::of<int64_t>({}, {v}); }

  /// Moves row parents[r] of every cache of earlier positions (self-
  /// attention keys and values, MAE gates' inputs) to row r (beam search
  /// continuing other hypotheses).
  void reorderCaches(const std::vector<int64_t> &parents) {
    bool identity = true;
    for (size_t r = 0; r < parents.size(); ++r)
      identity &= parents[r] == static_cast<int64_t>(r);
    if (identity)
      return;
    for (const detail::StateDesc &s : data.states) {
      bool ofEarlierPositions =
          s.name.rfind("kv.", 0) == 0 || s.name.rfind("pool.", 0) == 0;
      if (!s.like.empty() || !ofEarlierPositions)
        continue;
      auto it = states.find(s.name);
      if (it == states.end())
        continue;
      Tensor cache = device->download(*it->second);
      Tensor moved(cache.dtype(), cache.shape());
      int64_t rowSize = cache.numel() / static_cast<int64_t>(parents.size());
      size_t bytes = static_cast<size_t>(rowSize) * dtypeSize(cache.dtype());
      for (size_t r = 0; r < parents.size(); ++r)
        std::memcpy(static_cast<char *>(moved.raw()) + r * bytes,
                    static_cast<const char *>(cache.raw()) + parents[r] * bytes,
                    bytes);
      device->upload(*it->second, moved);
    }
  }

  /// Beam search over the sentences of one batch.
  std::vector<std::vector<int32_t>>
  translateBatch(const std::vector<std::vector<int32_t>> &sources,
                 const SpecialTokens &sp, const detail::BeamSettings &settings,
                 const GenerateConfig &config) {
    const int64_t maxSeq = data.model.maxSeq;
    const auto count = static_cast<int64_t>(sources.size());
    const int64_t beam = settings.beam, rows = count * beam;
    int64_t width = 1;
    std::vector<int64_t> maxLengths;
    for (const std::vector<int32_t> &src : sources) {
      auto length = std::min<int64_t>(src.size(), maxSeq - 1);
      width = std::max(width, length + 1);
      maxLengths.push_back(std::clamp<int64_t>(
          static_cast<int64_t>(config.maxLenA * length) + config.maxLenB, 1,
          maxSeq - 1));
    }
    // Every hypothesis row of a sentence reads the same source: the layout
    // of translation batches (source + eos, padded), width enough for the
    // longest.
    std::vector<TranslationPair> rowsOfSources;
    for (const std::vector<int32_t> &src : sources)
      for (int64_t i = 0; i < beam; ++i)
        rowsOfSources.push_back({src, {}});
    Batch encoded = data::makeTranslationBatch(rowsOfSources, width, sp);
    const Tensor &source = encoded.inputs.at("source");
    const Tensor &sourceMask = encoded.inputs.at("source_mask");
    run("encode", {{"source", source}, {"source_mask", sourceMask}});
    int64_t past = 0;
    auto step = [&](const std::vector<int32_t> &last,
                    const std::vector<int64_t> &parents) {
      reorderCaches(parents);
      Tensor logits =
          run("decode", {{"tokens", Tensor::of<int32_t>({rows, 1}, last)},
                         {"past", scalarI64(past++)},
                         {"source_mask", sourceMask}})
              .at("logits");
      int64_t vocab = logits.shape().back();
      std::vector<std::vector<double>> out(rows, std::vector<double>(vocab));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t v = 0; v < vocab; ++v)
          out[r][v] = logits.at(r * vocab + v);
      return out;
    };
    return detail::beamSearch(maxLengths, settings, step);
  }

  /// The dropout stream of a step: a pure function of (seed, step).
  int64_t rngFor(int64_t stepIndex) const {
    PhiloxBlock block = philoxBlock(seed, uint64_t(0x5eed) << 32,
                                    static_cast<uint64_t>(stepIndex));
    return static_cast<int64_t>(
        ((static_cast<uint64_t>(block[0]) << 32) | block[1]) >> 1);
  }

  std::map<std::string, Tensor> batchInputs(const Batch &batch,
                                            const ProgramRunner &r,
                                            int64_t stepIndex) {
    std::map<std::string, Tensor> inputs{{"tokens", batch.tokens}};
    if (r.hasInput("targets"))
      inputs["targets"] = batch.targets;
    for (const auto &[name, tensor] : batch.inputs)
      if (r.hasInput(name))
        inputs[name] = tensor;
    // Each optimizer's update number (1-based) for the ones the program
    // updates.
    for (const std::string &name : counters())
      if (r.hasInput(name))
        inputs[name] = scalarI64(updates[name] + 1);
    if (r.hasInput("rng"))
      inputs["rng"] = scalarI64(rngFor(stepIndex));
    return inputs;
  }
};

namespace {
double ratio(double part, double whole) { return whole > 0 ? part / whole : 0; }

/// The checkpoint metadata key of an update counter: "updates" for the
/// main optimizer's ("step"), "updates:<group>" for a group's.
std::string updatesKey(const std::string &counter) {
  return "updates" + counter.substr(4);
}
} // namespace

double ExpertLoad::droppedFraction() const {
  return ratio(assignments - keptAssignments, assignments);
}
double ExpertLoad::rowActivation() const { return ratio(activeRows, rows); }
double ExpertLoad::expertActivation() const {
  return ratio(reachedExperts, expertSlots);
}

std::vector<double> ExpertLoad::fractions() const {
  double total = 0;
  for (double t : tokens)
    total += t;
  std::vector<double> f(tokens.size(), 0.0);
  if (total > 0)
    for (size_t e = 0; e < tokens.size(); ++e)
      f[e] = tokens[e] / total;
  return f;
}

Session::Session(Bundle bundle, SessionOptions options)
    : impl(std::make_unique<Impl>(std::move(bundle), std::move(options))) {}
Session::~Session() = default;
Session::Session(Session &&) noexcept = default;
Session &Session::operator=(Session &&) noexcept = default;

const Bundle &Session::bundle() const { return impl->bundle; }
std::string Session::deviceName() const { return impl->device->name(); }
uint64_t Session::seed() const { return impl->seed; }
int64_t Session::step() const { return impl->step; }

std::map<std::string, int64_t> Session::updates() const {
  return impl->updates;
}

std::string Session::nextPhase() const {
  if (!impl->data.training.phases)
    return "";
  return impl->isGStep() ? "G" : "F";
}

StepResult Session::trainStep(const Batch &batch) {
  StepResult result;
  result.phase = nextPhase();
  double waitedBefore = impl->device->waitSeconds();
  // One update by `program`; its outputs replace those of an earlier one.
  auto update = [&](const std::string &program) {
    ProgramRunner &r = impl->runner(program);
    std::map<std::string, Tensor> outputs =
        impl->run(program, impl->batchInputs(batch, r, impl->step));
    for (const std::string &name : impl->counters())
      if (r.hasInput(name))
        ++impl->updates[name];
    for (const auto &[name, tensor] : outputs) {
      if (tensor.numel() == 1 && tensor.shape().empty())
        result.scalars[name] = tensor.at(0);
      else if (name.rfind("gate:", 0) == 0) {
        std::vector<double> &values = result.gates[name.substr(5)];
        values.clear();
        for (int64_t i = 0; i < tensor.numel(); ++i)
          values.push_back(tensor.at(i));
      }
    }
  };
  if (result.phase == "G") {
    update("train_step_g");
    if (impl->data.training.phases->thenF) {
      // The G update's objective stays visible; the F update's is "loss".
      result.scalars["g_loss"] = result.scalars.at("loss");
      update("train_step");
    }
  } else {
    update("train_step");
  }
  result.step = ++impl->step;
  result.deviceWaitSeconds = impl->device->waitSeconds() - waitedBefore;
  return result;
}

std::string Session::evaluationProgram() const {
  return impl->bundle.hasProgram("eval_loss") ? "eval_loss" : "loss";
}

std::map<std::string, double> Session::evaluate(const Batch &batch) {
  std::string program = evaluationProgram();
  ProgramRunner &r = impl->runner(program);
  std::map<std::string, Tensor> outputs =
      impl->run(program, impl->batchInputs(batch, r, impl->step));
  std::map<std::string, double> scalars;
  for (const auto &[name, tensor] : outputs)
    if (tensor.shape().empty())
      scalars[name] = tensor.at(0);
  return scalars;
}

std::map<std::string, Tensor>
Session::run(const std::string &program,
             const std::map<std::string, Tensor> &inputs) {
  return impl->run(program, inputs);
}

Tensor Session::logits(const Batch &batch) {
  ProgramRunner &r = impl->runner("forward");
  return impl->run("forward", impl->batchInputs(batch, r, impl->step))
      .at("logits");
}

std::vector<int32_t> Session::generate(const std::vector<int32_t> &prompt,
                                       const GenerateOptions &options,
                                       GenerateTimes *times) {
  if (!impl->bundle.hasProgram("decode"))
    throw Error("this model has no 'decode' program, so it cannot generate");
  const int64_t maxSeq = impl->data.model.maxSeq;
  if (prompt.empty())
    throw Error("generation needs a prompt of at least one token");
  if (static_cast<int64_t>(prompt.size()) >= maxSeq)
    throw Error(fmt::format("the prompt has {} tokens but the model's context "
                            "holds {} (max_seq); shorten the prompt",
                            prompt.size(), maxSeq));
  for (int32_t t : prompt)
    if (t < 0 || t >= impl->data.model.vocab)
      throw Error(fmt::format("prompt token {} is outside the vocabulary "
                              "[0, {})",
                              t, impl->data.model.vocab));
  std::vector<int32_t> generated;
  std::vector<int32_t> chunk = prompt;
  int64_t past = 0;
  GenerateTimes spent;
  impl->runner("decode"); // prepared outside the clock
  while (static_cast<int64_t>(generated.size()) < options.maxNewTokens &&
         past + static_cast<int64_t>(chunk.size()) <= maxSeq) {
    auto start = std::chrono::steady_clock::now();
    std::map<std::string, Tensor> inputs{
        {"tokens", Tensor::of<int32_t>(
                       {1, static_cast<int64_t>(chunk.size())}, chunk)},
        {"past", Impl::scalarI64(past)}};
    Tensor logits = impl->run("decode", inputs).at("logits");
    int64_t vocab = logits.shape().back();
    int64_t last = (logits.numel() / vocab) - 1;
    std::vector<double> row(vocab);
    for (int64_t v = 0; v < vocab; ++v)
      row[v] = logits.at(last * vocab + v);
    int32_t next = detail::sampleToken(row, options.temperature, options.topK,
                                       options.seed, generated.size());
    double seconds = support::secondsSince(start);
    if (past == 0) {
      spent.promptTokens = static_cast<int64_t>(chunk.size());
      spent.promptSeconds = seconds;
    } else {
      spent.tokenSeconds.push_back(seconds);
    }
    past += static_cast<int64_t>(chunk.size());
    generated.push_back(next);
    chunk = {next};
  }
  if (times)
    *times = spent;
  return generated;
}

std::vector<std::vector<int32_t>>
Session::translate(const std::vector<std::vector<int32_t>> &sources,
                   const SpecialTokens &specials,
                   const TranslateOptions &options) {
  if (!impl->bundle.hasProgram("encode") || !impl->bundle.hasProgram("decode"))
    throw Error("translation needs an encoder_decoder model (its 'encode' "
                "and 'decode' programs)");
  if (specials.bos < 0 || specials.eos < 0 || specials.pad < 0)
    throw Error("translation needs a tokenizer with pad, bos and eos tokens");
  const GenerateConfig &config = impl->data.generate;
  detail::BeamSettings settings;
  settings.beam = options.beam.value_or(config.beam);
  settings.lengthPenalty = options.lengthPenalty.value_or(config.lengthPenalty);
  settings.bos = specials.bos;
  settings.eos = specials.eos;
  settings.banned = {specials.pad, specials.bos};
  if (settings.beam < 1 || options.batch < 1)
    throw Error("translation needs a beam and a batch of at least 1");
  for (const std::vector<int32_t> &src : sources)
    for (int32_t t : src)
      if (t < 0 || t >= impl->data.model.vocab)
        throw Error(fmt::format("source token {} is outside the vocabulary "
                                "[0, {})",
                                t, impl->data.model.vocab));
  std::vector<std::vector<int32_t>> outputs;
  for (size_t first = 0; first < sources.size();
       first += static_cast<size_t>(options.batch)) {
    size_t last =
        std::min(sources.size(), first + static_cast<size_t>(options.batch));
    std::vector<std::vector<int32_t>> chunk(sources.begin() + first,
                                            sources.begin() + last);
    for (std::vector<int32_t> &out :
         impl->translateBatch(chunk, specials, settings, config))
      outputs.push_back(std::move(out));
  }
  return outputs;
}

void Session::saveCheckpoint(const std::string &path) const {
  std::map<std::string, Tensor> tensors;
  for (const auto &[name, buffer] : impl->params)
    tensors[name] = impl->device->download(*buffer);
  for (const detail::StateDesc &s : impl->data.states)
    if (!s.like.empty())
      tensors[s.name] = impl->device->download(*impl->states.at(s.name));
  std::map<std::string, std::string> metadata{
      {"format", "moec-checkpoint"},
      {"moec_version", kVersion},
      {"model", impl->data.model.name},
      {"step", std::to_string(impl->step)},
      {"optimizer", impl->data.training.optimizer},
      {"tokenizer", tokenizerFingerprint(impl->bundle)}};
  // Without groups the one counter is the step itself.
  if (!impl->data.training.groups.empty())
    for (const auto &[counter, count] : impl->updates)
      metadata[updatesKey(counter)] = std::to_string(count);
  moec::saveCheckpoint(path, tensors, metadata);
}

/// The "step" (or update count) a checkpoint records: decimal digits only
/// (no sign, no hex, no spaces), within int64; anything else names the file.
static int64_t parseStepMetadata(const std::string &path,
                                 const std::string &text,
                                 const std::string &key = "step") {
  bool digits = !text.empty() && text.size() <= 18;
  for (char c : text)
    digits = digits && c >= '0' && c <= '9';
  if (!digits)
    throw Error(fmt::format("{}: metadata '{}' is \"{}\", expected a "
                            "non-negative decimal integer below 10^18",
                            path, key, text));
  return std::stoll(text);
}

void Session::loadCheckpoint(const std::string &path) {
  CheckpointContents contents = moec::loadCheckpoint(path);
  // Token ids mean nothing under another tokenizer.
  if (auto it = contents.metadata.find("tokenizer");
      it != contents.metadata.end() &&
      it->second != tokenizerFingerprint(impl->bundle))
    throw Error(fmt::format("{}: metadata 'tokenizer': the checkpoint was "
                            "trained with tokenizer '{}' but this model uses "
                            "'{}'",
                            path, it->second,
                            tokenizerFingerprint(impl->bundle)));
  std::vector<TensorSpec> expected;
  for (const ParamInfo &p : impl->data.params)
    expected.push_back({p.name, p.dtype, p.shape});
  bool hasOptimizerState = false;
  for (const detail::StateDesc &s : impl->data.states)
    if (!s.like.empty() && contents.tensors.count(s.name))
      hasOptimizerState = true;
  if (hasOptimizerState)
    for (const detail::StateDesc &s : impl->data.states)
      if (!s.like.empty())
        expected.push_back(
            {s.name, s.dtype, impl->data.findParam(s.like)->shape});
  checkCheckpoint(path, contents, expected);

  for (const ParamInfo &p : impl->data.params)
    impl->device->upload(*impl->params.at(p.name), contents.tensors.at(p.name));
  impl->resetOptimizerState();
  if (hasOptimizerState)
    for (const detail::StateDesc &s : impl->data.states)
      if (!s.like.empty())
        impl->device->upload(*impl->states.at(s.name),
                             contents.tensors.at(s.name));
  impl->step = 0;
  if (auto it = contents.metadata.find("step"); it != contents.metadata.end())
    impl->step = parseStepMetadata(path, it->second);
  // Counters the checkpoint lacks (one written before groups existed) are
  // those of an unbroken run to its step.
  impl->updates = impl->updatesAt(impl->step);
  for (auto &[counter, count] : impl->updates)
    if (auto it = contents.metadata.find(updatesKey(counter));
        it != contents.metadata.end())
      count = parseStepMetadata(path, it->second, it->first);
}

Tensor Session::param(const std::string &name) const {
  auto it = impl->params.find(name);
  if (it == impl->params.end())
    throw Error(fmt::format("the model has no parameter '{}'", name));
  return impl->device->download(*it->second);
}

void Session::setParam(const std::string &name, const Tensor &value) {
  auto it = impl->params.find(name);
  if (it == impl->params.end())
    throw Error(fmt::format("the model has no parameter '{}'", name));
  if (value.dtype() != it->second->dtype || value.shape() != it->second->shape)
    throw Error(fmt::format("parameter '{}' is {} {}, got {} {}", name,
                            dtypeName(it->second->dtype),
                            shapeString(it->second->shape),
                            dtypeName(value.dtype()),
                            shapeString(value.shape())));
  impl->device->upload(*it->second, value);
}

std::vector<ExpertLoad> Session::expertLoad() const {
  std::vector<ExpertLoad> result;
  for (const std::string &layer : impl->data.model.moeLayers) {
    ExpertLoad l;
    l.layer = layer;
    if (auto it = impl->load.find(layer); it != impl->load.end())
      l.tokens = it->second;
    if (auto it = impl->routing.find(layer);
        it != impl->routing.end() && it->second.size() == 6) {
      const std::vector<double> &r = it->second;
      l.assignments = r[0];
      l.keptAssignments = r[1];
      l.rows = r[2];
      l.activeRows = r[3];
      l.expertSlots = r[4];
      l.reachedExperts = r[5];
    }
    result.push_back(std::move(l));
  }
  return result;
}

void Session::resetStats() {
  impl->load.clear();
  impl->routing.clear();
}

void Session::setProfiling(bool on) { impl->device->setProfiling(on); }

std::vector<Session::OpTime> Session::profile() const {
  std::vector<OpTime> result;
  for (const auto &[op, entry] : impl->device->profile())
    result.push_back({op, entry.calls, entry.seconds});
  std::sort(result.begin(), result.end(),
            [](const OpTime &a, const OpTime &b) { return a.seconds > b.seconds; });
  return result;
}

std::vector<Session::LayerTime> Session::layerProfile() const {
  std::vector<LayerTime> result;
  for (const auto &[key, entry] : impl->device->layerProfile())
    result.push_back({key.first, key.second, entry.calls, entry.seconds});
  return result;
}

} // namespace moec
