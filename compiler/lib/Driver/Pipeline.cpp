//===- Pipeline.cpp - the compiler's stages -------------------------------===//

#include "moec/Driver/Pipeline.h"
#include "moec/Frontend/MLIRGen.h"
#include "moec/Frontend/ReadSpec.h"
#include "moec/Frontend/Sema.h"
#include "moec/Target/BundleEmitter.h"
#include "moec/Transforms/Passes.h"
#include "moec/support/GpuArch.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"

#include <cmath>
#include <optional>

using namespace mlir;

namespace moec::driver {

void loadDialects(MLIRContext *context) {
  context->loadDialect<moe::MoeDialect, func::FuncDialect,
                       arith::ArithDialect>();
}

OwningOpRef<ModuleOp> buildModule(llvm::SourceMgr &sourceMgr,
                                  MLIRContext *context,
                                  llvm::StringRef directory,
                                  const FrontendOptions &options) {
  loadDialects(context);
  std::optional<frontend::SpecFile> file =
      frontend::parseSpec(sourceMgr, context);
  if (!file)
    return nullptr;
  std::optional<frontend::Spec> spec =
      frontend::analyzeSpec(*file, sourceMgr, context, directory);
  if (!spec)
    return nullptr;
  if (!options.dtype.empty()) {
    if (options.dtype != "f32" && options.dtype != "f64" &&
        options.dtype != "bf16") {
      emitError(UnknownLoc::get(context))
          << "unknown dtype '" << options.dtype << "' (f32, f64 or bf16)";
      return nullptr;
    }
    spec->model.dtype = options.dtype;
  }
  if (!options.f32Matmul.empty()) {
    if (options.f32Matmul != "fp32" && options.f32Matmul != "tf32" &&
        options.f32Matmul != "tf32x3") {
      emitError(UnknownLoc::get(context))
          << "unknown f32_matmul '" << options.f32Matmul
          << "' (fp32, tf32 or tf32x3)";
      return nullptr;
    }
    spec->model.f32Matmul = options.f32Matmul;
  }
  // After the overrides, which may come from the command line. bf16 GEMMs
  // run on the tensor cores already, and f64 ones must stay f64.
  if (spec->model.f32Matmul != "fp32" && spec->model.dtype != "f32") {
    emitError(UnknownLoc::get(context))
        << "f32_matmul = " << spec->model.f32Matmul
        << " applies to f32 models, and this model's dtype is "
        << spec->model.dtype << " (drop f32_matmul, or use dtype f32)";
    return nullptr;
  }
  OwningOpRef<ModuleOp> module =
      frontend::generateModule(*spec, context, sourceMgr);
  if (!module || failed(verify(*module)))
    return nullptr;
  return module;
}

void buildPlanPipeline(OpPassManager &pm, llvm::StringRef arch) {
  pm.addPass(moe::createMoeInferShapes());
  pm.addPass(moe::createMoeBuildBackward());
  pm.addPass(moe::createMoeBuildTrainStep());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(moe::createMoeFuseKernels());
  moe::MoeTileKernelsOptions tiles;
  tiles.arch = arch.str();
  pm.addPass(moe::createMoeTileKernels(tiles));
  pm.addPass(moe::createMoeLowerToPlan());
}

llvm::Expected<std::string> tileArchitecture(llvm::StringRef arch) {
  if (std::optional<std::string> family = support::tileFamily(arch))
    return *family;
  return llvm::createStringError(support::unsupportedArchMessage(arch));
}

namespace {

/// The JSON path of the first non-finite number in `value`, if any: JSON has
/// no spelling for infinity or NaN, so the bundle must never hold one.
std::optional<std::string> nonFiniteField(const llvm::json::Value &value,
                                          const std::string &path) {
  if (std::optional<double> d = value.getAsNumber())
    return std::isfinite(*d) ? std::nullopt : std::optional(path);
  if (const llvm::json::Object *object = value.getAsObject()) {
    for (const auto &[key, field] : *object)
      if (auto found = nonFiniteField(
              field, path.empty() ? key.str() : path + "." + key.str()))
        return found;
  } else if (const llvm::json::Array *array = value.getAsArray()) {
    for (auto [i, element] : llvm::enumerate(*array))
      if (auto found =
              nonFiniteField(element, path + "[" + std::to_string(i) + "]"))
        return found;
  }
  return std::nullopt;
}

} // namespace

FailureOr<llvm::json::Object> compileToBundle(ModuleOp module,
                                              llvm::StringRef arch,
                                              std::string *cudaSkipped) {
  llvm::Expected<std::string> tiles = tileArchitecture(arch);
  if (!tiles) {
    emitError(UnknownLoc::get(module.getContext()))
        << llvm::toString(tiles.takeError());
    return failure();
  }
  PassManager pm(module.getContext());
  buildPlanPipeline(pm, *tiles);
  if (failed(pm.run(module)))
    return failure();
  moe::BundleOptions options;
  options.arch = arch.str();
  FailureOr<llvm::json::Object> bundle =
      moe::buildBundle(module, options, cudaSkipped);
  if (failed(bundle))
    return failure();
  llvm::json::Value whole(std::move(*bundle));
  if (std::optional<std::string> field = nonFiniteField(whole, "")) {
    emitError(module.getLoc())
        << "the bundle would hold a non-finite number at '" << *field
        << "'; a setting or a value computed from the settings overflowed";
    return failure();
  }
  return std::move(*whole.getAsObject());
}

} // namespace moec::driver
