//===- CodeWriter.h - deterministic CUDA text -------------------*- C++ -*-===//

#ifndef MOEC_TARGET_CUDA_CODEWRITER_H
#define MOEC_TARGET_CUDA_CODEWRITER_H

#include "mlir/IR/Types.h"
#include "llvm/ADT/Twine.h"
#include <string>

namespace mlir::moe::cuda {

/// Lines of source with two-space indentation.
class CodeWriter {
public:
  CodeWriter &line(const llvm::Twine &text = "");
  void indent() { ++depth; }
  void dedent() { --depth; }
  /// `head {` ... `}` around the lines written while it lives.
  class Scope {
  public:
    Scope(CodeWriter &writer, const llvm::Twine &head, llvm::StringRef tail = "}");
    ~Scope();

  private:
    CodeWriter &writer;
    std::string tail;
  };
  const std::string &str() const { return text; }

private:
  std::string text;
  int depth = 0;
};

/// A float literal that reads back to exactly `v` as a float ("0.5f",
/// "1.00000005e-07f"); infinities as CUDART-free expressions.
std::string floatLiteral(double v);
/// A double literal that reads back to exactly `v`.
std::string doubleLiteral(double v);
/// The CUDA spelling of an element type (float, double, int32_t, int64_t).
std::string cudaType(Type type);

} // namespace mlir::moe::cuda

#endif // MOEC_TARGET_CUDA_CODEWRITER_H
