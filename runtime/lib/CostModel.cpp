//===- CostModel.cpp - FLOPs, bytes and roofline time per kernel ----------===//
//
// Values, not buffers: the plan reuses buffer ids, so each read is matched
// to the step that last wrote the buffer, and a kernel's traffic counts the
// values that cross its boundary. Matrix products count 2 FLOPs per
// multiply-add at their full (capacity-free, k assignments per token) size;
// every other op counts one FLOP per output element, which only matters in
// that it keeps them memory-bound, as they are.
//
//===----------------------------------------------------------------------===//

#include "moec/CostModel.h"
#include "BundleData.h"
#include "moec/Error.h"
#include "moec/support/MoeDefs.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <set>

namespace moec {

using detail::BufferDesc;
using detail::DimExpr;
using detail::SymbolValues;
using detail::ProgramDesc;
using detail::StepDesc;

namespace {

/// The sizes of a program's buffers, with the symbols bound.
class Sizes {
public:
  Sizes(const ProgramDesc &program, const SymbolValues &values) {
    for (const BufferDesc &buffer : program.buffers) {
      std::vector<double> dims;
      for (const DimExpr &d : buffer.dims) {
        std::optional<int64_t> v = d.evaluate(values);
        if (!v)
          throw Error(fmt::format("cost model of program '{}': no size for "
                                  "the dimension {} (give every symbol a "
                                  "size)",
                                  program.name, d.str()));
        dims.push_back(static_cast<double>(*v));
      }
      shapes.push_back(std::move(dims));
      element.push_back(static_cast<double>(dtypeSize(buffer.dtype)));
    }
  }

  /// Dimension `d` of buffer `id` (negative d counts from the end).
  double dim(int64_t id, int d) const {
    const std::vector<double> &s = shapes.at(id);
    return s.at(d < 0 ? s.size() + d : d);
  }
  double elements(int64_t id) const {
    double n = 1;
    for (double d : shapes.at(id))
      n *= d;
    return n;
  }
  /// Elements of buffer `id` over its last dimension: its rows.
  double rows(int64_t id) const { return elements(id) / dim(id, -1); }
  double bytes(int64_t id) const { return elements(id) * element.at(id); }
  double elementBytes(int64_t id) const { return element.at(id); }

private:
  std::vector<std::vector<double>> shapes;
  std::vector<double> element;
};

/// Query-key pairs attention computes: all of them, or with `causal` the
/// keys at or before each query (queries aligned to the last keys).
double attentionPairs(double sq, double sk, bool causal) {
  if (!causal)
    return sq * sk;
  double offset = std::max(sk - sq, 0.0);
  return sq * offset + sq * (sq + 1) / 2;
}

/// An op's name without "_grad", and whether it had it: the cost of a
/// gradient op follows from its forward op's operands.
struct OpKind {
  std::string_view forward;
  bool grad;
};

OpKind opKind(std::string_view op) {
  constexpr std::string_view kGrad = "_grad";
  bool grad = op.size() > kGrad.size() &&
              op.substr(op.size() - kGrad.size()) == kGrad;
  return {grad ? op.substr(0, op.size() - kGrad.size()) : op, grad};
}

bool present(const StepDesc &step, size_t i, bool output) {
  const std::vector<int64_t> &ids = output ? step.out : step.in;
  return i < ids.size() && ids[i] >= 0;
}

/// FLOPs of one plan step, as its kernels compute them; `blocks` gives the
/// blocks a head takes in each attention kernel (blocksPerHead).
double stepFlops(const StepDesc &s, const Sizes &z,
                 const std::map<std::string, double> &blocks) {
  const auto [op, grad] = opKind(s.op);
  auto flag = [&](std::string_view name) {
    auto it = s.attrs->find(std::string(name));
    return it != s.attrs->end() && it->is_boolean() && it->get<bool>();
  };
  if (op == "moe.linear") {
    // x [M, K], weight [K, N] (or [N, K] transposed).
    double m = z.rows(s.in[0]), k = z.dim(s.in[0], -1);
    double n = z.elements(s.in[1]) / k;
    double products = grad ? present(s, 0, true) + present(s, 1, true) : 1;
    double bias = grad ? present(s, 2, true) : present(s, 2, false);
    return 2 * m * k * n * products + m * n * bias;
  }
  if (op == "moe.attention") {
    // q [B, Sq, H dh], k [B, Sk, Hkv dh]. The forward computes QK^T and PV:
    // 4 FLOPs per pair and head dim, and 2 more for each further block of
    // a head (every block computes all its scores). The backward's dq
    // kernel recomputes S and dP in each block of a head, then dQ (4 a
    // block + 2); its dk/dv kernel recomputes S and dP in each block of a
    // head, then dV and dK (4 a block + 4).
    double heads = s.attrs->value("num_heads", 1.0);
    double batch = z.dim(s.in[0], 0), sq = z.dim(s.in[0], 1);
    double sk = z.dim(s.in[1], 1), dh = z.dim(s.in[0], 2) / heads;
    double pairs = attentionPairs(sq, sk, flag(defs::ops::attention::kCausal));
    auto blocksIn = [&](const std::string &phase) {
      auto it = blocks.find(phase);
      return it == blocks.end() ? 1.0 : it->second;
    };
    double dq = present(s, 0, true) ? 4 * blocksIn("dq") + 2 : 0;
    double dkv = present(s, 1, true) || present(s, 2, true)
                     ? 4 * blocksIn("dkv") + 4
                     : 0;
    double perPair = grad ? dq + dkv : 2 * blocksIn("") + 2;
    return perPair * batch * heads * pairs * dh;
  }
  if (op == "moe.expert_ffn") {
    // x [N, d], expert [N, k], w1 [E, d, f], w3 present for GLU.
    double assignments = z.elements(s.in[1]);
    double d = z.dim(s.in[4], 1), f = z.dim(s.in[4], 2);
    double up = (present(s, 8, false) ? 2 : 1) * 2 * assignments * d * f;
    double down = 2 * assignments * f * d;
    // The backward recomputes the hidden layer, then two products per
    // weight (the input's and the weight's gradient).
    return grad ? 3 * up + 2 * down : up + down;
  }
  if (op == "moe.expert_map" || op == "moe.expert_reduce") {
    // Every (token, choice) row through its expert's [in, out] matrix.
    int64_t w = s.in[op == "moe.expert_map" ? 3 : 4];
    double assignments = z.elements(s.in[1]);
    double product = 2 * assignments * z.dim(w, 1) * z.dim(w, 2);
    return grad ? 2 * product : product;
  }
  double outputs = 0;
  for (int64_t id : s.out)
    if (id >= 0)
      outputs += z.elements(id);
  return outputs;
}

/// Device-memory bytes of a composite op run as the separate kernels an
/// eager framework launches for it (each reading and writing in full), or
/// nullopt for an op that is one kernel anyway.
std::optional<double> eagerBytes(const StepDesc &s, const Sizes &z) {
  const auto [op, grad] = opKind(s.op);
  auto bytesOf = [&](int64_t id) { return id >= 0 ? z.bytes(id) : 0.0; };
  if (op == "moe.expert_ffn") {
    // gather x; x W1 (and x W3); activation (times u); h W2; combine.
    const int64_t x = s.in[0];
    double perElement = z.elementBytes(x);
    double assignments = z.elements(s.in[1]);
    double d = z.dim(s.in[4], 1), f = z.dim(s.in[4], 2);
    bool glu = present(s, 8, false);
    double xg = assignments * d * perElement, a = assignments * f * perElement;
    double forward = (bytesOf(x) + xg) +
                     (glu ? 2 : 1) * (xg + bytesOf(s.in[4]) + a) +
                     (glu ? 3 : 2) * a + (a + bytesOf(s.in[6]) + xg) +
                     (xg + bytesOf(s.in[2]) + bytesOf(x));
    // The backward reads what the forward saved and writes a gradient of
    // each: about twice the forward's traffic.
    return grad ? 2 * forward : forward;
  }
  if (op == "moe.attention") {
    // Scores and probabilities of [B, H, Sq, Sk] go through memory.
    double heads = s.attrs->value("num_heads", 1.0);
    const int64_t q = s.in[0], k = s.in[1], v = s.in[2];
    double perElement = z.elementBytes(q);
    double scores =
        z.dim(q, 0) * heads * z.dim(q, 1) * z.dim(k, 1) * perElement;
    double forward = (bytesOf(q) + bytesOf(k) + scores) + 2 * scores +
                     (scores + bytesOf(v) + bytesOf(q));
    // dV = P^T dO, dP = dO V^T, dS from P and dP, dQ = dS K, dK = dS^T Q.
    double backward = (scores + 2 * bytesOf(v)) + (bytesOf(q) + bytesOf(v) +
                                                   scores) +
                      3 * scores + (scores + bytesOf(k) + bytesOf(q)) +
                      (scores + bytesOf(q) + bytesOf(k));
    return grad ? backward : forward;
  }
  if (op == "moe.expert_map" || op == "moe.expert_reduce") {
    // map: gather x per (token, choice), then a batched product into the
    // [N, k h] result. reduce: the batched product of each choice's row,
    // the gate scaling and the sum over choices.
    bool map = op == "moe.expert_map";
    const int64_t x = s.in[0], w = s.in[map ? 3 : 4];
    double perElement = z.elementBytes(x);
    double assignments = z.elements(s.in[1]);
    double in = assignments * z.dim(w, 1) * perElement;
    double out = assignments * z.dim(w, 2) * perElement;
    double forward = map ? (bytesOf(x) + in) + (in + bytesOf(w) + out)
                         : (bytesOf(x) + bytesOf(w) + out) +
                               (out + bytesOf(s.in[3]) + out) +
                               (out + out / z.dim(s.in[1], -1));
    return grad ? 2 * forward : forward;
  }
  return std::nullopt;
}

/// One plan step's value of a buffer: (buffer, step that wrote it, or -1
/// for what the program starts with).
using Value = std::pair<int64_t, int64_t>;

/// Who reads each value: step indices, and kProgramEnd for the program's
/// outputs and updates.
constexpr int64_t kProgramEnd = -2;

struct Dataflow {
  std::vector<std::vector<Value>> reads;  // per step
  std::vector<std::vector<Value>> writes; // per step
  std::map<Value, std::vector<int64_t>> readers;
};

Dataflow dataflow(const ProgramDesc &program) {
  Dataflow flow;
  std::map<int64_t, int64_t> lastWriter;
  auto current = [&](int64_t id) {
    auto it = lastWriter.find(id);
    return Value{id, it == lastWriter.end() ? -1 : it->second};
  };
  for (size_t i = 0; i < program.steps.size(); ++i) {
    const StepDesc &step = program.steps[i];
    std::set<Value> reads;
    for (int64_t id : step.in)
      if (id >= 0)
        reads.insert(current(id));
    for (const Value &v : reads)
      flow.readers[v].push_back(static_cast<int64_t>(i));
    flow.reads.emplace_back(reads.begin(), reads.end());
    std::vector<Value> writes;
    for (int64_t id : step.out)
      if (id >= 0) {
        lastWriter[id] = static_cast<int64_t>(i);
        writes.push_back(current(id));
      }
    flow.writes.push_back(std::move(writes));
  }
  for (const auto &output : program.outputs)
    flow.readers[current(output.second)].push_back(kProgramEnd);
  for (const auto &update : program.updates)
    flow.readers[current(update.second)].push_back(kProgramEnd);
  return flow;
}

/// "tile_m=64 tile_n=64 ..." from the kernel's header comment.
std::string tilesOf(const detail::BundleData &data, const std::string &kernel) {
  auto it = data.kernels.find(kernel);
  if (it == data.kernels.end())
    return "";
  const std::string &source = it->second.source;
  size_t at = source.find("// tiles: ");
  if (at == std::string::npos)
    return "";
  at += 10;
  return source.substr(at, source.find('\n', at) - at);
}

/// The phase of a kernel named moek_<program>_g<id>_<phase> ("dq"), or ""
/// for a group's only kernel.
std::string phaseOf(const std::string &kernel) {
  for (size_t at = kernel.find("_g"); at != std::string::npos;
       at = kernel.find("_g", at + 2)) {
    size_t end = at + 2;
    while (end < kernel.size() && std::isdigit(uint8_t(kernel[end])))
      ++end;
    if (end > at + 2 && end < kernel.size() && kernel[end] == '_')
      return kernel.substr(end + 1);
  }
  return "";
}

/// One of a group's kernels: its name, phase and tiles line.
struct KernelTiles {
  std::string kernel, phase, tiles;
};

/// A group's distinct kernels, in the order of their first launch.
std::vector<KernelTiles> kernelTilesOf(const detail::BundleData &data,
                                       const detail::GroupDesc &group) {
  std::vector<KernelTiles> kernels;
  for (const detail::LaunchDesc &launch : group.launches)
    if (std::none_of(kernels.begin(), kernels.end(),
                     [&](auto &seen) { return seen.kernel == launch.kernel; }))
      kernels.push_back({launch.kernel, phaseOf(launch.kernel),
                         tilesOf(data, launch.kernel)});
  return kernels;
}

/// The tiles of a group's kernels: one list where they all run the same,
/// else each kernel's by its phase ("dq: ...; dkv: ...").
std::string groupTiles(const std::vector<KernelTiles> &kernels) {
  if (kernels.empty())
    return "";
  bool same = std::all_of(kernels.begin(), kernels.end(), [&](auto &kernel) {
    return kernel.tiles == kernels.front().tiles;
  });
  if (same)
    return kernels.front().tiles;
  std::string tiles;
  for (const KernelTiles &k : kernels)
    tiles += (tiles.empty() ? "" : "; ") +
             (k.phase.empty() ? k.kernel : k.phase) + ": " + k.tiles;
  return tiles;
}

/// A field of a kernel's tiles line ("head_dim=96 ..."), or nullopt.
std::optional<double> tileField(const std::string &tiles,
                                const std::string &field) {
  std::string key = field + "=";
  for (size_t at = tiles.find(key); at != std::string::npos;
       at = tiles.find(key, at + 1))
    if (at == 0 || tiles[at - 1] == ' ')
      return std::strtod(tiles.c_str() + at + key.size(), nullptr);
  return std::nullopt;
}

/// The blocks a head takes in each attention kernel of a group, by phase
/// ("" for a group's only kernel): head_dim / block_columns where a block
/// computes some of a head's output columns (each block then computes all
/// of its scores), else 1.
std::map<std::string, double>
blocksPerHead(const std::vector<KernelTiles> &kernels) {
  std::map<std::string, double> blocks;
  for (const KernelTiles &k : kernels) {
    std::optional<double> dim = tileField(k.tiles, "head_dim");
    std::optional<double> columns = tileField(k.tiles, "block_columns");
    blocks[k.phase] = dim && columns && *columns > 0 ? *dim / *columns : 1;
  }
  return blocks;
}

/// The FLOP rate a model's matrix products reach at best, and what runs
/// them.
std::pair<double, const char *> flopCeiling(const ModelInfo &model,
                                            const DeviceCeilings &ceilings) {
  if (model.dtype == "bf16")
    return {ceilings.bf16FlopsPerSecond, "dense bf16 tensor cores"};
  if (model.f32Matmul == "tf32")
    return {ceilings.tf32FlopsPerSecond, "dense tf32 tensor cores"};
  if (model.f32Matmul == "tf32x3")
    return {ceilings.tf32FlopsPerSecond / 3,
            "3xTF32: a third of dense tf32 tensor cores"};
  return {ceilings.f32FlopsPerSecond, "f32 CUDA cores"};
}

} // namespace

ProgramCost programCost(const Bundle &bundle, const std::string &name,
                        const std::map<std::string, int64_t> &sizes,
                        const DeviceCeilings &ceilings) {
  const detail::BundleData &data = bundle.internals();
  const ProgramDesc &program = data.program(name);
  if (program.groups.empty())
    throw Error(fmt::format("{}: program '{}' has no CUDA kernels to cost",
                            data.origin, name));
  SymbolValues values(sizes.begin(), sizes.end());
  Sizes z(program, values);
  Dataflow flow = dataflow(program);
  double flopRate = flopCeiling(data.model, ceilings).first;

  ProgramCost cost;
  cost.program = name;
  cost.sizes = sizes;
  for (const detail::GroupDesc &group : program.groups) {
    KernelCost k;
    k.kind = group.kind;
    std::vector<KernelTiles> kernels = kernelTilesOf(data, group);
    if (!kernels.empty())
      k.kernel = kernels.front().kernel;
    k.tiles = groupTiles(kernels);
    for (const detail::LaunchDesc &launch : group.launches)
      if (launch.gemm)
        k.gemms.push_back(
            {launch.kernel, launch.gemm->library, launch.gemm->why});
    std::set<int64_t> inGroup;
    for (size_t s : group.steps)
      inGroup.insert(static_cast<int64_t>(s));
    std::set<Value> crossing;
    std::map<std::string, double> blocks = blocksPerHead(kernels);
    for (size_t s : group.steps) {
      const StepDesc &step = program.steps[s];
      k.ops.push_back(step.op);
      if (k.location.empty())
        k.location = step.loc;
      k.flops += stepFlops(step, z, blocks);
      std::optional<double> eager = eagerBytes(step, z);
      if (eager)
        k.opByOpBytes += *eager;
      for (const Value &v : flow.reads[s]) {
        if (!eager)
          k.opByOpBytes += z.bytes(v.first);
        if (!inGroup.count(v.second))
          crossing.insert(v);
      }
      for (const Value &v : flow.writes[s]) {
        if (!eager)
          k.opByOpBytes += z.bytes(v.first);
        const std::vector<int64_t> &readers = flow.readers[v];
        if (std::any_of(readers.begin(), readers.end(),
                        [&](int64_t r) { return !inGroup.count(r); }))
          crossing.insert(v);
      }
    }
    for (const Value &v : crossing)
      k.bytes += z.bytes(v.first);
    // Attention on CUDA cores (f32 and tf32 models, head dims the
    // tensor-core kernels do not take; those are named ...Mma) runs at the
    // f32 rate.
    double rate = data.groupCalls(group, {"moec::attentionForward<",
                                          "moec::attentionGradQ<",
                                          "moec::attentionGradKV<"})
                      ? std::min(flopRate, ceilings.f32FlopsPerSecond)
                      : flopRate;
    double compute = k.flops / rate, memory = k.bytes / ceilings.bytesPerSecond;
    k.seconds = std::max(compute, memory);
    k.computeBound = compute > memory;
    cost.flops += k.flops;
    cost.bytes += k.bytes;
    cost.opByOpBytes += k.opByOpBytes;
    cost.seconds += k.seconds;
    cost.kernels.push_back(std::move(k));
  }
  return cost;
}

std::map<std::string, int64_t> defaultSizes(const Bundle &bundle) {
  const TrainingConfig &t = bundle.training();
  int64_t seq = std::max<int64_t>(t.seqLen, 1);
  return {{"B", std::max<int64_t>(t.batch, 1)}, {"S", seq}, {"T", seq}};
}

namespace {

std::string quantity(double v, const char *unit) {
  const char *prefixes[] = {"", "k", "M", "G", "T", "P"};
  int p = 0;
  while (std::abs(v) >= 1000 && p < 5) {
    v /= 1000;
    ++p;
  }
  return fmt::format("{:.3g} {}{}", v, prefixes[p], unit);
}

std::string microseconds(double seconds) {
  return fmt::format("{:.2f} us", seconds * 1e6);
}

std::string sizesText(const std::map<std::string, int64_t> &sizes) {
  std::vector<std::string> parts;
  for (const auto &[symbol, value] : sizes)
    parts.push_back(fmt::format("{} = {}", symbol, value));
  return fmt::format("{}", fmt::join(parts, ", "));
}

} // namespace

std::string costReport(const Bundle &bundle, const std::string &program,
                       const std::map<std::string, int64_t> &sizes,
                       const DeviceCeilings &ceilings) {
  const detail::BundleData &data = bundle.internals();
  auto [flopRate, flopUnits] = flopCeiling(data.model, ceilings);
  std::string dtype = data.model.dtype;
  if (data.model.f32Matmul != "fp32")
    dtype += ", f32_matmul " + data.model.f32Matmul;
  std::string out = fmt::format(
      "cost model: {} ({}), {}, at the {} ceilings: {} ({}), {}\n",
      data.model.name, dtype, sizesText(sizes), ceilings.name,
      quantity(flopRate, "FLOP/s"), flopUnits,
      quantity(ceilings.bytesPerSecond, "B/s"));
  out += "FLOPs: 2 per multiply-add of every matrix product the kernels "
         "compute, 1 per output element of other ops (attention: 4 per "
         "query-key pair and head dim forward, 2 more for each further block "
         "of a head split by its output columns; 14 backward, the dq and dk/dv "
         "kernels each recomputing the scores and dP, 4 more for each further "
         "dq or dk/dv block), at the rate above but for attention on CUDA "
         "cores (f32 and tf32 models, bf16 head dims the tensor-core kernels "
         "do not take) at the f32 CUDA-core rate. bytes: the values a kernel "
         "reads from and writes for other kernels (the least device-memory "
         "traffic it needs).\n"
         "tiles: gemm, gemm_grad and expert kernels take tile_m x tile_n "
         "blocks with a k-step of tile_k (tile_n 64, or 32 below N = 64; "
         "tile_m 128 on sm_90 for N >= 128, else 64); attention takes tile_q "
         "queries against tile_k keys, halved until its tiles fit 48 KiB of "
         "shared memory, except the bf16 tensor-core forward: 16 queries a "
         "warp against 64-key tiles (32 above head dim 64, 16 above 128, where "
         "a head takes two blocks of half its output columns, both computing "
         "its scores), the bf16 tensor-core dq (head dims 16 to 128, 160 to "
         "256 in steps of 32): 16 queries a warp against 32-key tiles (16 "
         "above 128, where a head takes two blocks of half its columns, four "
         "of a quarter at 256), and the bf16 tensor-core dk/dv (the same head "
         "dims): 16 keys a warp against 32-query tiles, blocks of 64 columns "
         "a K/V head above 112 (80 at 160, 32 at 224), against 16-query "
         "tiles above 128 (block_columns names the columns a block computes "
         "where a head takes several); row kernels run rows_per_block rows "
         "per block; elementwise kernels `items` elements per thread. A "
         "group whose kernels run different tiles lists each kernel's by its "
         "phase (delta, dq, dkv).\n"
         "GEMM paths: a gemm or gemm_grad launch that fuses nothing, with "
         "operand types cuBLASLt pairs and n, k >= 64, is computed by cuBLASLt "
         "on the cuda device where it loads (its kernel elsewhere); the "
         "others, and the grouped expert GEMMs (gather fused into the loads, "
         "gates and the scatter to token rows into the epilogue, with top-1 "
         "routing the whole combine), are moec's kernels.\n"
         "\n";
  ProgramCost cost = programCost(bundle, program, sizes, ceilings);
  out += fmt::format("program {}: {} kernels\n", program, cost.kernels.size());
  out += fmt::format("{:<24} {:<12} {:>14} {:>14} {:>9} {:>7} {:>10}  {}\n",
                     "kernel", "kind", "FLOPs", "bytes", "FLOP/B", "bound",
                     "H100 time", "ops (tiles) at");
  for (const KernelCost &k : cost.kernels) {
    out += fmt::format(
        "{:<24} {:<12} {:>14.0f} {:>14.0f} {:>9.2f} {:>7} {:>10}  {} ({}) at "
        "{}\n",
        k.kernel, k.kind, k.flops, k.bytes,
        k.bytes > 0 ? k.flops / k.bytes : 0.0,
        k.computeBound ? "compute" : "memory", microseconds(k.seconds),
        fmt::join(k.ops, " "), k.tiles, k.location);
  }
  // One line per GEMM kernel and path, with how often the program runs it
  // (launches of one kernel may take different paths: their sizes differ).
  std::vector<std::pair<KernelCost::GemmRoute, int>> routes;
  for (const KernelCost &k : cost.kernels)
    for (const KernelCost::GemmRoute &r : k.gemms) {
      auto same = std::find_if(routes.begin(), routes.end(), [&](auto &seen) {
        return seen.first.kernel == r.kernel &&
               seen.first.library == r.library && seen.first.why == r.why;
      });
      if (same == routes.end())
        routes.push_back({r, 1});
      else
        ++same->second;
    }
  if (!routes.empty()) {
    out += fmt::format("\n{} GEMM paths on the cuda device:\n", program);
    for (const auto &[r, count] : routes)
      out += fmt::format("  {:<26} x{:<3} {:<9}  {}\n", r.kernel, count,
                         r.library ? "cublaslt" : "generated", r.why);
  }
  std::map<std::string, std::pair<double, double>> byKind;
  for (const KernelCost &k : cost.kernels) {
    byKind[k.kind].first += k.bytes;
    byKind[k.kind].second += k.opByOpBytes;
  }
  out += fmt::format("\n{} by kernel kind: bytes moved, fused against op by "
                     "op:\n",
                     program);
  for (const auto &[kind, bytes] : byKind)
    out += fmt::format("  {:<12} {:>10} against {:>10} ({:.2f}x)\n", kind,
                       quantity(bytes.first, "B"), quantity(bytes.second, "B"),
                       bytes.second > 0 ? bytes.first / bytes.second : 0.0);
  out += "\ntotals (fused plan; the same ops one per kernel):\n";
  for (const std::string &name : bundle.programs()) {
    if (data.program(name).groups.empty())
      continue;
    ProgramCost p =
        name == program ? cost : programCost(bundle, name, sizes, ceilings);
    out += fmt::format(
        "  {:<12} {:>4} kernels  {:>12}  {:>10} moved (op by op {}, "
        "{:.2f}x)  {}\n",
        name, p.kernels.size(), quantity(p.flops, "FLOP"),
        quantity(p.bytes, "B"), quantity(p.opByOpBytes, "B"),
        p.opByOpBytes > 0 ? p.bytes / p.opByOpBytes : 0.0,
        microseconds(p.seconds));
  }
  return out;
}

} // namespace moec
