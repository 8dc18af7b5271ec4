//===- Check.cpp - moec check ---------------------------------------------===//

#include "Commands.h"
#include "moec/Compiler.h"
#include "moec/Driver/Pipeline.h"
#include "moec/Error.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <iostream>

namespace moec::driver {
namespace {

class CheckCommand : public cli::Command {
public:
  CheckCommand()
      : Command("check", "Check a .moe file through the whole compiler; exit "
                         "1 on any error.") {
    positional("FILE.moe", "the spec ('-' reads standard input)", input);
    flag("verify-diagnostics",
         "Check the diagnostics against the expected-error comments in the "
         "file (for tests)",
         verifyDiagnostics);
  }

  int run() override;

private:
  /// Runs every stage up to the bundle; failures report through
  /// diagnostics.
  bool checkAll(llvm::SourceMgr &sourceMgr, mlir::MLIRContext &context);

  std::string input;
  bool verifyDiagnostics = false;
};

bool CheckCommand::checkAll(llvm::SourceMgr &sourceMgr,
                            mlir::MLIRContext &context) {
  llvm::SmallString<256> directory(input);
  llvm::sys::path::remove_filename(directory);
  if (directory.empty())
    directory = ".";
  mlir::OwningOpRef<mlir::ModuleOp> module =
      buildModule(sourceMgr, &context, directory);
  return module && mlir::succeeded(compileToBundle(*module));
}

int CheckCommand::run() {
  std::unique_ptr<llvm::MemoryBuffer> buffer;
  if (input == "-") {
    auto stdinBuffer = llvm::MemoryBuffer::getSTDIN();
    if (std::error_code ec = stdinBuffer.getError())
      throw Error("cannot read standard input: " + ec.message());
    buffer = std::move(*stdinBuffer);
  } else {
    buffer = llvm::MemoryBuffer::getMemBufferCopy(readSpecFile(input), input);
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  mlir::MLIRContext context;
  if (verifyDiagnostics) {
    mlir::SourceMgrDiagnosticVerifierHandler handler(sourceMgr, &context);
    (void)checkAll(sourceMgr, context);
    return mlir::failed(handler.verify()) ? 1 : 0;
  }
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  if (!checkAll(sourceMgr, context))
    return 1;
  std::cout << input << ": ok\n";
  return 0;
}

} // namespace

std::unique_ptr<cli::Command> makeCheckCommand() {
  return std::make_unique<CheckCommand>();
}

} // namespace moec::driver
