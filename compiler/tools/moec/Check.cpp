//===- Check.cpp - moec check ---------------------------------------------===//

#include "Commands.h"
#include "moec/Driver/Pipeline.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

static cl::SubCommand checkCommand(
    "check", "Check a .moe file through the whole compiler; exit 1 on any "
             "error");
static cl::opt<std::string> input(cl::Positional, cl::Required,
                                  cl::desc("<file.moe>"),
                                  cl::sub(checkCommand));
static cl::opt<bool> verifyDiagnostics(
    "verify-diagnostics",
    cl::desc("Check the diagnostics against the expected-error comments in "
             "the file (for tests)"),
    cl::sub(checkCommand));

bool moec::driver::isCheckCommand() {
  return static_cast<bool>(checkCommand);
}

/// Runs every stage up to the bundle; failures report through diagnostics.
static bool checkAll(llvm::SourceMgr &sourceMgr, mlir::MLIRContext &context) {
  llvm::SmallString<256> directory(input.getValue());
  llvm::sys::path::remove_filename(directory);
  if (directory.empty())
    directory = ".";
  mlir::OwningOpRef<mlir::ModuleOp> module =
      moec::driver::buildModule(sourceMgr, &context, directory);
  return module && mlir::succeeded(moec::driver::compileToBundle(*module));
}

int moec::driver::runCheck() {
  auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(input);
  if (std::error_code ec = buffer.getError()) {
    llvm::errs() << "moec: error: cannot read '" << input
                 << "': " << ec.message() << "\n";
    return 1;
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  mlir::MLIRContext context;
  if (verifyDiagnostics) {
    mlir::SourceMgrDiagnosticVerifierHandler handler(sourceMgr, &context);
    (void)checkAll(sourceMgr, context);
    return mlir::failed(handler.verify()) ? 1 : 0;
  }
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  if (!checkAll(sourceMgr, context))
    return 1;
  llvm::outs() << input << ": ok\n";
  return 0;
}
