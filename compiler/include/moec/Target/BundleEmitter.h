//===- BundleEmitter.h - planned module -> bundle JSON ----------*- C++ -*-===//

#ifndef MOEC_TARGET_BUNDLEEMITTER_H
#define MOEC_TARGET_BUNDLEEMITTER_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"

namespace mlir::moe {

/// The bundle format version this compiler writes.
inline constexpr int64_t kBundleVersion = 2;

struct BundleOptions {
  /// Generate CUDA kernels for the fused groups (needs moe-fuse-kernels and
  /// moe-tile-kernels to have run). When generation fails the bundle is
  /// still written, cpu-only, and `cudaSkipped` says why.
  bool cuda = true;
  std::string arch = "sm_80";
};

/// Builds the bundle of a module on which moe-lower-to-plan has run: the
/// model, training and data settings, the parameter and state tables, one
/// program per planned entry function and, with options.cuda, the generated
/// kernels and each program's launches. Fails with a diagnostic when the
/// module is not planned.
FailureOr<llvm::json::Object> buildBundle(ModuleOp module,
                                          const BundleOptions &options = {},
                                          std::string *cudaSkipped = nullptr);

/// The JSON value of an attribute as the runtime reads it: numbers, strings,
/// enum names, `true` for unit attributes, arrays, objects.
llvm::json::Value attributeToJson(Attribute attr);

} // namespace mlir::moe

#endif // MOEC_TARGET_BUNDLEEMITTER_H
