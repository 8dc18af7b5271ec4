//===- Bundle.cpp - loading and validating bundles ------------------------===//

#include "BundleData.h"
#include "JsonParse.h"
#include "JsonReader.h"
#include "cpu/Kernel.h"
#include "moec/Bundle.h"
#include "moec/Error.h"
#include "moec/Files.h"
#include "moec/support/MoeDefs.h"
#include "moec/support/PhaseSchedule.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <set>

namespace moec {
namespace detail {

namespace {

constexpr size_t kMaxBundleBytes = size_t(1) << 30;
/// moec writes bundles nine levels deep; the rest is room for op attributes.
constexpr int kMaxJsonDepth = 64;
/// No buffer in a bundle may hold more elements than this.
constexpr int64_t kMaxElements = int64_t(1) << 40;

bool isFloat(DType d) {
  return d == DType::F32 || d == DType::F64 || d == DType::BF16 ||
         d == DType::F16;
}

DType readDType(const JsonReader &r) {
  std::string name = r.string();
  for (DType d : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::I32,
                  DType::I64})
    if (name == dtypeName(d))
      return d;
  r.fail(fmt::format("unknown dtype \"{}\" (f32, f64, bf16, f16, i32, i64)",
                     name));
}

std::vector<DimExpr> readDims(const JsonReader &r) {
  std::vector<DimExpr> dims;
  r.array();
  for (size_t i = 0; i < r.size(); ++i) {
    JsonReader d = r.at(i);
    if (d.json().is_number_integer()) {
      dims.emplace_back(d.integer(0, kMaxElements));
      continue;
    }
    std::optional<DimExpr> e = parseDimExpr(d.string());
    if (!e)
      d.fail(fmt::format("\"{}\" is not a dimension (an integer or a "
                         "product of symbols such as \"2*B*S\")",
                         d.string()));
    // A size written as a string has the same bound as one written as a
    // number.
    if (e->isStatic() && e->getStatic() > kMaxElements)
      d.fail(fmt::format("{} is outside [0, {}]", e->getStatic(),
                         kMaxElements));
    dims.push_back(*e);
  }
  if (dims.size() > 8)
    r.fail(fmt::format("{} dimensions; at most 8 are supported", dims.size()));
  return dims;
}

Shape readShape(const JsonReader &r) {
  Shape shape;
  r.array();
  int64_t total = 1;
  for (size_t i = 0; i < r.size(); ++i) {
    shape.push_back(r.at(i).integer(0, kMaxElements));
    if (__builtin_mul_overflow(total, shape.back(), &total) ||
        total > kMaxElements)
      r.fail("the shape holds more than 2^40 elements");
  }
  return shape;
}

ParamInfo readParam(const JsonReader &r) {
  ParamInfo p;
  p.name = r.stringField("name");
  if (p.name.empty())
    r.fail("a parameter has an empty name");
  p.dtype = readDType(r.field("dtype"));
  if (!isFloat(p.dtype))
    r.field("dtype").fail("a parameter must have a float dtype");
  p.shape = readShape(r.field("shape"));
  p.init = r.stringField("init");
  std::optional<defs::Init> init = defs::parseInit(p.init);
  if (!init)
    r.field("init").fail(fmt::format("unknown initialiser \"{}\" ({})",
                                     p.init, defs::kInitSpellings));
  if (init == defs::Init::XavierUniform && p.shape.size() < 2)
    r.field("init").fail("xavier_uniform needs a parameter of rank >= 2");
  if (init == defs::Init::Sinusoidal && p.shape.size() != 2)
    r.field("init").fail("sinusoidal needs a [positions, width] parameter");
  if (init == defs::Init::Orthogonal && p.shape.size() < 2)
    r.field("init").fail("orthogonal needs a parameter of rank >= 2");
  p.scale = r.field("scale").number();
  if (!(p.scale >= 0))
    r.field("scale").fail("the init scale must be >= 0");
  p.frozen = r.field("frozen").boolean();
  if (r.has("row_norm")) {
    p.rowNorm = r.field("row_norm").number();
    if (!(p.rowNorm > 0) || !std::isfinite(p.rowNorm))
      r.field("row_norm").fail("row_norm must be a finite number > 0");
    if (p.shape.size() != 2 || p.frozen)
      r.field("row_norm")
          .fail("row_norm needs a trainable [rows, width] parameter");
  }
  if (r.has("group")) {
    p.group = r.stringField("group");
    if (p.frozen)
      r.field("group").fail("a frozen parameter is trained by no group");
  }
  return p;
}

StateDesc readState(const JsonReader &r) {
  StateDesc s;
  s.name = r.stringField("name");
  s.dtype = readDType(r.field("dtype"));
  s.dims = readDims(r.field("dims"));
  if (r.has("like"))
    s.like = r.stringField("like");
  return s;
}

BufferKind readKind(const JsonReader &r) {
  std::string k = r.string();
  if (k == "param")
    return BufferKind::Param;
  if (k == "state")
    return BufferKind::State;
  if (k == "input")
    return BufferKind::Input;
  if (k == "const")
    return BufferKind::Const;
  if (k == "temp")
    return BufferKind::Temp;
  if (k == "view")
    return BufferKind::View;
  r.fail(fmt::format("unknown buffer kind \"{}\" (param, state, input, "
                     "const, temp, view)",
                     k));
}

bool sameDims(const std::vector<DimExpr> &a, const std::vector<DimExpr> &b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].str() != b[i].str())
      return false;
  return true;
}

std::string dimsString(const std::vector<DimExpr> &dims) {
  std::vector<std::string> parts;
  for (const DimExpr &d : dims)
    parts.push_back(d.str());
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

BufferDesc readBuffer(const JsonReader &r, size_t index,
                      const BundleData &bundle,
                      const std::vector<BufferDesc> &earlier) {
  if (r.field("id").integer() != static_cast<int64_t>(index))
    r.field("id").fail(fmt::format("buffer ids must be 0, 1, 2, ... in order; "
                                   "expected {}",
                                   index));
  BufferDesc b;
  b.kind = readKind(r.field("kind"));
  b.dtype = readDType(r.field("dtype"));
  b.dims = readDims(r.field("dims"));
  switch (b.kind) {
  case BufferKind::Param: {
    b.bind = r.stringField("bind");
    const ParamInfo *p = bundle.findParam(b.bind);
    if (!p)
      r.field("bind").fail(fmt::format("no parameter named '{}'", b.bind));
    std::vector<DimExpr> expected(p->shape.begin(), p->shape.end());
    if (b.dtype != p->dtype || !sameDims(b.dims, expected))
      r.fail(fmt::format("buffer {} {} does not match parameter '{}' ({} {})",
                         dtypeName(b.dtype), dimsString(b.dims), b.bind,
                         dtypeName(p->dtype), dimsString(expected)));
    break;
  }
  case BufferKind::State: {
    b.bind = r.stringField("bind");
    const StateDesc *s = bundle.findState(b.bind);
    if (!s)
      r.field("bind").fail(fmt::format("no state named '{}'", b.bind));
    if (b.dtype != s->dtype || !sameDims(b.dims, s->dims))
      r.fail(fmt::format("buffer {} {} does not match state '{}' ({} {})",
                         dtypeName(b.dtype), dimsString(b.dims), b.bind,
                         dtypeName(s->dtype), dimsString(s->dims)));
    break;
  }
  case BufferKind::Input:
    b.bind = r.stringField("bind");
    break;
  case BufferKind::Const: {
    JsonReader values = r.field("value").array();
    int64_t count = 1;
    for (const DimExpr &d : b.dims) {
      if (!d.isStatic())
        r.field("dims").fail("a constant must have static dimensions");
      if (__builtin_mul_overflow(count, d.getStatic(), &count) ||
          count > kMaxElements)
        r.field("dims").fail("the constant holds more than 2^40 elements");
    }
    if (static_cast<int64_t>(values.size()) != count)
      values.fail(fmt::format("{} values for a constant of {} elements",
                              values.size(), count));
    for (size_t i = 0; i < values.size(); ++i)
      b.value.push_back(values.at(i).number());
    break;
  }
  case BufferKind::Temp:
    break;
  case BufferKind::View: {
    if (index == 0)
      r.fail("the first buffer cannot be a view");
    b.of = r.field("of").integer(0, static_cast<int64_t>(index) - 1);
    const BufferDesc &viewed = earlier[b.of];
    if (viewed.kind != BufferKind::Temp || viewed.dtype != b.dtype)
      r.field("of").fail(fmt::format(
          "a view must share the storage of a temp buffer of its dtype ({}); "
          "buffer {} is not one",
          dtypeName(b.dtype), b.of));
    break;
  }
  }
  return b;
}

GridDimDesc readGridDim(const JsonReader &r) {
  GridDimDesc d;
  if (r.json().is_number_integer()) {
    d.extent = DimExpr(r.integer(1, int64_t(1) << 31));
    return d;
  }
  std::optional<DimExpr> extent = parseDimExpr(r.stringField("extent"));
  if (!extent)
    r.field("extent").fail(fmt::format("\"{}\" is not a dimension",
                                       r.stringField("extent")));
  d.extent = *extent;
  d.perBlock = r.field("per_block").integer(1, int64_t(1) << 31);
  if (r.has("extra"))
    d.extra = r.field("extra").integer(0, int64_t(1) << 31);
  return d;
}

DimExpr readDim(const JsonReader &r) {
  if (r.json().is_number_integer())
    return DimExpr(r.integer(0, int64_t(1) << 40));
  std::optional<DimExpr> e = parseDimExpr(r.string());
  if (!e)
    r.fail(fmt::format("\"{}\" is not a size expression", r.string()));
  return *e;
}

/// A launch's "gemm" record. A library GEMM's operands must be arguments
/// the launch passes, with types cuBLASLt pairs under its compute type.
GemmDesc readGemm(const JsonReader &r, const LaunchDesc &launch,
                  const ProgramDesc &program) {
  GemmDesc g;
  std::string path = r.stringField("path");
  if (path != "cublaslt" && path != "generated")
    r.field("path").fail(fmt::format("unknown GEMM path \"{}\" (one of "
                                     "cublaslt, generated)",
                                     path));
  g.why = r.stringField("why");
  g.library = path == "cublaslt";
  if (!g.library)
    return g;
  g.m = readDim(r.field("m"));
  g.n = readDim(r.field("n"));
  g.k = readDim(r.field("k"));
  const int args = static_cast<int>(launch.buffers.size());
  // The dtype of the program buffer behind kernel argument `arg`.
  auto argument = [&](const JsonReader &f, bool optional) -> int {
    int arg = static_cast<int>(f.integer(optional ? -1 : 0, args - 1));
    if (arg >= 0 && launch.buffers[arg] < 0)
      f.fail(fmt::format("kernel argument {} passes no buffer", arg));
    return arg;
  };
  auto dtypeOf = [&](int arg) {
    return program.buffers[launch.buffers[arg]].dtype;
  };
  auto operand = [&](const char *name) {
    JsonReader o = r.field(name);
    GemmOperandDesc d;
    d.arg = argument(o.field("arg"), false);
    std::string order = o.stringField("order");
    if (order != "row" && order != "col")
      o.field("order").fail(fmt::format("unknown storage order \"{}\" (one "
                                        "of row, col)",
                                        order));
    d.colMajor = order == "col";
    d.ld = o.field("ld").integer(1, int64_t(1) << 40);
    return d;
  };
  g.a = operand("a");
  g.b = operand("b");
  g.d = argument(r.field("d"), false);
  g.bias = argument(r.field("bias"), true);
  g.compute = r.stringField("compute");
  DType in = dtypeOf(g.a.arg), out = dtypeOf(g.d);
  bool paired =
      dtypeOf(g.b.arg) == in &&
      (out == in || (in == DType::BF16 && out == DType::F32)) &&
      (g.bias < 0 || dtypeOf(g.bias) == out) &&
      (g.compute == "f64" ? in == DType::F64
                          : g.compute == "tf32" ? in == DType::F32
                                                : g.compute == "f32" &&
                                                      (in == DType::F32 ||
                                                       in == DType::BF16));
  if (!paired)
    r.fail(fmt::format("a library GEMM of {} x {} operands into {}{} with {} "
                       "accumulation, which cuBLASLt does not compute",
                       dtypeName(in), dtypeName(dtypeOf(g.b.arg)),
                       dtypeName(out),
                       g.bias < 0 ? ""
                                  : fmt::format(" (bias {})",
                                                dtypeName(dtypeOf(g.bias))),
                       g.compute));
  return g;
}

LaunchDesc readLaunch(const JsonReader &r, const ProgramDesc &program,
                      const BundleData &bundle) {
  LaunchDesc l;
  l.kernel = r.stringField("kernel");
  if (!bundle.kernels.count(l.kernel))
    r.field("kernel").fail(fmt::format("no kernel named '{}' in the bundle's "
                                       "cuda section",
                                       l.kernel));
  JsonReader grid = r.field("grid").array();
  JsonReader block = r.field("block").array();
  if (grid.size() != 3 || block.size() != 3)
    r.fail("grid and block must have three dimensions");
  int64_t threads = 1;
  for (size_t i = 0; i < 3; ++i) {
    l.grid[i] = readGridDim(grid.at(i));
    l.block[i] = block.at(i).integer(1, 1024);
    threads *= l.block[i];
  }
  if (threads > 1024)
    r.field("block").fail(fmt::format("{} threads per block; at most 1024",
                                      threads));
  l.sharedBytes = r.field("shared_bytes").integer(0, 232448);
  const int64_t count = static_cast<int64_t>(program.buffers.size());
  JsonReader buffers = r.field("buffers").array();
  if (buffers.size() > size_t(defs::kMaxKernelBuffers))
    buffers.fail(fmt::format("more than {} kernel buffers",
                             defs::kMaxKernelBuffers));
  for (size_t i = 0; i < buffers.size(); ++i)
    l.buffers.push_back(buffers.at(i).integer(-1, count - 1));
  JsonReader scalars = r.field("scalars").array();
  if (scalars.size() > size_t(defs::kMaxKernelScalars))
    scalars.fail(fmt::format("more than {} kernel scalars",
                             defs::kMaxKernelScalars));
  for (size_t i = 0; i < scalars.size(); ++i) {
    JsonReader v = scalars.at(i);
    if (v.json().is_number_integer()) {
      l.scalars.emplace_back(v.integer());
      continue;
    }
    std::optional<DimExpr> e = parseDimExpr(v.string());
    if (!e)
      v.fail(fmt::format("\"{}\" is not a size expression", v.string()));
    l.scalars.push_back(*e);
  }
  if (r.has("gemm"))
    l.gemm = readGemm(r.field("gemm").object(), l, program);
  return l;
}

GroupDesc readGroup(const JsonReader &r, const ProgramDesc &program,
                    const BundleData &bundle) {
  GroupDesc g;
  if (r.has("kind")) {
    g.kind = r.stringField("kind");
    if (!defs::parseKernelKind(g.kind))
      r.field("kind").fail(fmt::format("unknown kernel kind \"{}\" (one of "
                                       "{})",
                                       g.kind, defs::kKernelKindSpellings));
  }
  JsonReader steps = r.field("steps").array();
  for (size_t i = 0; i < steps.size(); ++i)
    g.steps.push_back(static_cast<size_t>(steps.at(i).integer(
        0, static_cast<int64_t>(program.steps.size()) - 1)));
  JsonReader launches = r.field("launches").array();
  for (size_t i = 0; i < launches.size(); ++i)
    g.launches.push_back(readLaunch(launches.at(i), program, bundle));
  return g;
}

void readKernels(const JsonReader &r, BundleData &bundle) {
  bundle.deviceLibraryHash = r.stringField("device_library");
  JsonReader kernels = r.field("kernels").array();
  for (size_t i = 0; i < kernels.size(); ++i) {
    KernelDesc k;
    k.name = kernels.at(i).stringField("name");
    k.source = kernels.at(i).stringField("source");
    if (!bundle.kernels.emplace(k.name, k).second)
      kernels.at(i).fail(fmt::format("kernel '{}' is defined twice", k.name));
  }
}

ProgramDesc readProgram(const std::string &name, const JsonReader &r,
                        const BundleData &bundle) {
  ProgramDesc program;
  program.name = name;
  JsonReader buffers = r.field("buffers").array();
  for (size_t i = 0; i < buffers.size(); ++i)
    program.buffers.push_back(
        readBuffer(buffers.at(i), i, bundle, program.buffers));
  const int64_t count = static_cast<int64_t>(program.buffers.size());
  std::set<std::string> inputNames;
  for (size_t i = 0; i < program.buffers.size(); ++i)
    if (program.buffers[i].kind == BufferKind::Input) {
      if (!inputNames.insert(program.buffers[i].bind).second)
        buffers.at(i).fail(fmt::format("input '{}' is bound twice",
                                       program.buffers[i].bind));
      program.inputs.push_back({program.buffers[i].bind, i});
    }

  JsonReader steps = r.field("steps").array();
  for (size_t i = 0; i < steps.size(); ++i) {
    JsonReader s = steps.at(i);
    StepDesc step;
    step.op = s.stringField("op");
    if (!cpu::lookupKernel(step.op))
      s.field("op").fail(fmt::format(
          "op '{}' is not implemented by this runtime (moec {}); was the "
          "bundle made by a newer compiler?",
          step.op, bundle.moecVersion));
    for (auto [key, list] : {std::make_pair("in", &step.in),
                             std::make_pair("out", &step.out)}) {
      JsonReader ids = s.field(key).array();
      for (size_t j = 0; j < ids.size(); ++j) {
        int64_t id = ids.at(j).integer(-1, count - 1);
        if (key == std::string("out") && id >= 0) {
          BufferKind k = program.buffers[id].kind;
          if (k == BufferKind::Input || k == BufferKind::Const)
            ids.at(j).fail(fmt::format("step writes buffer {}, which is an "
                                       "input or a constant",
                                       id));
        }
        list->push_back(id);
      }
    }
    step.attrs = &s.field("attrs").object().json();
    if (s.has("loc"))
      step.loc = s.stringField("loc");
    program.steps.push_back(std::move(step));
  }

  if (r.has("groups")) {
    JsonReader groups = r.field("groups").array();
    for (size_t i = 0; i < groups.size(); ++i)
      program.groups.push_back(readGroup(groups.at(i), program, bundle));
  }

  JsonReader outputs = r.field("outputs").array();
  for (size_t i = 0; i < outputs.size(); ++i) {
    JsonReader o = outputs.at(i);
    program.outputs.push_back(
        {o.stringField("name"), o.field("buffer").integer(0, count - 1)});
  }
  JsonReader updates = r.field("updates").array();
  std::set<std::string> updated;
  for (size_t i = 0; i < updates.size(); ++i) {
    JsonReader u = updates.at(i);
    std::string target = u.stringField("target");
    int64_t buffer = u.field("buffer").integer(0, count - 1);
    const BufferDesc &written = program.buffers[buffer];
    DType dtype;
    std::vector<DimExpr> dims;
    if (const ParamInfo *p = bundle.findParam(target)) {
      dtype = p->dtype;
      dims.assign(p->shape.begin(), p->shape.end());
    } else if (const StateDesc *s = bundle.findState(target)) {
      dtype = s->dtype;
      dims = s->dims;
    } else {
      u.field("target").fail(fmt::format("no parameter or state named '{}'",
                                         target));
    }
    if (!updated.insert(target).second)
      u.field("target").fail(fmt::format(
          "'{}' is updated twice by this program; each target takes one "
          "update",
          target));
    if (written.dtype != dtype)
      u.fail(fmt::format("buffer {} is {} but '{}' is {}", buffer,
                         dtypeName(written.dtype), target, dtypeName(dtype)));
    // The runner copies the buffer over the target's storage, so their
    // shapes must agree (a state only written here takes the written size,
    // but still has the dims it declares).
    if (!sameDims(written.dims, dims))
      u.field("buffer").fail(fmt::format(
          "buffer {} has shape {} but '{}' has shape {}", buffer,
          dimsString(written.dims), target, dimsString(dims)));
    program.updates.push_back({target, buffer});
  }
  return program;
}

/// One of `choices`, or a located error listing them.
std::string readChoice(const JsonReader &r, const std::string &key,
                       std::initializer_list<const char *> choices) {
  std::string value = r.stringField(key);
  for (const char *c : choices)
    if (value == c)
      return value;
  r.field(key).fail(fmt::format("unknown {} \"{}\" (one of {})", key, value,
                                fmt::join(choices, ", ")));
}

/// Parameter paths and file names become strings of a list.
std::vector<std::string> readStrings(const JsonReader &r) {
  std::vector<std::string> values;
  JsonReader list = r.array();
  for (size_t i = 0; i < list.size(); ++i)
    values.push_back(list.at(i).string());
  return values;
}

TokenizerInfo readTokenizer(const JsonReader &r) {
  TokenizerInfo t;
  t.kind = readChoice(r, "kind", {"bytes", "sentencepiece"});
  t.path = r.stringField("path");
  if (t.kind == "sentencepiece") {
    t.sha256 = r.stringField("sha256");
    if (t.sha256.size() != 64)
      r.field("sha256").fail("expected the 64 hex digits of a SHA-256");
  }
  return t;
}

ModelInfo readModel(const JsonReader &r) {
  ModelInfo m;
  m.name = r.stringField("name");
  m.kind = readChoice(r, "kind", {"decoder", "encoder", "encoder_decoder"});
  m.objective =
      readChoice(r, "objective", {"lm", "mlm", "classify", "translate"});
  m.vocab = r.field("vocab").integer(1, int64_t(1) << 31);
  m.dModel = r.field("d_model").integer(1, int64_t(1) << 31);
  m.maxSeq = r.field("max_seq").integer(1, int64_t(1) << 31);
  m.dtype = r.stringField("dtype");
  if (r.has("f32_matmul")) {
    m.f32Matmul = readChoice(r, "f32_matmul", {"fp32", "tf32", "tf32x3"});
    if (m.f32Matmul != "fp32" && m.dtype != "f32")
      r.field("f32_matmul").fail("applies to f32 models only");
  }
  m.segments = r.field("segments").integer(0, int64_t(1) << 16);
  if (m.objective == "classify")
    m.classes = r.field("classes").integer(2, int64_t(1) << 31);
  if (m.objective == "mlm") {
    JsonReader mlm = r.field("mlm").object();
    m.mlm.rate = mlm.field("rate").number();
    m.mlm.mask = mlm.field("mask").number();
    m.mlm.random = mlm.field("random").number();
    m.mlm.maxPredictions =
        mlm.field("max_predictions").integer(1, int64_t(1) << 24);
    if (!(m.mlm.rate > 0 && m.mlm.rate <= 1))
      mlm.field("rate").fail("the prediction rate must be in (0, 1]");
    if (!(m.mlm.mask >= 0 && m.mlm.random >= 0 &&
          m.mlm.mask + m.mlm.random <= 1))
      mlm.fail("the mask and random shares must be >= 0 and sum to <= 1");
  }
  m.tokenizer = readTokenizer(r.field("tokenizer").object());
  m.moeLayers = readStrings(r.field("moe_layers"));
  return m;
}

GenerateConfig readGenerate(const JsonReader &r) {
  GenerateConfig g;
  g.beam = r.field("beam").integer(1, 1024);
  g.lengthPenalty = r.field("length_penalty").number();
  g.maxLenA = r.field("max_len_a").number();
  g.maxLenB = r.field("max_len_b").integer(0, int64_t(1) << 24);
  if (!(g.maxLenA >= 0))
    r.field("max_len_a").fail("must be >= 0");
  return g;
}

/// The names of moe.training's parameter groups: distinct, non-empty.
std::vector<std::string> readGroups(const JsonReader &r) {
  std::vector<std::string> names;
  r.array();
  for (size_t i = 0; i < r.size(); ++i) {
    JsonReader group = r.at(i).object();
    std::string name = group.stringField("name");
    if (name.empty() || std::count(names.begin(), names.end(), name))
      group.field("name").fail(
          fmt::format("the group name \"{}\" is empty or repeated", name));
    names.push_back(name);
  }
  return names;
}

PhaseConfig readPhases(const JsonReader &r,
                       const std::vector<std::string> &groups) {
  r.object();
  if (r.stringField("kind") != "coordinate_descent")
    r.field("kind").fail("the only phase schedule is \"coordinate_descent\"");
  PhaseConfig p;
  p.group = r.stringField("group");
  if (!std::count(groups.begin(), groups.end(), p.group))
    r.field("group").fail(
        fmt::format("no parameter group is named \"{}\"", p.group));
  constexpr int64_t kMaxSteps = int64_t(1) << 40;
  p.gSteps = readChoice(r, "g_steps", {"every", "first"});
  if (p.gSteps == "every") {
    p.period = r.field("period").integer(1, kMaxSteps);
    p.length = r.field("length").integer(1, p.period);
    p.offset = r.field("offset").integer(0, p.period - 1);
  } else {
    p.first = r.field("first").integer(1, kMaxSteps);
  }
  p.thenF = r.has("then_f") && r.field("then_f").boolean();
  return p;
}

TrainingConfig readTraining(const JsonReader &r) {
  TrainingConfig t;
  if (r.has("groups"))
    t.groups = readGroups(r.field("groups"));
  if (r.has("phases"))
    t.phases = readPhases(r.field("phases"), t.groups);
  t.optimizer = r.stringField("optimizer");
  t.schedule = r.stringField("schedule");
  t.lr = r.field("lr").number();
  t.batch = r.field("batch").integer(1, int64_t(1) << 24);
  t.seqLen = r.field("seq_len").integer(1, int64_t(1) << 24);
  t.steps = r.field("steps").integer(0, int64_t(1) << 40);
  t.seed = static_cast<uint64_t>(r.field("seed").integer(0, INT64_MAX));
  t.logEvery = r.field("log_every").integer(1, INT64_MAX);
  return t;
}

DataSpec readData(const JsonReader &r) {
  DataSpec d;
  d.kind = readChoice(r, "kind",
                      {"synthetic", "text", "lines", "labelled", "parallel"});
  d.task = r.stringField("task");
  d.paths = readStrings(r.field("paths"));
  d.labels = readStrings(r.field("labels"));
  d.taskSeed = r.field("task_seed").integer(0, INT64_MAX);
  d.branching = r.field("branching").integer(1, int64_t(1) << 31);
  d.validFraction = r.field("valid_fraction").number();
  return d;
}

} // namespace

const nlohmann::json &noAttrs() {
  static const nlohmann::json empty = nlohmann::json::object();
  return empty;
}

const ParamInfo *BundleData::findParam(const std::string &name) const {
  for (const ParamInfo &p : params)
    if (p.name == name)
      return &p;
  return nullptr;
}

const StateDesc *BundleData::findState(const std::string &name) const {
  for (const StateDesc &s : states)
    if (s.name == name)
      return &s;
  return nullptr;
}

const ProgramDesc &BundleData::program(const std::string &name) const {
  auto it = programs.find(name);
  if (it == programs.end()) {
    std::vector<std::string> names;
    for (const auto &[n, p] : programs)
      names.push_back(n);
    throw Error(fmt::format("{}: the bundle has no program '{}' (it has: {})",
                            origin, name, fmt::join(names, ", ")));
  }
  return it->second;
}

bool BundleData::groupCalls(const GroupDesc &group,
                            std::initializer_list<const char *> calls) const {
  for (const LaunchDesc &launch : group.launches) {
    auto kernel = kernels.find(launch.kernel);
    if (kernel == kernels.end())
      continue;
    for (const char *call : calls)
      if (kernel->second.source.find(call) != std::string::npos)
        return true;
  }
  return false;
}

std::shared_ptr<BundleData> readBundle(nlohmann::json document,
                                       const std::string &origin) {
  auto bundle = std::make_shared<BundleData>();
  bundle->origin = origin;
  bundle->document = std::move(document);
  JsonReader root(bundle->document, origin);
  root.object();
  if (!root.has("format") || !root.field("format").json().is_string() ||
      root.stringField("format") != "moec-bundle")
    root.fail("not a moec bundle (its \"format\" field is not "
              "\"moec-bundle\")");
  int64_t version = root.field("version").integer();
  if (version != kBundleFormatVersion)
    root.field("version").fail(fmt::format(
        "bundle format version {} is not supported; this runtime reads "
        "version {} (recompile the model with this moec)",
        version, kBundleFormatVersion));
  bundle->moecVersion = root.stringField("moec_version");
  bundle->model = readModel(root.field("model"));
  bundle->training = readTraining(root.field("training"));
  bundle->data = readData(root.field("data"));
  if (root.has("generate"))
    bundle->generate = readGenerate(root.field("generate").object());

  JsonReader params = root.field("params").array();
  std::set<std::string> names;
  const std::vector<std::string> &groups = bundle->training.groups;
  for (size_t i = 0; i < params.size(); ++i) {
    bundle->params.push_back(readParam(params.at(i)));
    const ParamInfo &p = bundle->params.back();
    if (!names.insert(p.name).second)
      params.at(i).fail(
          fmt::format("parameter '{}' is declared twice", p.name));
    if (!p.group.empty() &&
        std::find(groups.begin(), groups.end(), p.group) == groups.end())
      params.at(i).field("group").fail(
          fmt::format("no parameter group is named \"{}\"", p.group));
  }
  JsonReader states = root.field("states").array();
  for (size_t i = 0; i < states.size(); ++i) {
    bundle->states.push_back(readState(states.at(i)));
    const StateDesc &s = bundle->states.back();
    if (!names.insert(s.name).second)
      states.at(i).fail(fmt::format("'{}' is declared twice", s.name));
    if (!s.like.empty() && !bundle->findParam(s.like))
      states.at(i).field("like").fail(
          fmt::format("no parameter named '{}'", s.like));
  }
  if (root.has("cuda"))
    readKernels(root.field("cuda").object(), *bundle);
  JsonReader programs = root.field("programs").object();
  for (auto it = programs.json().begin(); it != programs.json().end(); ++it)
    bundle->programs[it.key()] =
        readProgram(it.key(), programs.field(it.key()), *bundle);
  return bundle;
}

} // namespace detail

namespace {
support::PhaseSchedule scheduleOf(const PhaseConfig &p) {
  support::PhaseSchedule s;
  s.kind = p.gSteps == "first" ? support::PhaseSchedule::Kind::First
                               : support::PhaseSchedule::Kind::Every;
  s.period = p.period;
  s.length = p.length;
  s.offset = p.offset;
  s.first = p.first;
  s.thenF = p.thenF;
  return s;
}
} // namespace

bool PhaseConfig::isGStep(int64_t index) const {
  return scheduleOf(*this).isGStep(index);
}

int64_t PhaseConfig::gStepsIn(int64_t steps) const {
  return scheduleOf(*this).gStepsIn(steps);
}

int64_t PhaseConfig::fStepsIn(int64_t steps) const {
  return scheduleOf(*this).fStepsIn(steps);
}

Bundle Bundle::parse(const std::string &text, const std::string &origin) {
  std::optional<nlohmann::json> document;
  try {
    document = detail::parseJsonNoDeeperThan(text, detail::kMaxJsonDepth);
  } catch (const nlohmann::json::exception &e) {
    // Drop the library's "[json.exception.parse_error.101] " tag.
    std::string what = e.what();
    if (size_t tag = what.find("] "); what.rfind("[json.", 0) == 0 &&
                                      tag != std::string::npos)
      what = what.substr(tag + 2);
    throw Error(fmt::format("{}: not a moec bundle: the file is not valid "
                            "JSON ({})",
                            origin, what));
  }
  if (!document)
    throw Error(fmt::format("{}: not a moec bundle: the JSON nests deeper "
                            "than {} levels",
                            origin, detail::kMaxJsonDepth));
  return Bundle(detail::readBundle(std::move(*document), origin));
}

Bundle Bundle::load(const std::string &path) {
  return parse(readRegularFile(path, detail::kMaxBundleBytes), path);
}

void Bundle::save(const std::string &path) const {
  std::string text = json();
  writeFile(path, {{text.data(), text.size()}});
}

std::string Bundle::json() const { return impl->document.dump(1) + "\n"; }

const ModelInfo &Bundle::model() const { return impl->model; }
const TrainingConfig &Bundle::training() const { return impl->training; }
const DataSpec &Bundle::data() const { return impl->data; }
const GenerateConfig &Bundle::generate() const { return impl->generate; }
const std::vector<ParamInfo> &Bundle::params() const { return impl->params; }

std::vector<std::string> Bundle::programs() const {
  std::vector<std::string> names;
  for (const auto &[name, program] : impl->programs)
    names.push_back(name);
  return names;
}

bool Bundle::hasProgram(const std::string &name) const {
  return impl->programs.count(name) != 0;
}

std::vector<std::string> Bundle::programInputs(const std::string &name) const {
  std::vector<std::string> names;
  for (const auto &[input, buffer] : impl->program(name).inputs)
    names.push_back(input);
  return names;
}

std::vector<std::string>
Bundle::programOutputs(const std::string &name) const {
  std::vector<std::string> names;
  for (const auto &[output, buffer] : impl->program(name).outputs)
    names.push_back(output);
  return names;
}

} // namespace moec
