//===- SpecFuzzer.cpp - the .moe parser and Sema on any bytes -------------===//
//
// The input is a spec file: it is parsed, evaluated and checked, as
// `moec check` does before building MLIR. Diagnostics are an expected
// outcome and are dropped; a crash, a sanitizer report or an exception is a
// finding.
//
//===----------------------------------------------------------------------===//

#include "moec/Frontend/ReadSpec.h"
#include "moec/Frontend/Sema.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <cstdint>

using namespace moec::frontend;

namespace {

/// Relative data and tokenizer paths resolve under a directory that does
/// not exist, so no input reaches a real file through one.
constexpr const char *kSpecDirectory = "/nonexistent/moec-fuzz";

/// One context for every run: creating one costs more than most inputs.
mlir::MLIRContext &context() {
  static mlir::MLIRContext *context = [] {
    auto *c = new mlir::MLIRContext(mlir::MLIRContext::Threading::DISABLED);
    c->getDiagEngine().registerHandler(
        [](mlir::Diagnostic &) { return mlir::success(); });
    return c;
  }();
  return *context;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(reinterpret_cast<const char *>(data), size),
          "fuzz.moe"),
      llvm::SMLoc());
  std::optional<SpecFile> file = parseSpec(sourceMgr, &context());
  if (file)
    (void)analyzeSpec(*file, sourceMgr, &context(), kSpecDirectory);
  return 0;
}
