//===- Compiler.cpp - .moe text to a bundle, in one call ------------------===//
//
// Compiled with exceptions (unlike the MLIR libraries it calls): the MLIR
// side reports through diagnostics, which this file gathers into one
// moec::Error at the API boundary.
//
//===----------------------------------------------------------------------===//

#include "moec/Compiler.h"
#include "moec/Driver/Pipeline.h"
#include "moec/Error.h"
#include "moec/Files.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace moec {

Bundle compileSource(const std::string &source, const std::string &name,
                     const std::string &directory,
                     const CompileOptions &options) {
  if (llvm::Expected<std::string> tiles =
          driver::tileArchitecture(options.arch);
      !tiles)
    throw Error(llvm::toString(tiles.takeError()));
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(source, name), llvm::SMLoc());
  mlir::MLIRContext context;
  std::string diagnostics;
  llvm::raw_string_ostream os(diagnostics);
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context, os);
  driver::FrontendOptions frontendOptions;
  frontendOptions.dtype = options.dtype;
  frontendOptions.f32Matmul = options.f32Matmul;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      driver::buildModule(sourceMgr, &context, directory, frontendOptions);
  if (!module)
    throw Error(diagnostics.empty() ? name + ": compilation failed"
                                    : diagnostics);
  mlir::FailureOr<llvm::json::Object> bundle = driver::compileToBundle(*module, options.arch);
  if (mlir::failed(bundle))
    throw Error(diagnostics.empty() ? name + ": compilation failed"
                                    : diagnostics);
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(std::move(*bundle));
  return Bundle::parse(text, name);
}

Bundle compileModuleSource(const std::string &source, const std::string &name,
                           const CompileOptions &options) {
  if (!options.dtype.empty())
    throw Error(name + ": a module's dtype is in its types; compile it "
                       "without a dtype");
  if (!options.f32Matmul.empty())
    throw Error(name + ": a module's f32_matmul is in its moe.model "
                       "attribute; compile it without f32Matmul");
  if (llvm::Expected<std::string> tiles =
          driver::tileArchitecture(options.arch);
      !tiles)
    throw Error(llvm::toString(tiles.takeError()));
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(source, name), llvm::SMLoc());
  mlir::MLIRContext context;
  driver::loadDialects(&context);
  std::string diagnostics;
  llvm::raw_string_ostream os(diagnostics);
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context, os);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  auto fail = [&] {
    return Error(diagnostics.empty() ? name + ": compilation failed"
                                     : diagnostics);
  };
  if (!module || mlir::failed(mlir::verify(*module)))
    throw fail();
  mlir::FailureOr<llvm::json::Object> bundle =
      driver::compileToBundle(*module, options.arch);
  if (mlir::failed(bundle))
    throw fail();
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(std::move(*bundle));
  return Bundle::parse(text, name);
}

std::string readSpecFile(const std::string &path) {
  constexpr size_t kMaxSpecBytes = size_t(16) << 20;
  return readRegularFile(path, kMaxSpecBytes);
}

Bundle compileFile(const std::string &path, const CompileOptions &options) {
  std::string source = readSpecFile(path);
  llvm::SmallString<256> directory(path);
  llvm::sys::path::remove_filename(directory);
  if (directory.empty())
    directory = ".";
  return compileSource(source, path, std::string(directory), options);
}

} // namespace moec
