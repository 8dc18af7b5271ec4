//===- Compile.cpp - moec compile -----------------------------------------===//

#include "Commands.h"
#include "moec/Compiler.h"
#include "moec/CostModel.h"
#include "moec/Cuda.h"
#include "moec/Driver/Pipeline.h"
#include "moec/Error.h"
#include "moec/Files.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <iostream>

namespace moec::driver {
namespace {

class CompileCommand : public cli::Command {
public:
  CompileCommand()
      : Command("compile", "Compile a .moe file to a bundle (or to MLIR, the "
                           "plan, CUDA or PTX with --emit).") {
    positional("FILE.moe", "the spec", input);
    option("o", "FILE", "Output file (default: standard output)", output)
        .nonEmpty();
    option("emit", "WHAT",
           "bundle (default): the JSON bundle the runtime loads; mlir: the "
           "moe-dialect module; plan: the module after the plan pipeline; "
           "cuda: the device library and every kernel as one .cu file; ptx: "
           "every kernel as one PTX module for --arch (needs NVRTC)",
           emit)
        .oneOf({"bundle", "mlir", "plan", "cuda", "ptx"});
    option("dtype", "DTYPE", "Override the spec's dtype (f32, f64, bf16)",
           dtype)
        .oneOf(dtypeChoices());
    option("f32-matmul", "MODE", kF32MatmulHelp, f32Matmul)
        .oneOf(f32MatmulChoices());
    option("arch", "sm_XY",
           "GPU architecture the kernels are for: sm_80 (default), sm_86, "
           "sm_89, sm_90, ...",
           arch);
    flag("report",
         "Print the cost model of the plan (per kernel FLOPs, bytes moved, "
         "bound and H100 time; per program the totals against an op-by-op "
         "plan) at the training batch and sequence length. With -o the "
         "bundle is written too; without, only the report is printed",
         report);
  }

  int run() override;

private:
  /// The text --emit asks for, or nullopt after diagnostics.
  std::optional<std::string> emitText(mlir::ModuleOp module,
                                      mlir::MLIRContext &context);

  std::string input, output = "-", emit = "bundle", dtype, f32Matmul,
      arch = "sm_80";
  bool report = false;
  /// The cost report of the bundle, filled by emitText under --report.
  std::string reportText;
};

std::optional<std::string> CompileCommand::emitText(mlir::ModuleOp module,
                                                    mlir::MLIRContext &context) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (emit == "mlir") {
    module.print(os);
    return text;
  }
  if (emit == "plan") {
    mlir::PassManager pm(&context);
    buildPlanPipeline(pm);
    if (mlir::failed(pm.run(module)))
      return std::nullopt;
    module.print(os);
    return text;
  }
  std::string cudaSkipped;
  mlir::FailureOr<llvm::json::Object> bundle =
      compileToBundle(module, arch, &cudaSkipped);
  if (mlir::failed(bundle))
    return std::nullopt;
  std::string json;
  llvm::raw_string_ostream(json)
      << llvm::formatv("{0:1}", llvm::json::Value(std::move(*bundle))) << "\n";
  // Validate what we are about to hand out with the runtime's reader.
  Bundle parsed = Bundle::parse(json, input);
  if (report) {
    if (!cudaSkipped.empty())
      throw Error("--report costs the CUDA plan, and this model has none: " +
                  cudaSkipped);
    std::string program =
        parsed.hasProgram("train_step") ? "train_step" : "forward";
    reportText = costReport(parsed, program, defaultSizes(parsed));
  }
  if (emit == "bundle") {
    if (!cudaSkipped.empty())
      std::cerr << "moec: warning: no CUDA kernels for this model, so only "
                   "--device cpu runs it: "
                << cudaSkipped << "\n";
    return json;
  }
  if (!cudaSkipped.empty())
    throw Error("no CUDA code for this model: " + cudaSkipped);
  return emit == "cuda" ? cudaTranslationUnit(parsed) : cudaPtx(parsed, arch);
}

int CompileCommand::run() {
  checkOutputsAreDistinct({{"the spec", input}}, {{"-o", output}});
  if (report && emit != "bundle")
    throw Error("--report goes with the bundle, not with --emit " + emit);
  tileFamily(arch);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(readSpecFile(input), input),
      llvm::SMLoc());
  mlir::MLIRContext context;
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  llvm::SmallString<256> directory(input);
  llvm::sys::path::remove_filename(directory);
  if (directory.empty())
    directory = ".";
  FrontendOptions options;
  options.dtype = dtype;
  options.f32Matmul = f32Matmul;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      buildModule(sourceMgr, &context, directory, options);
  if (!module)
    return 1;
  std::optional<std::string> text = emitText(*module, context);
  if (!text)
    return 1;

  // A temporary renamed over the output: an interrupted or failed compile
  // never leaves a half-written bundle, nor loses the old one.
  if (output != "-")
    writeFile(output, *text);
  else if (!report)
    std::cout << *text << std::flush;
  if (report)
    std::cout << reportText << std::flush;
  return 0;
}

} // namespace

std::unique_ptr<cli::Command> makeCompileCommand() {
  return std::make_unique<CompileCommand>();
}

} // namespace moec::driver
