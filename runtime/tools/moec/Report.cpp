//===- Report.cpp - what the driver prints --------------------------------===//

#include "Report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace moec::driver {

void printModelSummary(std::ostream &os, const Session &session,
                       const std::string &dataDescription) {
  const Bundle &bundle = session.bundle();
  int64_t count = 0;
  for (const ParamInfo &p : bundle.params())
    count += numElements(p.shape);
  const ModelInfo &m = bundle.model();
  std::string precision = m.dtype;
  // The cpu device is the fp32 oracle whatever the bundle asks for.
  if (m.f32Matmul != "fp32")
    precision += fmt::format(", f32_matmul {}{}", m.f32Matmul,
                             session.deviceName() == "cpu"
                                 ? " (the cpu device multiplies in fp32)"
                                 : "");
  os << fmt::format("model '{}': {}, {:.2f}M parameters, d_model {}, vocab {}, "
                    "{} MoE layer(s), {}; device {}, seed {}\n",
                    m.name, m.kind, count / 1e6, m.dModel, m.vocab,
                    m.moeLayers.size(), precision, session.deviceName(),
                    session.seed());
  os << "data: " << dataDescription << "\n";
}

namespace {
/// A number for JSON: non-finite values have no spelling there.
std::string jsonNumber(double v) {
  return std::isfinite(v) ? fmt::format("{:.6g}", v) : std::string("null");
}
} // namespace

std::string gateMetrics(const StepResult &result) {
  std::vector<std::string> layers;
  for (const auto &[layer, values] : result.gates) {
    if (values.empty())
      continue;
    std::vector<std::string> shares;
    for (size_t e = 0; e + 1 < values.size(); ++e)
      shares.push_back(jsonNumber(values[e]));
    layers.push_back(
        fmt::format("\"{}\": {{\"entropy\": {}, \"responsibility\": [{}]}}",
                    layer, jsonNumber(values.back()), fmt::join(shares, ", ")));
  }
  if (layers.empty())
    return "";
  return fmt::format(", \"gate\": {{{}}}", fmt::join(layers, ", "));
}

std::string formatGates(const StepResult &result) {
  std::string text;
  for (const auto &[layer, values] : result.gates) {
    if (values.empty())
      continue;
    std::vector<std::string> shares;
    for (size_t e = 0; e + 1 < values.size(); ++e)
      shares.push_back(fmt::format("{:.2f}", values[e]));
    text += fmt::format("{}gate {} H {:.3f} r[{}]", text.empty() ? "" : "  ",
                        layer, values.back(), fmt::join(shares, " "));
  }
  return text;
}

std::string formatProgress(const StepResult &result, int64_t lastStep,
                           double meanLoss, int64_t windowSteps,
                           double secondsPerStep, int64_t tokensPerStep) {
  std::string line = fmt::format("step {:>5}/{}", result.step, lastStep);
  if (!result.phase.empty())
    line += " " + result.phase;
  line += fmt::format("  loss {:.4f} (mean of {})", meanLoss, windowSteps);
  std::string last;
  for (const char *name : {"ce", "balance_loss", "z_loss"})
    if (auto it = result.scalars.find(name); it != result.scalars.end())
      last += fmt::format("  {} {:.4f}",
                          name == std::string("balance_loss") ? "bal"
                          : name == std::string("z_loss")     ? "z"
                                                              : name,
                          it->second);
  // The main optimizer's rate, then each parameter group's ("lr:<group>").
  for (const auto &[name, value] : result.scalars)
    if (name == "lr")
      last += fmt::format("  lr {:.2e}", value);
  for (const auto &[name, value] : result.scalars)
    if (name.rfind("lr:", 0) == 0)
      last += fmt::format("  {} {:.2e}", name, value);
  if (auto it = result.scalars.find("grad_norm"); it != result.scalars.end())
    last += fmt::format("  |g| {:.3f}", it->second);
  if (std::string gates = formatGates(result); !gates.empty())
    last += "  " + gates;
  if (!last.empty())
    line += "  this step: " + last.substr(2);
  line += fmt::format("  mean {:.0f} ms/step  {:.0f} tok/s",
                      secondsPerStep * 1e3,
                      tokensPerStep / std::max(secondsPerStep, 1e-9));
  return line;
}

bool isMultiHead(const ExpertLoad &layer) {
  // Rows per token: expertSlots counts tokens times experts.
  double experts = static_cast<double>(layer.tokens.size());
  return experts > 0 && layer.expertSlots > 0 &&
         layer.rows > layer.expertSlots / experts;
}

void printExpertLoad(std::ostream &os, const std::vector<ExpertLoad> &load,
                     const std::string &title) {
  if (load.empty())
    return;
  os << title << " (share of routed tokens per expert):\n";
  for (const ExpertLoad &layer : load) {
    std::vector<double> f = layer.fractions();
    std::string shares;
    for (double share : f)
      shares += fmt::format(" {:5.1f}%", share * 100);
    double mean = f.empty() ? 0 : 1.0 / f.size();
    double max = f.empty() ? 0 : *std::max_element(f.begin(), f.end());
    std::string routing;
    if (layer.assignments > 0)
      routing = fmt::format("   dropped {:.1f}%", 100 * layer.droppedFraction());
    if (isMultiHead(layer))
      routing += fmt::format("   sub-tokens active {:.1f}%, experts reached "
                             "per token {:.1f}%",
                             100 * layer.rowActivation(),
                             100 * layer.expertActivation());
    os << fmt::format("  {:<16}{}   max/mean {:.2f}{}\n", layer.layer, shares,
                      mean > 0 ? max / mean : 0.0, routing);
  }
}

void printProfile(std::ostream &os,
                  const std::vector<Session::OpTime> &profile, int64_t steps) {
  double total = 0;
  for (const Session::OpTime &t : profile)
    total += t.seconds;
  os << fmt::format("time per op ({:.1f} ms per step in ops):\n",
                    steps > 0 ? total * 1e3 / steps : 0.0);
  for (const Session::OpTime &t : profile)
    os << fmt::format("  {:<24} {:>8.2f} ms/step  {:>5.1f}%  {:>6} calls\n",
                      t.op, steps > 0 ? t.seconds * 1e3 / steps : 0.0,
                      total > 0 ? 100 * t.seconds / total : 0.0, t.calls);
}

void printLayerProfile(std::ostream &os,
                       const std::vector<Session::LayerTime> &layers,
                       int64_t steps) {
  if (layers.empty() || steps <= 0)
    return;
  // Forward and backward of one location on one line.
  std::map<std::string, std::pair<const Session::LayerTime *,
                                  const Session::LayerTime *>>
      byLoc;
  for (const Session::LayerTime &t : layers)
    (t.backward ? byLoc[t.loc].second : byLoc[t.loc].first) = &t;
  os << "time per source location (backward: from the first gradient op "
        "of a program on):\n";
  for (const auto &[loc, pair] : byLoc) {
    auto ms = [&](const Session::LayerTime *t) {
      return t ? t->seconds * 1e3 / steps : 0.0;
    };
    auto calls = [](const Session::LayerTime *t) {
      return t ? t->calls : int64_t{0};
    };
    os << fmt::format("  {:<32} forward {:>9.2f} ms/step  backward {:>9.2f} "
                      "ms/step  {:>6} + {} calls\n",
                      loc.empty() ? "(none)" : loc, ms(pair.first),
                      ms(pair.second), calls(pair.first), calls(pair.second));
  }
}

double median(std::vector<double> values) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::string formatGenerateTime(const GenerateTimes &times) {
  std::string text = fmt::format("prompt {} tokens in {:.2f} ms",
                                 times.promptTokens, times.promptSeconds * 1e3);
  if (!times.tokenSeconds.empty()) {
    double each = median(times.tokenSeconds);
    text += fmt::format("; {} tokens after it at {:.3f} ms each (median; "
                        "{:.0f} tokens/s)",
                        times.tokenSeconds.size(), each * 1e3, 1.0 / each);
  }
  return text;
}

std::string formatBatchTime(double firstSeconds, int64_t firstRows,
                            const std::vector<double> &laterSeconds,
                            int64_t batch, int64_t seqLen) {
  double seconds = firstSeconds;
  int64_t rows = firstRows;
  std::string which = "one batch, with its warm-up";
  if (!laterSeconds.empty()) {
    seconds = median(laterSeconds);
    rows = batch;
    which =
        fmt::format("median of {} batch{} after the first", laterSeconds.size(),
                    laterSeconds.size() == 1 ? "" : "es");
  }
  return fmt::format("{:.2f} ms per batch of {} x {} ({:.0f} tokens/s; {})",
                     seconds * 1e3, rows, seqLen,
                     static_cast<double>(rows * seqLen) / seconds, which);
}

std::string formatAccuracy(const std::string &objective,
                           const Accuracy &accuracy) {
  std::string label, unit = "predicted tokens";
  if (objective == "lm" || objective == "translate") {
    // Teacher-forced for translation; nothing to say when nothing counted.
    if (accuracy.total == 0)
      return "";
    label = "next-token accuracy";
  } else if (objective == "mlm") {
    label = "masked-token accuracy";
  } else if (objective == "classify") {
    label = "accuracy";
    unit = "examples";
  } else {
    return "";
  }
  return fmt::format("{} {:.2f}% ({} of {} {})", label, accuracy.percent(),
                     accuracy.correct, accuracy.total, unit);
}

} // namespace moec::driver
