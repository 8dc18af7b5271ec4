//===- BundleEmitter.cpp - planned module -> bundle JSON ------------------===//
//
// The bundle is the contract between compiler and runtime: plain JSON that a
// user can read, diff and validate. The runtime never sees MLIR.
//
//===----------------------------------------------------------------------===//

#include "moec/Target/BundleEmitter.h"
#include "moec/Target/CudaEmitter.h"
#include "moec/Analysis/KernelGroups.h"
#include "moec/Transforms/PlanAttrs.h"
#include "moec/support/DeviceLibrary.h"
#include "moe/IR/MoeOps.h"
#include "moec/Version.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/TypeSwitch.h"
#include <map>

using namespace mlir;
using namespace mlir::moe;
namespace json = llvm::json;

static std::string typeName(Type type) {
  if (type.isF32())
    return "f32";
  if (type.isF64())
    return "f64";
  if (type.isBF16())
    return "bf16";
  if (type.isF16())
    return "f16";
  if (type.isInteger(32))
    return "i32";
  if (type.isInteger(64))
    return "i64";
  std::string s;
  llvm::raw_string_ostream(s) << type;
  return s;
}

json::Value mlir::moe::attributeToJson(Attribute attr) {
  return llvm::TypeSwitch<Attribute, json::Value>(attr)
      .Case([](BoolAttr a) { return json::Value(a.getValue()); })
      .Case([](IntegerAttr a) { return json::Value(a.getInt()); })
      .Case([](FloatAttr a) { return json::Value(a.getValueAsDouble()); })
      .Case([](StringAttr a) { return json::Value(a.getValue().str()); })
      .Case([](FlatSymbolRefAttr a) { return json::Value(a.getValue().str()); })
      .Case([](UnitAttr) { return json::Value(true); })
      .Case([](TypeAttr a) { return json::Value(typeName(a.getValue())); })
      .Case([](ActivationAttr a) {
        return json::Value(stringifyActivation(a.getValue()).str());
      })
      .Case([](GateWeightingAttr a) {
        return json::Value(stringifyGateWeighting(a.getValue()).str());
      })
      .Case([](CapacityAttr a) {
        return json::Value(stringifyCapacity(a.getValue()).str());
      })
      .Case([](PriorityAttr a) {
        return json::Value(stringifyPriority(a.getValue()).str());
      })
      .Case([](BalanceLossAttr a) {
        return json::Value(stringifyBalanceLoss(a.getValue()).str());
      })
      .Case([](LrScheduleAttr a) {
        return json::Value(stringifyLrSchedule(a.getValue()).str());
      })
      .Case([](InitAttr a) {
        return json::Value(stringifyInit(a.getValue()).str());
      })
      .Case([](PoolWindowAttr a) {
        return json::Value(stringifyPoolWindow(a.getValue()).str());
      })
      .Case([](ArrayAttr a) {
        json::Array array;
        for (Attribute e : a)
          array.push_back(attributeToJson(e));
        return json::Value(std::move(array));
      })
      .Case([](DenseI64ArrayAttr a) {
        json::Array array;
        for (int64_t v : a.asArrayRef())
          array.push_back(v);
        return json::Value(std::move(array));
      })
      .Case([](DenseI32ArrayAttr a) {
        json::Array array;
        for (int32_t v : a.asArrayRef())
          array.push_back(v);
        return json::Value(std::move(array));
      })
      .Case([](DenseElementsAttr a) {
        json::Array array;
        if (isa<FloatType>(a.getElementType()))
          for (const APFloat &v : a.getValues<APFloat>())
            array.push_back(v.convertToDouble());
        else
          for (const APInt &v : a.getValues<APInt>())
            array.push_back(v.getSExtValue());
        return json::Value(std::move(array));
      })
      .Case([](DictionaryAttr a) {
        json::Object object;
        for (NamedAttribute n : a)
          object[n.getName().getValue()] = attributeToJson(n.getValue());
        return json::Value(std::move(object));
      })
      .Default([](Attribute a) {
        std::string s;
        llvm::raw_string_ostream(s) << a;
        return json::Value(s);
      });
}

static std::string locationString(Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().getValue() + ":" + Twine(file.getLine()) + ":" +
            Twine(file.getColumn()))
        .str();
  if (auto named = dyn_cast<NameLoc>(loc))
    return locationString(named.getChildLoc());
  if (auto fused = dyn_cast<FusedLoc>(loc))
    if (!fused.getLocations().empty())
      return locationString(fused.getLocations().front());
  return "";
}

/// The step attributes: inherent attributes only, plan bookkeeping dropped.
static json::Object stepAttributes(Operation *op) {
  json::Object attrs;
  if (auto props = dyn_cast_or_null<DictionaryAttr>(op->getPropertiesAsAttribute()))
    for (NamedAttribute n : props) {
      StringRef name = n.getName().getValue();
      if (name == "operandSegmentSizes")
        continue;
      attrs[name] = attributeToJson(n.getValue());
    }
  return attrs;
}

static FailureOr<json::Object> buildProgram(func::FuncOp func) {
  auto buffers = func->getAttrOfType<ArrayAttr>(plan::kBuffers);
  if (!buffers)
    return func.emitOpError("has no execution plan: run moe-lower-to-plan "
                            "first");
  json::Object program;
  json::Array bufferTable;
  for (Attribute b : buffers) {
    auto dict = cast<DictionaryAttr>(b);
    json::Object entry;
    entry["id"] = attributeToJson(dict.get("id"));
    entry["kind"] = attributeToJson(dict.get("kind"));
    entry["dtype"] = typeName(cast<TypeAttr>(dict.get("type")).getValue());
    entry["dims"] = attributeToJson(dict.get("dims"));
    if (Attribute bind = dict.get("bind"))
      entry["bind"] = attributeToJson(bind);
    if (Attribute value = dict.get("value"))
      entry["value"] = attributeToJson(value);
    if (Attribute of = dict.get("of"))
      entry["of"] = attributeToJson(of);
    bufferTable.push_back(std::move(entry));
  }
  program["buffers"] = std::move(bufferTable);

  json::Array steps;
  Operation *terminator = func.getBody().front().getTerminator();
  for (Operation *op : executionOrder(func)) {
    if (!op->hasAttr(plan::kStep))
      continue; // Constants live in the buffer table.
    json::Object step;
    step["op"] = op->getName().getStringRef().str();
    step["in"] = attributeToJson(op->getAttr(plan::kIn));
    step["out"] = attributeToJson(op->getAttr(plan::kOut));
    step["attrs"] = stepAttributes(op);
    std::string loc = locationString(op->getLoc());
    if (!loc.empty())
      step["loc"] = loc;
    steps.push_back(std::move(step));
  }
  program["steps"] = std::move(steps);

  auto returned = terminator->getAttrOfType<DenseI64ArrayAttr>(plan::kIn);
  json::Array outputs, updates;
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    json::Object entry;
    entry["buffer"] = returned[i];
    if (auto name = func.getResultAttrOfType<StringAttr>(i, attrs::kOutput)) {
      entry["name"] = name.getValue().str();
      outputs.push_back(std::move(entry));
    } else if (auto target = func.getResultAttrOfType<FlatSymbolRefAttr>(
                   i, attrs::kUpdate)) {
      entry["target"] = target.getValue().str();
      updates.push_back(std::move(entry));
    } else {
      return func.emitOpError("result #")
             << i << " is neither a named output (moe.output) nor an update "
             << "(moe.update)";
    }
  }
  program["outputs"] = std::move(outputs);
  program["updates"] = std::move(updates);
  return program;
}

static json::Value gridDimJson(const cuda::GridDim &d) {
  if (d.extent.isStatic() && d.perBlock == 1 && d.extra == 0)
    return d.extent.getStatic();
  json::Object o;
  o["extent"] = d.extent.str();
  o["per_block"] = d.perBlock;
  if (d.extra)
    o["extra"] = d.extra;
  return o;
}

static json::Value symDimJson(const SymDim &d) {
  return d.isStatic() ? json::Value(d.getStatic()) : json::Value(d.str());
}

/// A launch's GEMM path; a library GEMM also says what cuBLASLt computes.
static json::Object gemmPathJson(const cuda::GemmPath &path) {
  json::Object o;
  o["path"] = path.library ? "cublaslt" : "generated";
  o["why"] = path.why;
  if (!path.library)
    return o;
  o["m"] = symDimJson(path.m);
  o["n"] = symDimJson(path.n);
  o["k"] = symDimJson(path.k);
  auto operand = [](int arg, bool colMajor, int64_t ld) {
    return json::Object{{"arg", arg},
                        {"order", colMajor ? "col" : "row"},
                        {"ld", ld}};
  };
  o["a"] = operand(path.a, path.aColMajor, path.lda);
  o["b"] = operand(path.b, path.bColMajor, path.ldb);
  o["d"] = path.d;
  o["bias"] = path.bias;
  o["compute"] = path.compute;
  return o;
}

/// Adds the program's kernel launches and scratch buffers to its JSON.
static void addCudaCode(json::Object &program, const cuda::ProgramCode &code) {
  json::Array &buffers = *program.getArray("buffers");
  for (const cuda::Scratch &s : code.scratch) {
    json::Object entry;
    entry["id"] = static_cast<int64_t>(buffers.size());
    entry["kind"] = "temp";
    entry["dtype"] = typeName(s.elementType);
    json::Array dims;
    for (const SymDim &d : s.shape)
      dims.push_back(d.isStatic() ? json::Value(d.getStatic())
                                  : json::Value(d.str()));
    entry["dims"] = std::move(dims);
    buffers.push_back(std::move(entry));
  }
  json::Array groups;
  for (const cuda::GroupCode &g : code.groups) {
    json::Object group;
    group["kind"] = g.kind;
    group["steps"] = json::Array(g.steps);
    json::Array launches;
    for (const cuda::Launch &l : g.launches) {
      json::Object launch;
      launch["kernel"] = l.kernel;
      launch["grid"] = json::Array{gridDimJson(l.grid[0]),
                                   gridDimJson(l.grid[1]),
                                   gridDimJson(l.grid[2])};
      launch["block"] = json::Array{l.block[0], l.block[1], l.block[2]};
      launch["shared_bytes"] = l.sharedBytes;
      launch["buffers"] = json::Array(l.buffers);
      json::Array scalars;
      for (const SymDim &d : l.scalars)
        scalars.push_back(d.isStatic() ? json::Value(d.getStatic())
                                       : json::Value(d.str()));
      launch["scalars"] = std::move(scalars);
      if (l.gemm)
        launch["gemm"] = gemmPathJson(*l.gemm);
      launches.push_back(std::move(launch));
    }
    group["launches"] = std::move(launches);
    groups.push_back(std::move(group));
  }
  program["groups"] = std::move(groups);
}

FailureOr<json::Object> mlir::moe::buildBundle(ModuleOp module,
                                               const BundleOptions &options,
                                               std::string *cudaSkipped) {
  json::Object bundle;
  bundle["format"] = "moec-bundle";
  bundle["version"] = kBundleVersion;
  bundle["moec_version"] = MOEC_VERSION_STRING;
  for (StringRef key :
       {attrs::kModel, attrs::kTraining, attrs::kData, attrs::kGenerate})
    if (Attribute a = module->getAttr(key))
      bundle[key.drop_front(4)] = attributeToJson(a);

  json::Array params, states;
  for (Operation &op : module.getBody()->getOperations()) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      auto type = cast<RankedTensorType>(param.getType());
      json::Object entry;
      entry["name"] = param.getSymName().str();
      entry["dtype"] = typeName(type.getElementType());
      entry["shape"] = json::Array(type.getShape());
      entry["init"] = stringifyInit(param.getInit()).str();
      entry["scale"] = param.getScale().convertToDouble();
      entry["frozen"] = param.getFrozen();
      if (std::optional<APFloat> rowNorm = param.getRowNorm())
        entry["row_norm"] = rowNorm->convertToDouble();
      if (std::optional<StringRef> group = param.getGroup())
        entry["group"] = group->str();
      params.push_back(std::move(entry));
    } else if (auto state = dyn_cast<StateOp>(op)) {
      json::Object entry;
      entry["name"] = state.getSymName().str();
      entry["dtype"] = typeName(
          cast<RankedTensorType>(state.getType()).getElementType());
      entry["dims"] = attributeToJson(state.getDims());
      if (auto like = state.getLikeAttr())
        entry["like"] = like.getValue().str();
      states.push_back(std::move(entry));
    }
  }
  bundle["params"] = std::move(params);
  bundle["states"] = std::move(states);

  json::Object programs;
  cuda::KernelTable kernels;
  std::map<std::string, cuda::ProgramCode> codes;
  std::string skipped;
  for (auto func : module.getOps<func::FuncOp>()) {
    auto entry = func->getAttrOfType<StringAttr>(attrs::kEntry);
    if (!entry)
      continue;
    FailureOr<json::Object> program = buildProgram(func);
    if (failed(program))
      return failure();
    programs[entry.getValue()] = std::move(*program);
    if (!options.cuda || !skipped.empty())
      continue;
    // Kernel generation problems make the bundle cpu-only, not invalid.
    ScopedDiagnosticHandler capture(module.getContext(), [&](Diagnostic &d) {
      if (skipped.empty())
        skipped = d.str();
      return success();
    });
    FailureOr<cuda::ProgramCode> code =
        cuda::emitProgram(func, entry.getValue(), kernels);
    if (failed(code)) {
      if (skipped.empty())
        skipped = "CUDA code generation failed";
      continue;
    }
    codes[entry.getValue().str()] = std::move(*code);
  }
  if (options.cuda && skipped.empty()) {
    for (auto &[name, code] : codes)
      addCudaCode(*programs.getObject(name), code);
    json::Object cudaSection;
    cudaSection["device_library"] = std::string(moec::deviceLibraryHash());
    cudaSection["arch"] = options.arch;
    json::Array kernelTable;
    for (const cuda::Kernel &k : kernels.kernels())
      kernelTable.push_back(json::Object{{"name", k.name}, {"source", k.source}});
    cudaSection["kernels"] = std::move(kernelTable);
    bundle["cuda"] = std::move(cudaSection);
  }
  if (cudaSkipped)
    *cudaSkipped = skipped;
  bundle["programs"] = std::move(programs);
  return bundle;
}
