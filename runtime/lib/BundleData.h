//===- BundleData.h - the validated contents of a bundle --------*- C++ -*-===//

#ifndef MOEC_RUNTIME_BUNDLEDATA_H
#define MOEC_RUNTIME_BUNDLEDATA_H

#include "DimExpr.h"
#include "moec/Bundle.h"

#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace moec::detail {

enum class BufferKind { Param, State, Input, Const, Temp, View };

struct BufferDesc {
  BufferKind kind = BufferKind::Temp;
  DType dtype = DType::F32;
  std::vector<DimExpr> dims;
  /// param/state: the bound name; input: the input's name.
  std::string bind;
  /// const: the values, row-major.
  std::vector<double> value;
  /// view: the earlier temp buffer whose storage this one shares, under
  /// its own shape with as many elements.
  int64_t of = -1;
};

/// An empty JSON object: the attributes of a step that has none.
const nlohmann::json &noAttrs();

struct StepDesc {
  std::string op;
  std::vector<int64_t> in, out;
  /// The step's "attrs" object, inside the bundle's document (which the
  /// BundleData keeps unchanged for its whole life): a large bundle's
  /// thousands of steps are not copied out of it.
  const nlohmann::json *attrs = &noAttrs();
  /// Source location of the .moe construct the op came from, if known.
  std::string loc;
};

/// One grid dimension: ceil(extent / perBlock) + extra blocks (none when
/// the extent is not positive).
struct GridDimDesc {
  DimExpr extent = DimExpr(1);
  int64_t perBlock = 1;
  int64_t extra = 0;
};

/// One operand of a library GEMM: a kernel argument, row- or column-major.
struct GemmOperandDesc {
  int arg = -1;
  bool colMajor = false;
  int64_t ld = 1;
};

/// How a GEMM launch is computed. A library GEMM is D[m x n] (row-major,
/// ld n) = A[m x k] B[k x n] (+ bias[n]), which the cuda device hands to
/// cuBLASLt when it loads; the launch's kernel computes the same otherwise.
struct GemmDesc {
  bool library = false;
  std::string why;
  DimExpr m = DimExpr(0), n = DimExpr(0), k = DimExpr(0);
  GemmOperandDesc a, b;
  /// Kernel arguments of D and the bias (-1: none).
  int d = -1, bias = -1;
  /// "f32" (f32 or bf16 operands, f32 accumulation), "tf32" or "f64".
  std::string compute;
};

/// One kernel launch of a fused group (see compiler/CODEGEN.md).
struct LaunchDesc {
  /// A name in BundleData::kernels.
  std::string kernel;
  GridDimDesc grid[3];
  int64_t block[3] = {1, 1, 1};
  int64_t sharedBytes = 0;
  /// Program buffer ids in KernelParams::buffers order; -1 passes null.
  std::vector<int64_t> buffers;
  /// Values for KernelParams::scalars, in order.
  std::vector<DimExpr> scalars;
  /// GEMM launches: the path the plan chose and why.
  std::optional<GemmDesc> gemm;
};

/// A fused group: the plan steps it covers and the launches that compute
/// them on the cuda and emu devices.
struct GroupDesc {
  /// What the fusion pass made of it ("gemm", "router", ...).
  std::string kind;
  std::vector<size_t> steps;
  std::vector<LaunchDesc> launches;
};

struct ProgramDesc {
  std::string name;
  std::vector<BufferDesc> buffers;
  std::vector<StepDesc> steps;
  /// (output name, buffer).
  std::vector<std::pair<std::string, int64_t>> outputs;
  /// (param or state name, buffer holding its new value).
  std::vector<std::pair<std::string, int64_t>> updates;
  /// (input name, buffer), in buffer order.
  std::vector<std::pair<std::string, int64_t>> inputs;
  /// Fused groups in execution order; empty when the bundle has no CUDA
  /// code (then only the cpu device can run it).
  std::vector<GroupDesc> groups;
};

/// A generated kernel: its own source, which the runtime compiles after the
/// device library it embeds.
struct KernelDesc {
  std::string name;
  std::string source;
};

struct StateDesc {
  std::string name;
  DType dtype = DType::F32;
  std::vector<DimExpr> dims;
  /// The parameter an optimizer moment shadows; empty for caches.
  std::string like;
};

struct BundleData {
  BundleData() = default;
  /// Steps point into `document`: a copy would point into the original.
  /// A move keeps them valid (the document's values stay where they are).
  BundleData(const BundleData &) = delete;
  BundleData &operator=(const BundleData &) = delete;
  BundleData(BundleData &&) = default;
  BundleData &operator=(BundleData &&) = default;

  std::string origin;
  nlohmann::json document;
  std::string moecVersion;
  ModelInfo model;
  TrainingConfig training;
  DataSpec data;
  GenerateConfig generate;
  double balanceLossWeight = 0;
  std::vector<ParamInfo> params;
  std::vector<StateDesc> states;
  std::map<std::string, ProgramDesc> programs;
  /// Generated kernels by name (empty without CUDA code).
  std::map<std::string, KernelDesc> kernels;
  /// The device library the kernels were generated against (its hash).
  std::string deviceLibraryHash;

  const ParamInfo *findParam(const std::string &name) const;
  const StateDesc *findState(const std::string &name) const;
  const ProgramDesc &program(const std::string &name) const;
  /// Whether the source of a kernel `group` launches contains one of
  /// `calls` (a device-library routine the compiler chose, such as
  /// "moec::gemmTileTf32<").
  bool groupCalls(const GroupDesc &group,
                  std::initializer_list<const char *> calls) const;
};

/// Validates `document` and builds the bundle data. `knownOps` lists the op
/// names a step may name (the cpu kernels).
std::shared_ptr<BundleData> readBundle(nlohmann::json document,
                                       const std::string &origin);

} // namespace moec::detail

#endif // MOEC_RUNTIME_BUNDLEDATA_H
