//===- AST.cpp - the syntax tree of a .moe file ---------------------------===//
//
// Part of moec. See moec/Frontend/AST.h.
//
//===----------------------------------------------------------------------===//

#include "moec/Frontend/AST.h"

using namespace moec::frontend::ast;

llvm::StringRef BinaryExpr::getOpSpelling(Op op) {
  switch (op) {
  case Op::Add:
    return "+";
  case Op::Sub:
    return "-";
  case Op::Mul:
    return "*";
  case Op::Div:
    return "/";
  case Op::FloorDiv:
    return "//";
  case Op::Mod:
    return "%";
  case Op::Pow:
    return "**";
  case Op::Eq:
    return "==";
  case Op::Ne:
    return "!=";
  case Op::Lt:
    return "<";
  case Op::Le:
    return "<=";
  case Op::Gt:
    return ">";
  case Op::Ge:
    return ">=";
  case Op::And:
    return "and";
  case Op::Or:
    return "or";
  }
  return "?";
}
