//===- main.cpp - the moec driver -----------------------------------------===//
//
// moec check | compile | train | run | check-kernels | precompile: one binary that links the compiler and
// the runtime. Every failure ends in located diagnostics or one
// `moec: error: ...` line, and exit code 1; a crash is a bug.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "moec/Compiler.h"
#include "moec/Error.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

namespace moec::driver {

Bundle loadModel(const std::string &path, const std::string &dtype,
                 const std::string &arch) {
  // A .moe file is a spec; anything else must be a bundle.
  if (llvm::StringRef(path).ends_with(".moe")) {
    CompileOptions options;
    options.dtype = dtype;
    options.arch = arch;
    return compileFile(path, options);
  }
  if (!dtype.empty())
    throw Error(path + ": --dtype applies to .moe specs, not to compiled "
                       "bundles");
  return Bundle::load(path);
}

} // namespace moec::driver

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::ParseCommandLineOptions(
      argc, argv,
      "moec: compile and run sparse mixture-of-experts models\n\n"
      "  moec check FILE.moe              check a spec; exit 1 on any error\n"
      "  moec compile FILE.moe -o OUT     compile to a bundle (or --emit mlir)\n"
      "  moec train FILE [--save CKPT]    train on the spec's data\n"
      "  moec run FILE --weights CKPT     generate from a prompt\n"
      "  moec check-kernels FILE          compare the generated kernels (on\n"
      "                                   --device emu) with the cpu device\n"
      "  moec precompile FILE --arch sm_90  compile every kernel into the\n"
      "                                   kernel cache ahead of a GPU run\n");
  using namespace moec::driver;
  try {
    if (isCheckCommand())
      return runCheck();
    if (isCompileCommand())
      return runCompile();
    if (isTrainCommand())
      return runTrain();
    if (isRunCommand())
      return runRun();
    if (isCheckKernelsCommand())
      return runCheckKernels();
    if (isPrecompileCommand())
      return runPrecompile();
  } catch (const moec::Error &e) {
    std::string message = e.what();
    // Compiler diagnostics arrive formatted; everything else gets a prefix.
    if (message.find(": error: ") != std::string::npos)
      llvm::errs() << message;
    else
      llvm::errs() << "moec: error: " << message << "\n";
    return 1;
  } catch (const std::bad_alloc &) {
    llvm::errs() << "moec: error: out of memory\n";
    return 1;
  }
  llvm::errs() << "moec: error: no command given (try `moec --help`)\n";
  return 1;
}
