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
#include <vector>

using namespace moec::frontend;

namespace {

/// Relative data and tokenizer paths resolve under a directory that does
/// not exist, so no input reaches a real file through one.
constexpr const char *kSpecDirectory = "/nonexistent/moec-fuzz";

/// Sema checks every block a `repeat` unrolls, and an error repeated in
/// each of them costs a few microseconds (ten times that under ASan) even
/// though it is printed once: 100000 blocks take a second, a million the
/// evaluator allows take ten. Bigger specs are parsed and evaluated but
/// not checked here, or such inputs would time out all the time.
constexpr size_t kMaxNodesForSema = 10000;

size_t countNodes(const std::vector<SpecNode> &nodes) {
  size_t count = nodes.size();
  for (const SpecNode &node : nodes)
    count += countNodes(node.children);
  return count;
}

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
  if (file && countNodes(file->sections) <= kMaxNodesForSema)
    (void)analyzeSpec(*file, sourceMgr, &context(), kSpecDirectory);
  return 0;
}
