//===- Compile.cpp - moec compile -----------------------------------------===//

#include "Commands.h"
#include "moec/Driver/Pipeline.h"
#include "moec/Cuda.h"
#include "moec/Error.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

namespace {
enum class Emit { Mlir, Plan, Bundle, Cuda, Ptx };
} // namespace

static cl::SubCommand compileCommand("compile",
                                     "Compile a .moe file to a bundle");
static cl::opt<std::string> input(cl::Positional, cl::Required,
                                  cl::desc("<file.moe>"),
                                  cl::sub(compileCommand));
static cl::opt<std::string> output("o", cl::desc("Output file (default: "
                                                 "stdout)"),
                                   cl::value_desc("file"), cl::init("-"),
                                   cl::sub(compileCommand));
static cl::opt<Emit> emit(
    "emit", cl::desc("What to write"), cl::init(Emit::Bundle),
    cl::values(clEnumValN(Emit::Mlir, "mlir",
                          "the moe dialect module the frontend builds"),
               clEnumValN(Emit::Plan, "plan",
                          "the module after the plan pipeline (MLIR)"),
               clEnumValN(Emit::Bundle, "bundle",
                          "the bundle the runtime loads (JSON)"),
               clEnumValN(Emit::Cuda, "cuda",
                          "the device library and every generated kernel "
                          "as one CUDA C++ file"),
               clEnumValN(Emit::Ptx, "ptx",
                          "every generated kernel as one PTX module for "
                          "--arch (needs NVRTC)")),
    cl::sub(compileCommand));
static moec::driver::DtypeOption dtype(compileCommand);

static cl::opt<std::string> arch("arch",
                                 cl::desc("GPU architecture the kernels are "
                                          "for: sm_80 (default), sm_86, "
                                          "sm_89, sm_90, ..."),
                                 cl::init("sm_80"), cl::sub(compileCommand));

bool moec::driver::isCompileCommand() {
  return static_cast<bool>(compileCommand);
}

int moec::driver::runCompile() {
  auto buffer = llvm::MemoryBuffer::getFile(input, /*IsText=*/true);
  if (std::error_code ec = buffer.getError()) {
    llvm::errs() << "moec: error: cannot read '" << input
                 << "': " << ec.message() << "\n";
    return 1;
  }
  if (llvm::Expected<std::string> tiles = tileArchitecture(arch); !tiles) {
    llvm::errs() << "moec: error: " << llvm::toString(tiles.takeError())
                 << "\n";
    return 1;
  }
  if (!dtype.empty() && dtype != "f32" && dtype != "f64" && dtype != "bf16") {
    llvm::errs() << "moec: error: --dtype must be f32, f64 or bf16, got '"
                 << dtype << "'\n";
    return 1;
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  mlir::MLIRContext context;
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  llvm::SmallString<256> directory(input.getValue());
  llvm::sys::path::remove_filename(directory);
  if (directory.empty())
    directory = ".";
  FrontendOptions options;
  options.dtype = dtype;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      buildModule(sourceMgr, &context, directory, options);
  if (!module)
    return 1;

  std::string text;
  llvm::raw_string_ostream os(text);
  if (emit == Emit::Mlir) {
    module->print(os);
  } else if (emit == Emit::Plan) {
    mlir::PassManager pm(&context);
    buildPlanPipeline(pm);
    if (mlir::failed(pm.run(*module)))
      return 1;
    module->print(os);
  } else {
    std::string cudaSkipped;
    mlir::FailureOr<llvm::json::Object> bundle =
        compileToBundle(*module, arch, &cudaSkipped);
    if (mlir::failed(bundle))
      return 1;
    std::string json;
    llvm::raw_string_ostream(json)
        << llvm::formatv("{0:1}", llvm::json::Value(std::move(*bundle)))
        << "\n";
    // Validate what we are about to hand out with the runtime's reader.
    moec::Bundle parsed = moec::Bundle::parse(json, input);
    if (emit == Emit::Bundle) {
      os << json;
      if (!cudaSkipped.empty())
        llvm::errs() << "moec: warning: no CUDA kernels for this model, so "
                        "only --device cpu runs it: "
                     << cudaSkipped << "\n";
    } else if (!cudaSkipped.empty()) {
      llvm::errs() << "moec: error: no CUDA code for this model: "
                   << cudaSkipped << "\n";
      return 1;
    } else if (emit == Emit::Cuda) {
      os << moec::cudaTranslationUnit(parsed);
    } else {
      os << moec::cudaPtx(parsed, arch);
    }
  }

  // writeToOutput writes a temporary and renames it: an interrupted compile
  // never leaves a half-written bundle behind.
  if (llvm::Error error = llvm::writeToOutput(
          output, [&](llvm::raw_ostream &os) -> llvm::Error {
            os << text;
            return llvm::Error::success();
          })) {
    llvm::errs() << "moec: error: cannot write '" << output
                 << "': " << llvm::toString(std::move(error)) << "\n";
    return 1;
  }
  return 0;
}
