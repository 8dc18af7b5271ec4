//===- CodeWriter.cpp - deterministic CUDA text ---------------------------===//

#include "CodeWriter.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/ErrorHandling.h"
#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace mlir::moe::cuda;

CodeWriter &CodeWriter::line(const llvm::Twine &t) {
  std::string s = t.str();
  if (!s.empty())
    text.append(2 * depth, ' ');
  text += s;
  text += '\n';
  return *this;
}

CodeWriter::Scope::Scope(CodeWriter &writer, const llvm::Twine &head,
                         llvm::StringRef tail)
    : writer(writer), tail(tail.str()) {
  // An empty head opens a bare block.
  writer.line(head.isTriviallyEmpty() ? llvm::Twine("{") : head + " {");
  writer.indent();
}

CodeWriter::Scope::~Scope() {
  writer.dedent();
  writer.line(tail);
}

std::string mlir::moe::cuda::fill(llvm::StringRef templ,
                                  std::initializer_list<Subst> values) {
  std::string out;
  llvm::SmallVector<bool> used(values.size(), false);
  while (!templ.empty()) {
    size_t at = templ.find("${");
    out += templ.substr(0, at).str();
    if (at == llvm::StringRef::npos)
      break;
    size_t end = templ.find('}', at);
    if (end == llvm::StringRef::npos)
      llvm::report_fatal_error("code template: unclosed ${ in '" + templ + "'");
    llvm::StringRef name = templ.slice(at + 2, end);
    const Subst *found = nullptr;
    for (auto [i, v] : llvm::enumerate(values))
      if (v.name == name) {
        found = &v;
        used[i] = true;
      }
    if (!found)
      llvm::report_fatal_error("code template: no value for ${" + name + "}");
    out += found->text;
    templ = templ.drop_front(end + 1);
  }
  for (auto [i, v] : llvm::enumerate(values))
    if (!used[i])
      llvm::report_fatal_error("code template: ${" + v.name +
                               "} is never used");
  return out;
}

std::string mlir::moe::cuda::floatLiteral(double v) {
  float f = static_cast<float>(v);
  if (std::isinf(f))
    return f > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
  char buffer[48];
  std::snprintf(buffer, sizeof(buffer), "%.9g", static_cast<double>(f));
  std::string s = buffer;
  if (s.find_first_of(".en") == std::string::npos)
    s += ".0";
  return s + "f";
}

std::string mlir::moe::cuda::doubleLiteral(double v) {
  if (std::isinf(v))
    return v > 0 ? "__longlong_as_double(0x7ff0000000000000LL)"
                 : "__longlong_as_double(0xfff0000000000000LL)";
  char buffer[48];
  std::snprintf(buffer, sizeof(buffer), "%.17g", v);
  std::string s = buffer;
  if (s.find_first_of(".en") == std::string::npos)
    s += ".0";
  return s;
}

std::string mlir::moe::cuda::cudaType(Type type) {
  if (type.isF32())
    return "float";
  if (type.isF64())
    return "double";
  if (type.isBF16())
    return "moec::bf16";
  if (type.isInteger(32))
    return "int32_t";
  if (type.isInteger(64))
    return "int64_t";
  return "/*unsupported*/ void";
}
