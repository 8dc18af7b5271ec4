//===- moec-translate.cpp - planned moe modules to CUDA and bundles -------===//
//
// mlir-translate for moe programs, for lit tests of the emitters:
//   --moe-to-cuda    the generated kernels of every planned entry function
//                    and their launches (without the device library)
//   --moe-to-bundle  the bundle JSON
// The input must have been through moe-fuse-kernels, moe-tile-kernels and
// moe-lower-to-plan (moe-to-bundle needs only the last).
//
//===----------------------------------------------------------------------===//

#include "moec/Target/BundleEmitter.h"
#include "moec/Target/CudaEmitter.h"
#include "moe/IR/MoeDialect.h"
#include "moe/IR/MoeOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

static void registerDialects(DialectRegistry &registry) {
  registry.insert<moe::MoeDialect, func::FuncDialect, arith::ArithDialect>();
}

static std::string gridText(const moe::cuda::GridDim &d) {
  std::string s = d.perBlock == 1 ? d.extent.str()
                                  : "ceil(" + d.extent.str() + "/" +
                                        std::to_string(d.perBlock) + ")";
  if (d.extra)
    s += "+" + std::to_string(d.extra);
  return s;
}

static LogicalResult toCuda(ModuleOp module, llvm::raw_ostream &os) {
  for (auto func : module.getOps<func::FuncOp>()) {
    auto entry = func->getAttrOfType<StringAttr>(moe::attrs::kEntry);
    if (!entry)
      continue;
    moe::cuda::KernelTable kernels;
    FailureOr<moe::cuda::ProgramCode> code =
        moe::cuda::emitProgram(func, entry.getValue(), kernels);
    if (failed(code))
      return failure();
    os << "// ===== program " << entry.getValue() << "\n";
    for (const moe::cuda::Kernel &k : kernels.kernels())
      os << k.source << "\n";
    for (const moe::cuda::GroupCode &g : code->groups)
      for (const moe::cuda::Launch &l : g.launches) {
        os << "// launch " << l.kernel << " grid(" << gridText(l.grid[0])
           << ", " << gridText(l.grid[1]) << ", " << gridText(l.grid[2])
           << ") block(" << l.block[0] << ") smem " << l.sharedBytes
           << " buffers(";
        llvm::interleaveComma(l.buffers, os);
        os << ") scalars(";
        llvm::interleaveComma(l.scalars, os,
                              [&](const moe::SymDim &d) { os << d.str(); });
        os << ")\n";
      }
    for (auto [i, s] : llvm::enumerate(code->scratch))
      os << "// scratch " << i << ": " << s.elementType << " "
         << moe::shapeStr(s.shape) << "\n";
  }
  return success();
}

static LogicalResult toBundle(ModuleOp module, llvm::raw_ostream &os) {
  std::string skipped;
  FailureOr<llvm::json::Object> bundle =
      moe::buildBundle(module, moe::BundleOptions(), &skipped);
  if (failed(bundle))
    return failure();
  os << llvm::formatv("{0:1}", llvm::json::Value(std::move(*bundle))) << "\n";
  return success();
}

int main(int argc, char **argv) {
  TranslateFromMLIRRegistration cuda("moe-to-cuda",
                                     "generated CUDA kernels and launches",
                                     toCuda, registerDialects);
  TranslateFromMLIRRegistration bundle("moe-to-bundle", "the bundle JSON",
                                       toBundle, registerDialects);
  return failed(mlirTranslateMain(argc, argv, "moe translation driver"));
}
