//===- Pipeline.h - the compiler's stages -----------------------*- C++ -*-===//

#ifndef MOEC_DRIVER_PIPELINE_H
#define MOEC_DRIVER_PIPELINE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SourceMgr.h"

namespace moec::driver {

struct FrontendOptions {
  /// Overrides the model dtype ("f32"/"f64") when not empty.
  std::string dtype;
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

/// Runs the plan pipeline and serialises the bundle, with CUDA kernels for
/// `arch` when code generation succeeds; otherwise `cudaSkipped` says why.
mlir::FailureOr<llvm::json::Object>
compileToBundle(mlir::ModuleOp module, llvm::StringRef arch = "sm_80",
                std::string *cudaSkipped = nullptr);

/// Registers the dialects moec programs use.
void loadDialects(mlir::MLIRContext *context);

} // namespace moec::driver

#endif // MOEC_DRIVER_PIPELINE_H
