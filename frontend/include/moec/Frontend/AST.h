//===- AST.h - the syntax tree of a .moe file -------------------*- C++ -*-===//
//
// What the parser produces and the evaluator consumes: expressions and
// statements exactly as written, with a source range on every node. Names
// are StringRefs into the SourceMgr's buffer, so an AST must not outlive
// it. The parser checks syntax only; every rule about values (types, scopes,
// duplicates) belongs to the evaluator.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_FRONTEND_AST_H
#define MOEC_FRONTEND_AST_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Casting.h"
#include "llvm/Support/SMLoc.h"
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace moec::frontend::ast {

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

class Expr {
public:
  enum class Kind { Int, Float, Bool, String, Name, Call, List, Unary, Binary };

  virtual ~Expr() = default;
  Kind getKind() const { return kind; }
  llvm::SMRange getRange() const { return range; }
  llvm::SMLoc getLoc() const { return range.Start; }
  /// The height of the tree under this node (1 for a leaf). The parser
  /// bounds it, so that evaluating or destroying a tree cannot exhaust the
  /// stack.
  unsigned getDepth() const { return depth; }

protected:
  Expr(Kind kind, llvm::SMRange range, unsigned depth = 1)
      : kind(kind), range(range), depth(depth) {}

private:
  Kind kind;
  llvm::SMRange range;
  unsigned depth;
};

using ExprPtr = std::unique_ptr<Expr>;

/// The depth of a node over `children` (null children are skipped).
template <typename Range> unsigned depthOver(const Range &children) {
  unsigned depth = 0;
  for (const auto &child : children)
    if (child && child->getDepth() > depth)
      depth = child->getDepth();
  return depth + 1;
}

/// `128`, `1_000`.
class IntExpr : public Expr {
public:
  IntExpr(llvm::SMRange range, int64_t value)
      : Expr(Kind::Int, range), value(value) {}
  int64_t getValue() const { return value; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Int; }

private:
  int64_t value;
};

/// `3e-4`, `0.5`, `1.`.
class FloatExpr : public Expr {
public:
  FloatExpr(llvm::SMRange range, double value)
      : Expr(Kind::Float, range), value(value) {}
  double getValue() const { return value; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Float; }

private:
  double value;
};

/// `true`, `false`.
class BoolExpr : public Expr {
public:
  BoolExpr(llvm::SMRange range, bool value)
      : Expr(Kind::Bool, range), value(value) {}
  bool getValue() const { return value; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Bool; }

private:
  bool value;
};

/// `"grammar"`, with escapes decoded.
class StringExpr : public Expr {
public:
  StringExpr(llvm::SMRange range, std::string value)
      : Expr(Kind::String, range), value(std::move(value)) {}
  llvm::StringRef getValue() const { return value; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::String; }

private:
  std::string value;
};

/// A bare name: a constant (`d`) or a symbol (`gelu`).
class NameExpr : public Expr {
public:
  NameExpr(llvm::SMRange range, llvm::StringRef name)
      : Expr(Kind::Name, range), name(name) {}
  llvm::StringRef getName() const { return name; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Name; }

private:
  llvm::StringRef name;
};

/// One argument of a call or a layer statement: `lr = 1e-3` or, positional,
/// `"grammar"` (empty name).
struct Arg {
  llvm::StringRef name;
  llvm::SMRange nameRange;
  ExprPtr value;
};

/// `adamw(lr = 3e-3)`, `min(a, b)`.
class CallExpr : public Expr {
public:
  CallExpr(llvm::SMRange range, llvm::StringRef callee,
           llvm::SMRange calleeRange, std::vector<Arg> args)
      : Expr(Kind::Call, range, argsDepth(args)), callee(callee),
        calleeRange(calleeRange), args(std::move(args)) {}
  llvm::StringRef getCallee() const { return callee; }
  llvm::SMRange getCalleeRange() const { return calleeRange; }
  const std::vector<Arg> &getArgs() const { return args; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Call; }

private:
  static unsigned argsDepth(const std::vector<Arg> &args) {
    unsigned depth = 0;
    for (const Arg &arg : args)
      if (arg.value && arg.value->getDepth() > depth)
        depth = arg.value->getDepth();
    return depth + 1;
  }

  llvm::StringRef callee;
  llvm::SMRange calleeRange;
  std::vector<Arg> args;
};

/// `[0.9, 0.98]`.
class ListExpr : public Expr {
public:
  ListExpr(llvm::SMRange range, std::vector<ExprPtr> elements)
      : Expr(Kind::List, range, depthOver(elements)),
        elements(std::move(elements)) {}
  const std::vector<ExprPtr> &getElements() const { return elements; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::List; }

private:
  std::vector<ExprPtr> elements;
};

/// `-x`, `not c`.
class UnaryExpr : public Expr {
public:
  enum class Op { Neg, Not };
  UnaryExpr(llvm::SMRange range, Op op, ExprPtr operand)
      : Expr(Kind::Unary, range, operand->getDepth() + 1), op(op),
        operand(std::move(operand)) {}
  Op getOp() const { return op; }
  const Expr &getOperand() const { return *operand; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Unary; }

private:
  Op op;
  ExprPtr operand;
};

/// `a + b`, `i % 2 == 1`, `x and y`.
class BinaryExpr : public Expr {
public:
  enum class Op {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Mod,
    Pow,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
  };
  BinaryExpr(llvm::SMRange range, Op op, llvm::SMRange opRange, ExprPtr lhs,
             ExprPtr rhs)
      : Expr(Kind::Binary, range,
             std::max(lhs->getDepth(), rhs->getDepth()) + 1),
        op(op), opRange(opRange), lhs(std::move(lhs)), rhs(std::move(rhs)) {}
  Op getOp() const { return op; }
  /// The operator token.
  llvm::SMRange getOpRange() const { return opRange; }
  const Expr &getLHS() const { return *lhs; }
  const Expr &getRHS() const { return *rhs; }
  static bool classof(const Expr *e) { return e->getKind() == Kind::Binary; }

  /// The operator as written: "+", "//", "and".
  static llvm::StringRef getOpSpelling(Op op);

private:
  Op op;
  llvm::SMRange opRange;
  ExprPtr lhs, rhs;
};

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

class Stmt;
using StmtPtr = std::unique_ptr<Stmt>;

/// `{ stmt* }`.
struct Body {
  llvm::SMLoc lBraceLoc;
  llvm::SMLoc rBraceLoc;
  std::vector<StmtPtr> stmts;
};

class Stmt {
public:
  enum class Kind { Let, Setting, Repeat, If, Layer, Section };

  virtual ~Stmt() = default;
  Kind getKind() const { return kind; }
  /// From the first token of the statement to its last.
  llvm::SMRange getRange() const { return range; }
  llvm::SMLoc getLoc() const { return range.Start; }

protected:
  Stmt(Kind kind, llvm::SMRange range) : kind(kind), range(range) {}

private:
  Kind kind;
  llvm::SMRange range;
};

/// `let d = 128`. The value is null when it failed to parse: the evaluator
/// then binds the name without reporting anything, so that later uses of the
/// name do not report a second error.
class LetStmt : public Stmt {
public:
  LetStmt(llvm::SMRange range, llvm::StringRef name, llvm::SMRange nameRange,
          ExprPtr value)
      : Stmt(Kind::Let, range), name(name), nameRange(nameRange),
        value(std::move(value)) {}
  llvm::StringRef getName() const { return name; }
  llvm::SMRange getNameRange() const { return nameRange; }
  const Expr *getValue() const { return value.get(); }
  /// Forgets the value: the parser found junk right behind it, so it may be
  /// cut short.
  void dropValue() { value.reset(); }
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Let; }

private:
  llvm::StringRef name;
  llvm::SMRange nameRange;
  ExprPtr value;
};

/// `heads = 4`.
class SettingStmt : public Stmt {
public:
  SettingStmt(llvm::SMRange range, llvm::StringRef name,
              llvm::SMRange nameRange, ExprPtr value)
      : Stmt(Kind::Setting, range), name(name), nameRange(nameRange),
        value(std::move(value)) {}
  llvm::StringRef getName() const { return name; }
  llvm::SMRange getNameRange() const { return nameRange; }
  const Expr &getValue() const { return *value; }
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Setting; }

private:
  llvm::StringRef name;
  llvm::SMRange nameRange;
  ExprPtr value;
};

/// `repeat layers as i { ... }`.
class RepeatStmt : public Stmt {
public:
  RepeatStmt(llvm::SMRange range, ExprPtr count, llvm::StringRef var,
             llvm::SMRange varRange, Body body)
      : Stmt(Kind::Repeat, range), count(std::move(count)), var(var),
        varRange(varRange), body(std::move(body)) {}
  const Expr &getCount() const { return *count; }
  /// The loop variable after `as`, or empty.
  llvm::StringRef getVar() const { return var; }
  llvm::SMRange getVarRange() const { return varRange; }
  const Body &getBody() const { return body; }
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Repeat; }

private:
  ExprPtr count;
  llvm::StringRef var;
  llvm::SMRange varRange;
  Body body;
};

/// `if cond { ... } else { ... }`. An `else if` is an else body holding one
/// IfStmt.
class IfStmt : public Stmt {
public:
  IfStmt(llvm::SMRange range, ExprPtr cond, Body thenBody,
         std::optional<Body> elseBody)
      : Stmt(Kind::If, range), cond(std::move(cond)),
        thenBody(std::move(thenBody)), elseBody(std::move(elseBody)) {}
  const Expr &getCond() const { return *cond; }
  const Body &getThenBody() const { return thenBody; }
  const std::optional<Body> &getElseBody() const { return elseBody; }
  static bool classof(const Stmt *s) { return s->getKind() == Kind::If; }

private:
  ExprPtr cond;
  Body thenBody;
  std::optional<Body> elseBody;
};

/// A layer statement: `attention(heads = 4)`, `moe(...) { k = 2 }`,
/// `block { ... }`, or a bare `attention`.
class LayerStmt : public Stmt {
public:
  LayerStmt(llvm::SMRange range, llvm::StringRef name, llvm::SMRange nameRange,
            std::vector<Arg> args, std::optional<Body> body)
      : Stmt(Kind::Layer, range), name(name), nameRange(nameRange),
        args(std::move(args)), body(std::move(body)) {}
  llvm::StringRef getName() const { return name; }
  llvm::SMRange getNameRange() const { return nameRange; }
  const std::vector<Arg> &getArgs() const { return args; }
  const std::optional<Body> &getBody() const { return body; }
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Layer; }

private:
  llvm::StringRef name;
  llvm::SMRange nameRange;
  std::vector<Arg> args;
  std::optional<Body> body;
};

/// A top-level section: `model lm { ... }`, `train { ... }`.
class SectionStmt : public Stmt {
public:
  SectionStmt(llvm::SMRange range, llvm::StringRef name,
              llvm::SMRange nameRange, llvm::StringRef label,
              llvm::SMRange labelRange, Body body)
      : Stmt(Kind::Section, range), name(name), nameRange(nameRange),
        label(label), labelRange(labelRange), body(std::move(body)) {}
  llvm::StringRef getName() const { return name; }
  llvm::SMRange getNameRange() const { return nameRange; }
  /// The optional name after the section keyword, or empty.
  llvm::StringRef getLabel() const { return label; }
  llvm::SMRange getLabelRange() const { return labelRange; }
  const Body &getBody() const { return body; }
  static bool classof(const Stmt *s) { return s->getKind() == Kind::Section; }

private:
  llvm::StringRef name;
  llvm::SMRange nameRange;
  llvm::StringRef label;
  llvm::SMRange labelRange;
  Body body;
};

//===----------------------------------------------------------------------===//
// File
//===----------------------------------------------------------------------===//

/// A whole file: the version line, then `let`s and sections.
struct File {
  /// The version as written after `moe` (normalised: `1.0` -> "1"); empty
  /// when the version line is missing.
  std::string version;
  llvm::SMRange versionRange;
  /// LetStmts and SectionStmts in source order.
  std::vector<StmtPtr> items;
};

} // namespace moec::frontend::ast

#endif // MOEC_FRONTEND_AST_H
