//===- moec-opt.cpp - moe pass driver -------------------------------------===//
//
// mlir-opt for moe programs: parses the moe, func and arith dialects and runs
// the moe passes plus the upstream canonicalize/cse passes.
//
//===----------------------------------------------------------------------===//

#include "moec/Transforms/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::moe::registerMoePasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();

  mlir::DialectRegistry registry;
  registry.insert<mlir::moe::MoeDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "moe optimizer driver\n", registry));
}
