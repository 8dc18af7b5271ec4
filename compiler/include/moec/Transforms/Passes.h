//===- Passes.h - moe compiler passes --------------------------*- C++ -*-===//

#ifndef MOEC_TRANSFORMS_PASSES_H
#define MOEC_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "moe/IR/MoeDialect.h"

namespace mlir::moe {

#define GEN_PASS_DECL
#include "moec/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "moec/Transforms/Passes.h.inc"

} // namespace mlir::moe

#endif // MOEC_TRANSFORMS_PASSES_H
