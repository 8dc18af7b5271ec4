//===- Compiler.h - .moe text to a bundle, in one call ----------*- C++ -*-===//
//
// The embedding API of the compiler: a program that links it (and the
// runtime) goes from model text to a running Session in one process. No
// MLIR type appears here; failures are moec::Error with every diagnostic.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_COMPILER_H
#define MOEC_COMPILER_H

#include "moec/Bundle.h"

#include <string>

namespace moec {

struct CompileOptions {
  /// Overrides the model's dtype ("f32", "f64" or "bf16"); empty keeps the
  /// spec's.
  std::string dtype;
  /// Overrides the model's f32_matmul ("fp32", "tf32" or "tf32x3"); empty
  /// keeps the spec's.
  std::string f32Matmul;
  /// The GPU architecture the kernels are tiled for: sm_80 or newer (tiles
  /// follow the family: sm_80 for Ampere and Ada, sm_90 for Hopper).
  std::string arch = "sm_80";
};

/// The text of the .moe file at `path`. Throws moec::Error naming it when it
/// cannot be read, is not a regular file (a FIFO is refused, never waited
/// on) or is larger than 16 MiB.
std::string readSpecFile(const std::string &path);

/// Compiles the .moe file at `path`. Throws moec::Error whose message holds
/// every diagnostic (`file:line:col: error: ...` with the source line).
Bundle compileFile(const std::string &path, const CompileOptions &options = {});

/// Compiles .moe text; `name` stands for the file in diagnostics and
/// relative data paths resolve against `directory`.
Bundle compileSource(const std::string &source, const std::string &name,
                     const std::string &directory = ".",
                     const CompileOptions &options = {});

/// Compiles a module of the moe dialect as text (what `moec compile --emit
/// mlir` prints, or a program written by hand): the same passes and bundle
/// as for a spec, from the module's own settings (options.dtype must be
/// empty: the module's types are its dtype). `name` stands for the text in
/// diagnostics.
Bundle compileModuleSource(const std::string &source, const std::string &name,
                           const CompileOptions &options = {});

} // namespace moec

#endif // MOEC_COMPILER_H
