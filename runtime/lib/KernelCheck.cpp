//===- KernelCheck.cpp - generated kernels against the cpu oracle ---------===//

#include "KernelCheck.h"
#include "Initializers.h"
#include "Philox.h"
#include "ProgramRunner.h"
#include "RouterSlotCheck.h"
#include "moec/Error.h"
#include "moec/support/Stopwatch.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <optional>
#include <set>

namespace moec::detail {

namespace {

/// Values that cancel to almost nothing (the gradient of a key bias is
/// zero up to rounding) are noise of the size of a few hundred roundings of
/// the values they were summed from, which are about the size of the
/// group's largest result: float values are compared as if their
/// root-mean-square size were at least this many units of roundoff of the
/// largest size among the group's results, over the tolerance, so that
/// such noise passes and a small value that is signal (every gradient of a
/// loss averaged over many tokens is small) is measured against its own
/// size.
constexpr double kNoiseRoundings = 100;

bool isFloat(DType d) { return d != DType::I32 && d != DType::I64; }

/// The distance from 1 to the next larger value of a float dtype.
double epsilonOf(DType d) {
  switch (d) {
  case DType::F64:
    return 0x1p-52;
  case DType::BF16:
    return 0x1p-7;
  case DType::F16:
    return 0x1p-10;
  default:
    return 0x1p-23;
  }
}

/// A value no correct kernel leaves behind: NaN for floats, an implausible
/// index for integers.
Tensor poison(DType dtype, const Shape &shape) {
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set(i, isFloat(dtype) ? std::nan("") : -0x2152411f);
  return t;
}

/// Fresh random inputs of one program, and the sizes they bind.
struct ProgramInputs {
  SymbolValues symbols;
  std::map<std::string, Tensor> values;
};

ProgramInputs makeInputs(const BundleData &bundle, const ProgramDesc &program,
                         const KernelCheckOptions &options) {
  const int64_t maxSeq = bundle.model.maxSeq;
  bool decodes = false;
  for (const auto &[name, id] : program.inputs)
    decodes |= name == "past";
  int64_t seq = decodes ? options.decodeLen
                        : (options.seqLen ? options.seqLen
                                          : std::min<int64_t>(37, maxSeq));
  if (seq < 1 || seq > maxSeq || options.batch < 1)
    throw Error(fmt::format("kernel check of program '{}': batch {} and "
                            "sequence length {} do not fit max_seq = {}",
                            program.name, options.batch, seq, maxSeq));
  ProgramInputs in;
  // Sources differ in length from targets, so that S and T are not mixed up.
  int64_t sourceLen = std::max<int64_t>(1, std::min<int64_t>(seq + 3, maxSeq));
  if (decodes)
    sourceLen = std::min<int64_t>(13, maxSeq);
  in.symbols = {{"B", options.batch}, {"S", seq}, {"T", sourceLen}};
  const int64_t targetRange = bundle.model.objective == "classify"
                                  ? bundle.model.classes
                                  : bundle.model.vocab;
  const uint64_t stream = streamId("check/" + program.name);
  for (const auto &[name, id] : program.inputs) {
    const BufferDesc &b = program.buffers[id];
    Shape shape;
    for (const DimExpr &d : b.dims) {
      std::optional<int64_t> v = d.evaluate(in.symbols);
      if (!v)
        throw Error(fmt::format("kernel check of program '{}': input '{}' has "
                                "the size {}, which B, S and T do not give",
                                program.name, name, d.str()));
      shape.push_back(*v);
    }
    Tensor t(b.dtype, shape);
    uint64_t s = stream ^ streamId(name);
    auto uniform = [&](int64_t i) {
      return philoxUniform(options.seed, s, static_cast<uint64_t>(i));
    };
    for (int64_t i = 0; i < t.numel(); ++i) {
      double u = uniform(i);
      if (name == "tokens" || name == "source")
        t.set(i, std::floor(u * bundle.model.vocab));
      else if (name == "targets") // some targets are ignored (negative)
        t.set(i, u < 0.1 ? -1 : std::floor((u - 0.1) / 0.9 * targetRange));
      else if (name == "mask" || name == "source_mask") {
        // Each row: real tokens, then padding (at least one real token).
        int64_t width = shape.back(), row = i / width;
        double rowDraw = uniform(row * width);
        int64_t real = 1 + static_cast<int64_t>(rowDraw * width);
        t.set(i, i % width < real ? 1 : 0);
      } else if (name == "segments")
        t.set(i, std::floor(u * std::max<int64_t>(1, bundle.model.segments)));
      else if (name == "past")
        t.set(i, std::floor(u * (maxSeq - seq + 1)));
      else if (name == "step" || name.rfind("step:", 0) == 0)
        // An update counter: inside the schedule, where lr is not 0.
        t.set(i,
                   1 + std::floor(u * std::max<int64_t>(
                                          1, bundle.training.steps - 1)));
      else if (name == "rng") // the dropout stream
        t.set(i, std::floor(u * 0x1p31));
      else if (isFloat(b.dtype))
        t.set(i, philoxNormal(options.seed, s, i));
      else
        throw Error(fmt::format("the kernel check does not know what values "
                                "the integer input '{}' of program '{}' takes",
                                name, program.name));
    }
    in.values[name] = std::move(t);
  }
  return in;
}

/// A state's random value: optimizer moments are small and non-negative
/// (valid for both Adam moments), caches are normal.
Tensor stateValue(const StateDesc *state, const std::string &name,
                  DType dtype, const Shape &shape, uint64_t seed) {
  Tensor t(dtype, shape);
  uint64_t s = streamId("check-state/" + name);
  bool moment = state && !state->like.empty();
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set(i,
               moment ? 1e-3 * philoxUniform(seed, s, i)
                      : philoxNormal(seed, s, i));
  return t;
}

/// The sums a float comparison keeps until its group's floor is known.
struct FloatSums {
  int64_t n = 0;
  /// Of the squared differences, the squared expected values (or their
  /// changes, in place) and the squared expected values, over the
  /// elements both results have finite.
  double diff2 = 0, ref2 = 0, value2 = 0;

  double rmsSize() const { return n ? std::sqrt(ref2 / double(n)) : 0; }
};

/// Compares the checked device's `got` with the cpu's `expected`. For a
/// buffer updated in place, `before` is its value before the group, and
/// float errors are relative to the change, which a small update (an
/// optimizer step) would otherwise hide. Integers get their verdict here;
/// floats return their sums for judge().
std::optional<FloatSums> compare(const Tensor &got, const Tensor &expected,
                                 const Tensor *before, BufferComparison &c) {
  c.dtype = expected.dtype();
  c.shape = expected.shape();
  const int64_t n = expected.numel();
  double worst = -1;
  auto noteWorst = [&](int64_t i, double a, double b, double d) {
    if (d > worst) {
      worst = d;
      c.worstIndex = i;
      c.worstGot = a;
      c.worstExpected = b;
    }
  };
  bool allZero = true;
  if (!isFloat(c.dtype)) {
    int64_t differ = 0;
    for (int64_t i = 0; i < n; ++i) {
      double a = got.at(i), b = expected.at(i);
      allZero &= b == 0;
      if (a != b) {
        ++differ;
        noteWorst(i, a, b, std::fabs(a - b));
      }
    }
    c.error = n ? double(differ) / n : 0;
    c.trivial = allZero;
    c.passed = differ == 0;
    return std::nullopt;
  }
  FloatSums sums;
  sums.n = n;
  c.inPlace = before != nullptr;
  for (int64_t i = 0; i < n; ++i) {
    double a = got.at(i), b = expected.at(i);
    if (!std::isfinite(b)) {
      // The cpu's own non-finite values must be reproduced exactly.
      bool same = std::isnan(b) ? std::isnan(a) : a == b;
      if (!same) {
        ++c.nonFinite;
        noteWorst(i, a, b, HUGE_VAL);
      }
      continue;
    }
    if (!std::isfinite(a)) {
      ++c.nonFinite;
      noteWorst(i, a, b, HUGE_VAL);
      continue;
    }
    double d = a - b;
    double change = before ? b - before->at(i) : b;
    sums.diff2 += d * d;
    sums.ref2 += change * change;
    sums.value2 += b * b;
    allZero &= change == 0;
    noteWorst(i, a, b, std::fabs(d));
  }
  c.trivial = allZero;
  return sums;
}

/// The error and verdict of a float comparison: relative to its own
/// root-mean-square size, or to `floorRms` where that is larger.
void judge(BufferComparison &c, const FloatSums &sums, double floorRms) {
  // Values that cancel to almost nothing (the gradient of a key bias is
  // zero up to rounding) are measured against a floor, not their noise.
  double floor = floorRms * std::sqrt(double(sums.n));
  double scale = std::max(std::sqrt(sums.ref2), floor);
  c.error = scale > 0        ? std::sqrt(sums.diff2) / scale
            : sums.diff2 > 0 ? HUGE_VAL
                             : 0;
  c.floored = !c.trivial && std::sqrt(sums.ref2) < floor;
  // In place, both results are rounded to the buffer's dtype at the size
  // of the value, not of the change: allow two units in the last place.
  double rounding =
      c.inPlace ? 2 * epsilonOf(c.dtype) * std::sqrt(sums.value2) : 0;
  c.passed = c.nonFinite == 0 &&
             std::sqrt(sums.diff2) <= c.tolerance * scale + rounding;
}

double toleranceFor(DType dtype, const KernelCheckOptions &options) {
  switch (dtype) {
  case DType::F64:
    return options.f64Tolerance;
  case DType::BF16:
  case DType::F16:
    return options.bf16Tolerance;
  case DType::F32:
    return options.f32Tolerance;
  default:
    return 0;
  }
}

/// The check of one program.
class ProgramCheck {
public:
  ProgramCheck(const BundleData &bundle, const ProgramDesc &program,
               Device &reference, Device &subject,
               const KernelCheckOptions &options, KernelCheckReport &report)
      : bundle(bundle), program(program), reference(reference),
        subject(subject), options(options), report(report) {}

  void run();

private:
  void allocate(const ProgramInputs &inputs);
  void checkGroup(size_t g);
  /// Whether the value group `g` leaves in buffer `id` is read later: the
  /// first later step that touches `id` reads it, or the program returns it.
  bool readAfter(size_t g, int64_t id) const;
  void acceptNearTiedSlots(size_t firstComparison);

  const BundleData &bundle;
  const ProgramDesc &program;
  Device &reference, &subject;
  const KernelCheckOptions &options;
  KernelCheckReport &report;

  SymbolValues symbols;
  std::vector<std::unique_ptr<DeviceBuffer>> ref, sub;
  /// Buffers some plan step reads or writes (not kernel scratch).
  std::vector<bool> planned;
  std::set<int64_t> programResults;
  std::set<std::string> checkedKernels;
};

void ProgramCheck::allocate(const ProgramInputs &inputs) {
  const size_t n = program.buffers.size();
  ref.resize(n);
  sub.resize(n);
  planned.assign(n, false);
  for (size_t s = 0; s < program.steps.size(); ++s) {
    for (int64_t id : program.steps[s].in)
      if (id >= 0)
        planned[id] = true;
    for (int64_t id : program.steps[s].out)
      if (id >= 0)
        planned[id] = true;
  }
  for (const auto &[name, id] : program.outputs)
    programResults.insert(id);
  for (const auto &[name, id] : program.updates)
    programResults.insert(id);

  for (size_t id = 0; id < n; ++id) {
    const BufferDesc &b = program.buffers[id];
    Shape shape;
    for (const DimExpr &d : b.dims) {
      std::optional<int64_t> v = d.evaluate(symbols);
      if (!v)
        throw Error(fmt::format("kernel check of program '{}': buffer {} has "
                                "the size {}, which B, S and T do not give",
                                program.name, id, d.str()));
      shape.push_back(*v);
    }
    Tensor initial;
    switch (b.kind) {
    case BufferKind::Param: {
      const ParamInfo *p = bundle.findParam(b.bind);
      if (!p)
        throw Error(fmt::format("program '{}': unknown parameter '{}'",
                                program.name, b.bind));
      initial = initialValue(*p, options.seed);
      // A zero initialiser (MoA's router) would check kernels only at a
      // degenerate point: every routing choice tied, zero gradients. The
      // spread is that of the normal initialisers, so that a perturbed
      // router bias does not drown the token-dependent logits (near-ties
      // would then reorder batch-priority routing on rounding alone).
      if (p->init == "zeros") {
        uint64_t s = streamId("check-param/" + p->name);
        double spread = 0.02;
        for (int64_t i = 0; i < initial.numel(); ++i)
          initial.set(i, initial.at(i) +
                             spread * philoxNormal(options.seed, s,
                                                   static_cast<uint64_t>(i)));
      }
      break;
    }
    case BufferKind::State:
      initial = stateValue(bundle.findState(b.bind), b.bind, b.dtype, shape,
                           options.seed);
      break;
    case BufferKind::Input:
      initial = inputs.values.at(b.bind);
      break;
    case BufferKind::Const:
      initial = constantValue(b, shape, program.name);
      break;
    case BufferKind::Temp:
      break;
    case BufferKind::View:
      ref[id] = reference.alias(*ref[b.of], shape);
      sub[id] = subject.alias(*sub[b.of], shape);
      continue;
    }
    ref[id] = reference.allocate(b.dtype, shape);
    sub[id] = subject.allocate(b.dtype, shape);
    if (!initial.empty()) {
      reference.upload(*ref[id], initial);
      subject.upload(*sub[id], initial);
    }
  }
}

bool ProgramCheck::readAfter(size_t g, int64_t id) const {
  for (size_t h = g + 1; h < program.groups.size(); ++h) {
    std::vector<size_t> steps = program.groups[h].steps;
    std::sort(steps.begin(), steps.end());
    for (size_t s : steps) {
      const StepDesc &step = program.steps[s];
      if (std::count(step.in.begin(), step.in.end(), id))
        return true;
      if (std::count(step.out.begin(), step.out.end(), id))
        return false;
    }
  }
  return programResults.count(id) > 0;
}

/// Batch-priority capacity slots rank tokens by their top-1 probability, a
/// float the device computes in its own order (the router group fuses its
/// linear layer), so near-tied tokens may swap slots (RouterSlotCheck.h). A
/// router's slots that differ from the cpu's pass when its experts passed
/// and the slots come from a ranking that differs only among tokens whose
/// cpu probabilities agree within the group's tolerance.
void ProgramCheck::acceptNearTiedSlots(size_t firstComparison) {
  auto passedComparison = [&](int64_t id) {
    for (size_t i = firstComparison; i < report.comparisons.size(); ++i)
      if (report.comparisons[i].buffer == id)
        return report.comparisons[i].passed;
    return false;
  };
  for (size_t i = firstComparison; i < report.comparisons.size(); ++i) {
    BufferComparison &c = report.comparisons[i];
    if (c.passed || c.op != "moe.topk_router" || c.dtype != DType::I32)
      continue;
    auto step = std::find_if(
        program.steps.begin(), program.steps.end(), [&](const StepDesc &s) {
          return s.op == c.op && s.out.size() == 4 && s.out[3] == c.buffer;
        });
    if (step == program.steps.end() || step->in.empty() || step->in[0] < 0 ||
        step->attrs->value("priority", "") != "bpr" ||
        !passedComparison(step->out[1]))
      continue;
    // The cpu's top-1 probabilities, from its logits (a masked token's is
    // 0, as the router makes it).
    Tensor logits = reference.download(*ref[step->in[0]]);
    Tensor expert = subject.download(*sub[step->out[1]]);
    Tensor got = subject.download(*sub[c.buffer]);
    Tensor want = reference.download(*ref[c.buffer]);
    Tensor mask;
    if (step->in.size() > 1 && step->in[1] >= 0)
      mask = reference.download(*ref[step->in[1]]);
    // The shapes the ranking below assumes; anything else stays a failure.
    const int64_t numExperts =
        logits.shape().empty() ? 0 : logits.shape().back();
    const int64_t n = numExperts > 0 ? logits.numel() / numExperts : 0;
    const int64_t k = n > 0 ? expert.numel() / n : 0;
    if (k <= 0 || expert.numel() != n * k || got.numel() != n * k ||
        want.numel() != n * k || (!mask.empty() && mask.numel() != n)) {
      c.note = "the router's buffers do not have the shapes of a ranking";
      continue;
    }
    std::vector<double> key(n, 0.0);
    for (int64_t t = 0; t < n; ++t) {
      if (!mask.empty() && mask.at(t) == 0)
        continue;
      double top = -HUGE_VAL, sum = 0;
      for (int64_t e = 0; e < numExperts; ++e)
        top = std::max(top, logits.at(t * numExperts + e));
      for (int64_t e = 0; e < numExperts; ++e)
        sum += std::exp(logits.at(t * numExperts + e) - top);
      int32_t first = expert.data<int32_t>()[t * k];
      if (first >= 0 && first < numExperts) // else rejected below
        key[t] = std::exp(logits.at(t * numExperts + first) - top) / sum;
    }
    std::string why = nearTiedSlotMismatch(
        got.data<int32_t>(), want.data<int32_t>(), expert.data<int32_t>(),
        key, k, numExperts, c.tolerance);
    if (!why.empty()) {
      c.note = why;
      continue;
    }
    c.passed = true;
    c.note = "tokens whose top-1 probabilities agree within the tolerance "
             "rank the other way round, and only those";
  }
}

void ProgramCheck::run() {
  ProgramInputs inputs = makeInputs(bundle, program, options);
  symbols = inputs.symbols;
  allocate(inputs);
  std::vector<int> groupOf(program.steps.size(), -1);
  for (size_t g = 0; g < program.groups.size(); ++g)
    for (size_t s : program.groups[g].steps)
      groupOf[s] = static_cast<int>(g);
  for (size_t s = 0; s < groupOf.size(); ++s)
    if (groupOf[s] < 0)
      throw Error(fmt::format("program '{}': step {} ({}) is in no fused "
                              "group, so no kernel computes it",
                              program.name, s, program.steps[s].op));
  for (size_t g = 0; g < program.groups.size(); ++g)
    checkGroup(g);
}

void ProgramCheck::checkGroup(size_t g) {
  const GroupDesc &group = program.groups[g];
  std::set<int64_t> reads, writes, stored;
  std::set<size_t> members(group.steps.begin(), group.steps.end());
  for (size_t s : members) {
    for (int64_t id : program.steps[s].in)
      if (id >= 0)
        reads.insert(id);
    for (int64_t id : program.steps[s].out)
      if (id >= 0)
        writes.insert(id);
  }
  for (const LaunchDesc &launch : group.launches)
    for (int64_t id : launch.buffers)
      if (id >= 0)
        stored.insert(id);

  // The device under test starts from the cpu's values; what the group
  // only writes starts as poison.
  std::map<int64_t, Tensor> before;
  for (int64_t id : stored) {
    if (!planned[id])
      continue;
    if (writes.count(id) && !reads.count(id)) {
      subject.upload(*sub[id], poison(sub[id]->dtype, sub[id]->shape));
      continue;
    }
    Tensor value = reference.download(*ref[id]);
    subject.upload(*sub[id], value);
    if (writes.count(id))
      before[id] = std::move(value);
  }

  ProgramDesc cpuPart = program;
  cpuPart.groups.clear();
  cpuPart.steps.clear();
  for (size_t s : members)
    cpuPart.steps.push_back(program.steps[s]);
  ProgramDesc groupPart = program;
  groupPart.groups = {group};
  // The next group's part may take this one's address: the device must not
  // replay this group's CUDA graph for it.
  struct Forget {
    Device &device;
    const ProgramDesc &program;
    ~Forget() { device.forget(program); }
  } forget{subject, groupPart};
  std::vector<DeviceBuffer *> refs, subs;
  for (size_t i = 0; i < ref.size(); ++i) {
    refs.push_back(ref[i].get());
    subs.push_back(sub[i].get());
  }
  reference.prepare(cpuPart);
  reference.run(cpuPart, symbols, refs);
  subject.prepare(groupPart);
  auto start = std::chrono::steady_clock::now();
  subject.run(groupPart, symbols, subs);
  report.deviceSeconds += support::secondsSince(start);

  BufferComparison base;
  base.program = program.name;
  base.group = g;
  base.kind = group.kind;
  for (const LaunchDesc &launch : group.launches)
    if (std::find(base.kernels.begin(), base.kernels.end(), launch.kernel) ==
        base.kernels.end())
      base.kernels.push_back(launch.kernel);
  // A group is as precise as its least precise float operand: the f32 sum
  // of two bf16 gradients differs from the cpu's by bf16 rounding.
  double tolerance = 0;
  bool allF64 = true;
  for (int64_t id : stored)
    if (planned[id] && isFloat(sub[id]->dtype)) {
      tolerance = std::max(tolerance, toleranceFor(sub[id]->dtype, options));
      allF64 &= sub[id]->dtype == DType::F64;
    }
  // A kernel that multiplies on tf32 tensor cores (the compiler's choice
  // under f32_matmul = tf32; 3xTF32 is as precise as fp32).
  if (bundle.groupCalls(group, {"moec::gemmTileTf32<"}))
    tolerance = std::max(tolerance, group.kind == "experts_grad"
                                        ? options.tf32RecomputeTolerance
                                        : options.tf32Tolerance);
  // Kernels compute in fp32 (f64 models in f64), whatever they store.
  double roundoff = epsilonOf(allF64 ? DType::F64 : DType::F32);
  double floorFraction =
      tolerance > 0 ? std::min(1.0, kNoiseRoundings * roundoff / tolerance)
                    : 1.0;
  bool exercised = false;
  const size_t firstComparison = report.comparisons.size();
  // The float comparisons (their index in the report), judged once the
  // group's largest result is known.
  std::vector<std::pair<size_t, FloatSums>> floats;
  double groupSize = 0;
  for (int64_t id : writes) {
    bool escapes = readAfter(g, id);
    size_t writer = 0;
    for (size_t s : members)
      for (int64_t out : program.steps[s].out)
        if (out == id)
          writer = s;
    BufferComparison c = base;
    c.buffer = id;
    c.op = program.steps[writer].op;
    c.location = program.steps[writer].loc;
    c.tolerance = tolerance;
    if (!stored.count(id)) {
      if (!escapes)
        continue; // internal to the fused kernel
      c.dtype = sub[id]->dtype;
      c.shape = sub[id]->shape;
      c.error = HUGE_VAL;
      c.passed = false;
      report.comparisons.push_back(c);
      continue;
    }
    auto old = before.find(id);
    std::optional<FloatSums> sums =
        compare(subject.download(*sub[id]), reference.download(*ref[id]),
                old == before.end() ? nullptr : &old->second, c);
    exercised |= !c.trivial;
    if (sums) {
      groupSize = std::max(groupSize, sums->rmsSize());
      floats.emplace_back(report.comparisons.size(), *sums);
    }
    report.comparisons.push_back(c);
  }
  // The floor is relative to the largest size among the group's results.
  for (const auto &[index, sums] : floats)
    judge(report.comparisons[index], sums, floorFraction * groupSize);
  acceptNearTiedSlots(firstComparison);
  if (exercised)
    for (const LaunchDesc &launch : group.launches)
      report.covered.push_back(launch.kernel);
}

std::string describe(const BufferComparison &c) {
  std::string what =
      isFloat(c.dtype)
          ? fmt::format("rel. error {:.3g} (tolerance {:.1g})", c.error,
                        c.tolerance)
          : fmt::format("{:.3g}% of elements differ", 100 * c.error);
  if (c.error == HUGE_VAL && c.worstIndex < 0)
    what = "written by the group's steps and read after it, but no kernel "
           "of the group stores it";
  if (c.nonFinite)
    what += fmt::format(", {} non-finite", c.nonFinite);
  if (c.worstIndex >= 0)
    what += fmt::format("; worst at element {}: got {:.9g}, expected {:.9g}",
                        c.worstIndex, c.worstGot, c.worstExpected);
  if (c.trivial)
    what += "; the expected value is all zeros";
  else if (c.floored)
    what += "; below the noise floor of the group's largest result: "
            "measured against the floor";
  if (c.inPlace)
    what += " (relative to the change in place)";
  if (!c.note.empty())
    what += "; " + c.note;
  return fmt::format("{} {} group {} ({}) [{}] buffer {} {} {} of {}{}: {}",
                     c.passed ? "ok  " : "FAIL", c.program, c.group, c.kind,
                     fmt::join(c.kernels, ", "), c.buffer, dtypeName(c.dtype),
                     shapeString(c.shape), c.op,
                     c.location.empty() ? "" : " at " + c.location, what);
}

} // namespace

KernelCheckReport checkKernels(const BundleData &bundle, Device &reference,
                               Device &subject,
                               const KernelCheckOptions &options) {
  KernelCheckReport report;
  report.device = subject.name();
  if (bundle.kernels.empty())
    throw Error(fmt::format("{}: the bundle has no generated kernels to "
                            "check",
                            bundle.origin));
  std::set<std::string> universe;
  for (const auto &[name, program] : bundle.programs) {
    if (!options.programs.empty() &&
        std::find(options.programs.begin(), options.programs.end(), name) ==
            options.programs.end())
      continue;
    for (const GroupDesc &group : program.groups)
      for (const LaunchDesc &launch : group.launches)
        universe.insert(launch.kernel);
    ProgramCheck(bundle, program, reference, subject, options, report).run();
  }
  if (options.programs.empty())
    for (const auto &[name, kernel] : bundle.kernels)
      universe.insert(name);
  std::set<std::string> covered(report.covered.begin(), report.covered.end());
  report.covered.assign(covered.begin(), covered.end());
  for (const std::string &k : universe)
    if (!covered.count(k))
      report.uncovered.push_back(k);
  return report;
}

} // namespace moec::detail

namespace moec {

bool KernelCheckReport::passed() const {
  return uncovered.empty() &&
         std::all_of(comparisons.begin(), comparisons.end(),
                     [](const BufferComparison &c) { return c.passed; });
}

std::string KernelCheckReport::format(bool verbose) const {
  std::string text;
  size_t failed = 0;
  double worst = 0;
  for (const BufferComparison &c : comparisons) {
    failed += !c.passed;
    if (c.passed && !c.inPlace && detail::isFloat(c.dtype))
      worst = std::max(worst, c.error);
    if (verbose || !c.passed)
      text += detail::describe(c) + "\n";
  }
  for (const std::string &k : uncovered)
    text += fmt::format("UNCOVERED kernel {}: no group that launches it "
                        "wrote a non-zero value that was compared\n",
                        k);
  text += fmt::format("{}: {} buffers compared, {} failed, largest passing "
                      "float error {:.2g}; {} kernels covered, {} uncovered; "
                      "{:.1f} s on the device\n",
                      device, comparisons.size(), failed, worst,
                      covered.size(), uncovered.size(), deviceSeconds);
  return text;
}

KernelCheckReport checkKernels(const Bundle &bundle,
                               const KernelCheckOptions &options) {
  std::unique_ptr<detail::Device> reference = detail::createDevice("cpu");
  std::unique_ptr<detail::Device> subject =
      detail::createDevice(options.device);
  if (!subject->runsGroups())
    throw Error(fmt::format("the {} device runs no generated kernels; check "
                            "the emu or cuda device",
                            options.device));
  subject->setBundle(bundle.internals());
  return detail::checkKernels(bundle.internals(), *reference, *subject,
                              options);
}

} // namespace moec
