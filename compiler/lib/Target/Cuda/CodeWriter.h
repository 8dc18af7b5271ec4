//===- CodeWriter.h - deterministic CUDA text -------------------*- C++ -*-===//

#ifndef MOEC_TARGET_CUDA_CODEWRITER_H
#define MOEC_TARGET_CUDA_CODEWRITER_H

#include "mlir/IR/Types.h"
#include "llvm/ADT/Twine.h"
#include <initializer_list>
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

/// One named value of a code template: `${name}` becomes `text`.
struct Subst {
  Subst(llvm::StringRef name, llvm::StringRef text)
      : name(name), text(text.str()) {}
  Subst(llvm::StringRef name, const std::string &text)
      : name(name), text(text) {}
  Subst(llvm::StringRef name, const char *text) : name(name), text(text) {}
  Subst(llvm::StringRef name, int64_t value)
      : name(name), text(std::to_string(value)) {}
  Subst(llvm::StringRef name, bool value)
      : name(name), text(value ? "true" : "false") {}
  llvm::StringRef name;
  std::string text;
};

/// `templ` with every `${name}` replaced by its value: long device calls
/// read as what they pass, not as positions. A placeholder without a value,
/// or a value that no placeholder uses, is an internal error.
std::string fill(llvm::StringRef templ, std::initializer_list<Subst> values);

/// A float literal that reads back to exactly `v` as a float ("0.5f",
/// "1.00000005e-07f"); infinities as CUDART-free expressions.
std::string floatLiteral(double v);
/// A double literal that reads back to exactly `v`.
std::string doubleLiteral(double v);
/// The CUDA spelling of an element type (float, double, int32_t, int64_t).
std::string cudaType(Type type);

} // namespace mlir::moe::cuda

#endif // MOEC_TARGET_CUDA_CODEWRITER_H
