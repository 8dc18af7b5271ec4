//===- ProgramRunner.cpp - binding and running one program ----------------===//

#include "ProgramRunner.h"
#include "moec/Error.h"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

namespace moec::detail {

Tensor constantValue(const BufferDesc &buffer, const Shape &shape,
                     const std::string &program) {
  Tensor value(buffer.dtype, shape);
  for (size_t i = 0; i < buffer.value.size(); ++i) {
    switch (buffer.dtype) {
    case DType::F32:
      value.data<float>()[i] = static_cast<float>(buffer.value[i]);
      break;
    case DType::F64:
      value.data<double>()[i] = buffer.value[i];
      break;
    case DType::I32:
      value.data<int32_t>()[i] = static_cast<int32_t>(buffer.value[i]);
      break;
    case DType::I64:
      value.data<int64_t>()[i] = static_cast<int64_t>(buffer.value[i]);
      break;
    default:
      throw Error(fmt::format("program '{}': constants of dtype {} are not "
                              "supported",
                              program, dtypeName(buffer.dtype)));
    }
  }
  return value;
}

ProgramRunner::ProgramRunner(Device &device, const ProgramDesc &program)
    : device(device), program(program),
      referenced(program.buffers.size(), false) {
  // A device that runs fused groups never touches a group's internal
  // values, so only what the launches name needs storage.
  auto mark = [&](const std::vector<int64_t> &ids) {
    for (int64_t id : ids)
      if (id >= 0)
        referenced[id] = true;
  };
  if (device.runsGroups()) {
    if (program.groups.empty())
      throw Error(fmt::format("program '{}' has no generated kernels, so the "
                              "{} device cannot run it; compile the model "
                              "with CUDA code generation or use --device cpu",
                              program.name, device.name()));
    for (const GroupDesc &group : program.groups)
      for (const LaunchDesc &launch : group.launches)
        mark(launch.buffers);
  } else {
    for (const StepDesc &step : program.steps) {
      mark(step.in);
      mark(step.out);
    }
  }
  for (const auto &[name, id] : program.outputs)
    referenced[id] = true;
  for (const auto &[name, id] : program.updates)
    referenced[id] = true;
  // A view's storage is the buffer it views (always an earlier one).
  for (size_t id = program.buffers.size(); id-- > 0;)
    if (referenced[id] && program.buffers[id].kind == BufferKind::View)
      referenced[program.buffers[id].of] = true;
  device.prepare(program);
}

bool ProgramRunner::hasInput(const std::string &name) const {
  return std::any_of(program.inputs.begin(), program.inputs.end(),
                     [&](const auto &input) { return input.first == name; });
}

SymbolValues
ProgramRunner::bindSymbols(const std::map<std::string, Tensor> &inputs) const {
  for (const auto &[name, tensor] : inputs)
    if (!hasInput(name)) {
      std::vector<std::string> names;
      for (const auto &input : program.inputs)
        names.push_back(input.first);
      throw Error(fmt::format("program '{}' has no input '{}' (its inputs: {})",
                              program.name, name, fmt::join(names, ", ")));
    }
  SymbolValues values;
  // Single-symbol dimensions bind; everything else is checked afterwards.
  for (const auto &[name, id] : program.inputs) {
    auto it = inputs.find(name);
    if (it == inputs.end())
      throw Error(fmt::format("program '{}' needs the input '{}'",
                              program.name, name));
    const BufferDesc &buffer = program.buffers[id];
    const Tensor &t = it->second;
    if (t.dtype() != buffer.dtype || t.shape().size() != buffer.dims.size())
      throw Error(fmt::format("input '{}' of program '{}' must be a {} tensor "
                              "of rank {}, got {} {}",
                              name, program.name, dtypeName(buffer.dtype),
                              buffer.dims.size(), dtypeName(t.dtype()),
                              shapeString(t.shape())));
    for (size_t d = 0; d < buffer.dims.size(); ++d)
      if (std::optional<std::string> symbol = buffer.dims[d].asSymbol()) {
        int64_t size = t.shape()[d];
        if (size < 1)
          throw Error(fmt::format("input '{}' of program '{}': dimension {} "
                                  "({}) must be at least 1",
                                  name, program.name, d, *symbol));
        auto [pos, inserted] = values.emplace(*symbol, size);
        if (!inserted && pos->second != size)
          throw Error(fmt::format("input '{}' of program '{}' has {} = {} in "
                                  "dimension {}, but another input has {} = {}",
                                  name, program.name, *symbol, size, d,
                                  *symbol, pos->second));
      }
  }
  for (const auto &[name, id] : program.inputs) {
    const BufferDesc &buffer = program.buffers[id];
    Shape expected = evaluate(buffer.dims, values, "input '" + name + "'");
    if (expected != inputs.at(name).shape())
      throw Error(fmt::format("input '{}' of program '{}' must have shape {}, "
                              "got {}",
                              name, program.name, shapeString(expected),
                              shapeString(inputs.at(name).shape())));
  }
  return values;
}

Shape ProgramRunner::evaluate(const std::vector<DimExpr> &dims,
                              const SymbolValues &values,
                              const std::string &what) const {
  Shape shape;
  int64_t total = 1;
  for (const DimExpr &d : dims) {
    std::optional<int64_t> v = d.evaluate(values);
    if (!v)
      throw Error(fmt::format("program '{}': the size {} of {} depends on a "
                              "symbol no input binds, or overflows",
                              program.name, d.str(), what));
    if (__builtin_mul_overflow(total, *v, &total) || total > (int64_t(1) << 40))
      throw Error(fmt::format("program '{}': {} would hold more than 2^40 "
                              "elements",
                              program.name, what));
    shape.push_back(*v);
  }
  return shape;
}

void ProgramRunner::prepareWorkspace(const SymbolValues &values) {
  if (workspaceSymbols && *workspaceSymbols == values)
    return;
  workspace.clear();
  workspace.resize(program.buffers.size());
  for (size_t id = 0; id < program.buffers.size(); ++id) {
    const BufferDesc &b = program.buffers[id];
    if (!referenced[id] ||
        (b.kind != BufferKind::Temp && b.kind != BufferKind::Const &&
         b.kind != BufferKind::Input && b.kind != BufferKind::View))
      continue;
    Shape shape = evaluate(b.dims, values, fmt::format("buffer {}", id));
    if (b.kind == BufferKind::View) {
      DeviceBuffer &viewed = *workspace[b.of];
      if (numElements(shape) != numElements(viewed.shape))
        throw Error(fmt::format("program '{}': buffer {} views buffer {} "
                                "but has {} elements, not {}",
                                program.name, id, b.of, numElements(shape),
                                numElements(viewed.shape)));
      workspace[id] = device.alias(viewed, shape);
      continue;
    }
    workspace[id] = device.allocate(b.dtype, shape);
    if (b.kind == BufferKind::Const)
      device.upload(*workspace[id],
                    constantValue(b, workspace[id]->shape, program.name));
  }
  workspaceSymbols = values;
}

std::map<std::string, Tensor>
ProgramRunner::run(const std::map<std::string, Tensor> &inputs,
                   BufferMap &params, BufferMap &states) {
  SymbolValues values = bindSymbols(inputs);
  prepareWorkspace(values);

  std::vector<DeviceBuffer *> buffers(program.buffers.size(), nullptr);
  for (size_t id = 0; id < program.buffers.size(); ++id) {
    const BufferDesc &b = program.buffers[id];
    switch (b.kind) {
    case BufferKind::Param: {
      auto it = params.find(b.bind);
      if (it == params.end())
        throw Error(fmt::format("program '{}': parameter '{}' is not loaded",
                                program.name, b.bind));
      buffers[id] = it->second.get();
      break;
    }
    case BufferKind::State: {
      Shape shape = evaluate(b.dims, values, "state '" + b.bind + "'");
      std::unique_ptr<DeviceBuffer> &slot = states[b.bind];
      // Caches sized by run-time symbols are (re)made for new sizes.
      if (!slot || slot->shape != shape || slot->dtype != b.dtype)
        slot = device.allocate(b.dtype, shape);
      buffers[id] = slot.get();
      break;
    }
    case BufferKind::Input:
      if (referenced[id]) {
        buffers[id] = workspace[id].get();
        device.upload(*buffers[id], inputs.at(b.bind));
      }
      break;
    case BufferKind::Const:
    case BufferKind::Temp:
    case BufferKind::View:
      buffers[id] = workspace[id].get();
      break;
    }
  }

  device.run(program, values, buffers);

  for (const auto &[target, id] : program.updates) {
    auto it = params.find(target);
    DeviceBuffer *storage = nullptr;
    if (it != params.end()) {
      storage = it->second.get();
    } else {
      // A state this program only writes (the encoder's cross-attention
      // keys and values) takes the size of what is written.
      std::unique_ptr<DeviceBuffer> &slot = states[target];
      if (!slot || slot->shape != buffers[id]->shape ||
          slot->dtype != buffers[id]->dtype)
        slot = device.allocate(buffers[id]->dtype, buffers[id]->shape);
      storage = slot.get();
    }
    if (storage != buffers[id])
      device.copy(*storage, *buffers[id]);
  }
  std::map<std::string, Tensor> outputs;
  for (const auto &[name, id] : program.outputs)
    outputs[name] = device.download(*buffers[id]);
  return outputs;
}

} // namespace moec::detail
