//===- ProgramRunner.h - binding and running one program --------*- C++ -*-===//

#ifndef MOEC_RUNTIME_PROGRAMRUNNER_H
#define MOEC_RUNTIME_PROGRAMRUNNER_H

#include "BundleData.h"
#include "Device.h"

#include <map>
#include <memory>
#include <string>

namespace moec::detail {

/// Named device storage a program reads and updates.
using BufferMap = std::map<std::string, std::unique_ptr<DeviceBuffer>>;

/// The value of a constant buffer, of `shape` (its dims under the run's
/// symbols); `program` names it in errors.
Tensor constantValue(const BufferDesc &buffer, const Shape &shape,
                     const std::string &program);

/// Runs one program of a bundle on a device. It binds the run-time symbols
/// (B, S, ...) from the input shapes, keeps a workspace of temporaries that
/// is reused while the symbols stay the same, and writes updates back into
/// the session's parameters and state.
class ProgramRunner {
public:
  ProgramRunner(Device &device, const ProgramDesc &program);

  std::map<std::string, Tensor> run(const std::map<std::string, Tensor> &inputs,
                                    BufferMap &params, BufferMap &states);

  const ProgramDesc &desc() const { return program; }
  bool hasInput(const std::string &name) const;

private:
  SymbolValues bindSymbols(const std::map<std::string, Tensor> &inputs) const;
  Shape evaluate(const std::vector<DimExpr> &dims, const SymbolValues &values,
                 const std::string &what) const;
  void prepareWorkspace(const SymbolValues &values);

  Device &device;
  const ProgramDesc &program;
  /// Buffers some step, output or update refers to.
  std::vector<bool> referenced;
  std::optional<SymbolValues> workspaceSymbols;
  std::vector<std::unique_ptr<DeviceBuffer>> workspace;
};

} // namespace moec::detail

#endif // MOEC_RUNTIME_PROGRAMRUNNER_H
