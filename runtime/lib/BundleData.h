//===- BundleData.h - the validated contents of a bundle --------*- C++ -*-===//

#ifndef MOEC_RUNTIME_BUNDLEDATA_H
#define MOEC_RUNTIME_BUNDLEDATA_H

#include "DimExpr.h"
#include "moec/Bundle.h"

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace moec::detail {

enum class BufferKind { Param, State, Input, Const, Temp };

struct BufferDesc {
  BufferKind kind = BufferKind::Temp;
  DType dtype = DType::F32;
  std::vector<DimExpr> dims;
  /// param/state: the bound name; input: the input's name.
  std::string bind;
  /// const: the values, row-major.
  std::vector<double> value;
};

struct StepDesc {
  std::string op;
  std::vector<int64_t> in, out;
  nlohmann::json attrs;
  /// Source location of the .moe construct the op came from, if known.
  std::string loc;
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
};

struct StateDesc {
  std::string name;
  DType dtype = DType::F32;
  std::vector<DimExpr> dims;
  /// The parameter an optimizer moment shadows; empty for caches.
  std::string like;
};

struct BundleData {
  std::string origin;
  nlohmann::json document;
  std::string moecVersion;
  ModelInfo model;
  TrainingConfig training;
  DataSpec data;
  double balanceLossWeight = 0;
  std::vector<ParamInfo> params;
  std::vector<StateDesc> states;
  std::map<std::string, ProgramDesc> programs;

  const ParamInfo *findParam(const std::string &name) const;
  const StateDesc *findState(const std::string &name) const;
  const ProgramDesc &program(const std::string &name) const;
};

/// Validates `document` and builds the bundle data. `knownOps` lists the op
/// names a step may name (the cpu kernels).
std::shared_ptr<BundleData> readBundle(nlohmann::json document,
                                       const std::string &origin);

} // namespace moec::detail

#endif // MOEC_RUNTIME_BUNDLEDATA_H
