//===- Pipeline.h - the compiler's stages -----------------------*- C++ -*-===//

#ifndef MOEC_DRIVER_PIPELINE_H
#define MOEC_DRIVER_PIPELINE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SourceMgr.h"

namespace moec::driver {

struct FrontendOptions {
  /// Overrides the model dtype ("f32"/"f64"/"bf16") when not empty.
  std::string dtype;
  /// Overrides the model's f32_matmul ("fp32"/"tf32"/"tf32x3") when not
  /// empty.
  std::string f32Matmul;
};

/// Parses, checks and lowers the main buffer of `sourceMgr` (a .moe file) to
/// the moe dialect. Diagnostics go to `context`'s handler; returns null on
/// any error. Relative data paths resolve against `directory`.
mlir::OwningOpRef<mlir::ModuleOp>
buildModule(llvm::SourceMgr &sourceMgr, mlir::MLIRContext *context,
            llvm::StringRef directory, const FrontendOptions &options = {});

/// The passes from the frontend's module to the execution plan:
/// moe-infer-shapes, moe-build-backward, moe-build-train-step, canonicalize,
/// cse, moe-fuse-kernels, moe-tile-kernels (for `arch`), moe-lower-to-plan.
void buildPlanPipeline(mlir::OpPassManager &pm,
                       llvm::StringRef arch = "sm_80");

/// Runs the plan pipeline and serialises the bundle, with CUDA kernels tiled
/// for `arch` (any sm_80 or newer, see tileArchitecture) when code
/// generation succeeds; otherwise `cudaSkipped` says why.
mlir::FailureOr<llvm::json::Object>
compileToBundle(mlir::ModuleOp module, llvm::StringRef arch = "sm_80",
                std::string *cudaSkipped = nullptr);

/// The tile family of a GPU architecture: "sm_80" for sm_80 up to sm_89
/// (Ampere, Ada), "sm_90" from sm_90 on (Hopper and newer). Fails with a
/// message for anything else.
llvm::Expected<std::string> tileArchitecture(llvm::StringRef arch);

/// Registers the dialects moec programs use.
void loadDialects(mlir::MLIRContext *context);

} // namespace moec::driver

#endif // MOEC_DRIVER_PIPELINE_H
