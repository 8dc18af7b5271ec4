//===- Evaluator.cpp - evaluate a .moe AST into a SpecFile ----------------===//
//
// Part of moec. See moec/Frontend/Evaluator.h.
//
// Scopes: the file is one scope, and so is every `{ ... }` body; a `repeat`
// variable lives in its body's scope. Names are looked up from the innermost
// scope out, and a `let` sees only what was defined before it.
//
// Errors do not cascade: an expression that failed yields no value and
// whatever uses it fails silently; a constant whose value failed is still
// bound (to nothing), so its uses report nothing more. `if` branches not
// taken and `repeat 0` bodies are not evaluated.
//
//===----------------------------------------------------------------------===//

#include "moec/Frontend/Evaluator.h"
#include "Values.h"
#include "moec/Frontend/ReadSpec.h"
#include "llvm/ADT/StringMap.h"
#include <optional>

using namespace moec::frontend;
using namespace moec::frontend::ast;
using llvm::failure;
using llvm::FailureOr;
using llvm::SMLoc;
using llvm::SMRange;
using llvm::StringRef;

namespace {

/// A constant (or `repeat` variable) in scope.
struct Binding {
  StringRef name;
  SMRange defRange;
  /// Empty when its value failed to evaluate.
  std::optional<SpecValue> value;
};

/// The constants in scope, innermost scope last.
class ScopeStack {
public:
  void push() { scopes.emplace_back(); }
  void pop() { scopes.pop_back(); }

  const Binding *lookup(StringRef name) const {
    for (auto scope = scopes.rbegin(); scope != scopes.rend(); ++scope)
      if (const Binding *binding = find(*scope, name))
        return binding;
    return nullptr;
  }

  /// Binds `binding` in the innermost scope, or returns the binding of the
  /// same name already there.
  const Binding *bind(Binding binding) {
    if (const Binding *previous = find(scopes.back(), binding.name))
      return previous;
    scopes.back().push_back(std::move(binding));
    return nullptr;
  }

  /// Every name in scope, innermost first, each scope in definition order.
  std::vector<std::string> getVisibleNames() const {
    std::vector<std::string> names;
    for (auto scope = scopes.rbegin(); scope != scopes.rend(); ++scope)
      for (const Binding &binding : *scope)
        names.push_back(binding.name.str());
    return names;
  }

private:
  using Scope = std::vector<Binding>;
  static const Binding *find(const Scope &scope, StringRef name) {
    for (const Binding &binding : scope)
      if (binding.name == name)
        return &binding;
    return nullptr;
  }
  std::vector<Scope> scopes;
};

/// Pushes a scope for its lifetime.
class ScopeGuard {
public:
  explicit ScopeGuard(ScopeStack &scopes) : scopes(scopes) { scopes.push(); }
  ~ScopeGuard() { scopes.pop(); }

private:
  ScopeStack &scopes;
};

/// Fills one SpecNode, reporting a setting given twice.
class NodeBuilder {
public:
  explicit NodeBuilder(SpecNode &node) : node(node) {}

  void addSetting(SpecSetting setting, DiagnosticReporter &diags) {
    auto [it, inserted] =
        firstSeen.try_emplace(setting.name, setting.nameRange.Start);
    if (!inserted) {
      (void)diags.error(setting.nameRange.Start,
                        "setting '" + setting.name + "' is given twice in '" +
                            node.kind + "'",
                        it->second, "first given here");
      return;
    }
    node.settings.push_back(std::move(setting));
  }

  void addChild(SpecNode child) { node.children.push_back(std::move(child)); }

  SpecNode &getNode() { return node; }

private:
  SpecNode &node;
  llvm::StringMap<SMLoc> firstSeen;
};

class Evaluator {
public:
  explicit Evaluator(DiagnosticReporter &diags) : diags(diags) {}

  SpecFile evaluate(const File &file);

private:
  bool shouldStop() const { return aborted || diags.shouldStop(); }
  /// Counts one more node; false (after reporting) past kMaxSpecNodes.
  bool countNode(SMLoc loc);

  //===--------------------------------------------------------------------===//
  // Statements
  //===--------------------------------------------------------------------===//

  /// Evaluates the statements of `body` into `out`, in the current scope.
  void evalStmts(const Body &body, NodeBuilder &out);
  /// Evaluates `body` into `out` in a new scope.
  void evalBody(const Body &body, NodeBuilder &out) {
    ScopeGuard scope(scopes);
    evalStmts(body, out);
  }
  void evalStmt(const Stmt &stmt, NodeBuilder &out);
  void evalLet(const LetStmt &let);
  void evalSetting(const SettingStmt &setting, NodeBuilder &out);
  void evalRepeat(const RepeatStmt &repeat, NodeBuilder &out);
  void evalIf(const IfStmt &stmt, NodeBuilder &out);
  void evalLayer(const LayerStmt &layer, NodeBuilder &out);
  std::optional<SpecNode> evalSection(const SectionStmt &section);
  /// Binds `name`, reporting a redefinition in the same scope.
  void bind(StringRef name, SMRange defRange, std::optional<SpecValue> value);

  //===--------------------------------------------------------------------===//
  // Expressions
  //===--------------------------------------------------------------------===//

  /// Evaluates `expr`. As an operand (of an operator, a built-in, `if` or
  /// `repeat`), a name that is no constant is an error; elsewhere it is a
  /// Symbol.
  FailureOr<SpecValue> evalExpr(const Expr &expr, bool asOperand);
  FailureOr<SpecValue> evalName(const NameExpr &expr, bool asOperand);
  FailureOr<SpecValue> evalCall(const CallExpr &expr);
  FailureOr<SpecValue> evalList(const ListExpr &expr);
  FailureOr<SpecValue> evalUnary(const UnaryExpr &expr);
  FailureOr<SpecValue> evalBinary(const BinaryExpr &expr);
  FailureOr<SpecValue> evalLogic(const BinaryExpr &expr);
  /// Evaluates an operand that must be a bool; `what` names it in the error
  /// ("operands of 'and'").
  FailureOr<bool> evalBool(const Expr &expr, const llvm::Twine &what,
                           llvm::StringRef must);

  DiagnosticReporter &diags;
  ScopeStack scopes;
  int64_t numNodes = 0;
  bool aborted = false;
};

} // namespace

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

bool Evaluator::countNode(SMLoc loc) {
  if (aborted)
    return false;
  if (++numNodes <= kMaxSpecNodes)
    return true;
  aborted = true;
  (void)diags.error(loc, "the file expands to more than " +
                             llvm::Twine(kMaxSpecNodes) + " layers and blocks");
  return false;
}

SpecFile Evaluator::evaluate(const File &file) {
  SpecFile spec;
  spec.version = file.version;
  spec.versionRange = file.versionRange;
  ScopeGuard fileScope(scopes);
  for (const StmtPtr &item : file.items) {
    if (shouldStop())
      break;
    if (const auto *let = llvm::dyn_cast<LetStmt>(item.get()))
      evalLet(*let);
    else if (const auto *section = llvm::dyn_cast<SectionStmt>(item.get()))
      if (std::optional<SpecNode> node = evalSection(*section))
        spec.sections.push_back(std::move(*node));
  }
  return spec;
}

/// section ::= IDENT IDENT? body
std::optional<SpecNode> Evaluator::evalSection(const SectionStmt &section) {
  if (!countNode(section.getLoc()))
    return std::nullopt;
  SpecNode node;
  node.kind = section.getName().str();
  node.label = section.getLabel().str();
  node.range = section.getRange();
  NodeBuilder builder(node);
  evalBody(section.getBody(), builder);
  return node;
}

void Evaluator::evalStmts(const Body &body, NodeBuilder &out) {
  for (const StmtPtr &stmt : body.stmts) {
    if (shouldStop())
      return;
    evalStmt(*stmt, out);
  }
}

void Evaluator::evalStmt(const Stmt &stmt, NodeBuilder &out) {
  switch (stmt.getKind()) {
  case Stmt::Kind::Let:
    return evalLet(llvm::cast<LetStmt>(stmt));
  case Stmt::Kind::Setting:
    return evalSetting(llvm::cast<SettingStmt>(stmt), out);
  case Stmt::Kind::Repeat:
    return evalRepeat(llvm::cast<RepeatStmt>(stmt), out);
  case Stmt::Kind::If:
    return evalIf(llvm::cast<IfStmt>(stmt), out);
  case Stmt::Kind::Layer:
    return evalLayer(llvm::cast<LayerStmt>(stmt), out);
  case Stmt::Kind::Section:
    // The parser makes sections at the top level only.
    break;
  }
}

void Evaluator::bind(StringRef name, SMRange defRange,
                     std::optional<SpecValue> value) {
  if (const Binding *previous =
          scopes.bind(Binding{name, defRange, std::move(value)}))
    (void)diags.error(defRange.Start, "redefinition of '" + name + "'",
                      previous->defRange.Start, "previous definition is here");
}

/// let ::= 'let' IDENT '=' expr
void Evaluator::evalLet(const LetStmt &let) {
  std::optional<SpecValue> value;
  if (const Expr *expr = let.getValue()) {
    FailureOr<SpecValue> result = evalExpr(*expr, /*asOperand=*/false);
    if (succeeded(result))
      value = std::move(*result);
  }
  bind(let.getName(), let.getNameRange(), std::move(value));
}

/// setting ::= IDENT '=' expr
void Evaluator::evalSetting(const SettingStmt &setting, NodeBuilder &out) {
  FailureOr<SpecValue> value = evalExpr(setting.getValue(), false);
  if (failed(value))
    return;
  out.addSetting(SpecSetting{setting.getName().str(), setting.getNameRange(),
                             std::move(*value)},
                 diags);
}

/// repeat ::= 'repeat' expr ('as' IDENT)? body
///
/// Makes one "block" node per repetition.
void Evaluator::evalRepeat(const RepeatStmt &repeat, NodeBuilder &out) {
  FailureOr<SpecValue> count = evalExpr(repeat.getCount(), true);
  if (failed(count))
    return;
  SMLoc countLoc = repeat.getCount().getLoc();
  if (count->kind != SpecValue::Kind::Int) {
    (void)diags.error(countLoc, "the repeat count must be an int, found " +
                                    getTypeName(*count) + " " +
                                    formatValue(*count));
    return;
  }
  if (count->intValue < 0) {
    (void)diags.error(countLoc, "the repeat count must not be negative, "
                                "found " +
                                    llvm::Twine(count->intValue));
    return;
  }
  if (count->intValue > kMaxRepeatCount) {
    (void)diags.error(countLoc, "the repeat count " +
                                    llvm::Twine(count->intValue) +
                                    " is too large (the limit is " +
                                    llvm::Twine(kMaxRepeatCount) + ")");
    return;
  }
  for (int64_t index = 0; index < count->intValue; ++index) {
    if (shouldStop() || !countNode(repeat.getLoc()))
      return;
    SpecNode block;
    block.kind = "block";
    block.range = repeat.getRange();
    block.index = index;
    NodeBuilder builder(block);
    {
      ScopeGuard scope(scopes);
      if (!repeat.getVar().empty())
        bind(repeat.getVar(), repeat.getVarRange(),
             makeInt(index, repeat.getVarRange()));
      evalStmts(repeat.getBody(), builder);
    }
    out.addChild(std::move(block));
  }
}

/// if-stmt ::= 'if' expr body ('else' (body | if-stmt))?
///
/// Splices the statements of the branch taken into `out`.
void Evaluator::evalIf(const IfStmt &stmt, NodeBuilder &out) {
  FailureOr<bool> cond =
      evalBool(stmt.getCond(), "the condition of 'if'", "must be a bool");
  if (failed(cond))
    return;
  if (*cond)
    evalBody(stmt.getThenBody(), out);
  else if (stmt.getElseBody())
    evalBody(*stmt.getElseBody(), out);
}

/// layer ::= IDENT ('(' args? ')')? body?
///
/// Its settings are its (named) arguments, then its body's settings.
void Evaluator::evalLayer(const LayerStmt &layer, NodeBuilder &out) {
  if (!countNode(layer.getLoc()))
    return;
  SpecNode node;
  node.kind = layer.getName().str();
  node.range = layer.getRange();
  NodeBuilder builder(node);
  for (const Arg &arg : layer.getArgs()) {
    if (arg.name.empty()) {
      (void)diags.error(arg.value->getLoc(),
                        "layer arguments must be named, like `" +
                            layer.getName() + "(name = value)`");
      continue;
    }
    FailureOr<SpecValue> value = evalExpr(*arg.value, false);
    if (succeeded(value))
      builder.addSetting(
          SpecSetting{arg.name.str(), arg.nameRange, std::move(*value)}, diags);
  }
  if (layer.getBody())
    evalBody(*layer.getBody(), builder);
  out.addChild(std::move(node));
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

FailureOr<SpecValue> Evaluator::evalExpr(const Expr &expr, bool asOperand) {
  switch (expr.getKind()) {
  case Expr::Kind::Int:
    return makeInt(llvm::cast<IntExpr>(expr).getValue(), expr.getRange());
  case Expr::Kind::Float:
    return makeFloat(llvm::cast<FloatExpr>(expr).getValue(), expr.getRange());
  case Expr::Kind::Bool:
    return makeBool(llvm::cast<BoolExpr>(expr).getValue(), expr.getRange());
  case Expr::Kind::String: {
    SpecValue value;
    value.kind = SpecValue::Kind::String;
    value.text = llvm::cast<StringExpr>(expr).getValue().str();
    value.range = expr.getRange();
    return value;
  }
  case Expr::Kind::Name:
    return evalName(llvm::cast<NameExpr>(expr), asOperand);
  case Expr::Kind::Call:
    return evalCall(llvm::cast<CallExpr>(expr));
  case Expr::Kind::List:
    return evalList(llvm::cast<ListExpr>(expr));
  case Expr::Kind::Unary:
    return evalUnary(llvm::cast<UnaryExpr>(expr));
  case Expr::Kind::Binary:
    return evalBinary(llvm::cast<BinaryExpr>(expr));
  }
  return failure();
}

FailureOr<SpecValue> Evaluator::evalName(const NameExpr &expr, bool asOperand) {
  StringRef name = expr.getName();
  if (const Binding *binding = scopes.lookup(name)) {
    if (!binding->value)
      return failure(); // Its definition failed and was reported.
    SpecValue value = *binding->value;
    value.range = expr.getRange();
    return value;
  }
  std::string suggestion = nearestName(name, scopes.getVisibleNames());
  if (asOperand) {
    std::string message = ("unknown name '" + name + "'").str();
    if (!suggestion.empty())
      message += "; did you mean '" + suggestion + "'?";
    return diags.error(expr.getLoc(), message);
  }
  SpecValue symbol;
  symbol.kind = SpecValue::Kind::Symbol;
  symbol.text = name.str();
  symbol.suggestion = std::move(suggestion);
  symbol.range = expr.getRange();
  return symbol;
}

FailureOr<SpecValue> Evaluator::evalCall(const CallExpr &expr) {
  bool builtin = isBuiltin(expr.getCallee());
  SpecValue call;
  call.kind = SpecValue::Kind::Call;
  call.text = expr.getCallee().str();
  call.range = expr.getRange();
  std::vector<SpecValue> builtinArgs;
  llvm::StringMap<SMLoc> firstSeen;
  bool ok = true;
  for (const Arg &arg : expr.getArgs()) {
    if (builtin && !arg.name.empty()) {
      (void)diags.error(arg.nameRange.Start,
                        expr.getCallee() + "() takes no named arguments");
      ok = false;
      continue;
    }
    FailureOr<SpecValue> value = evalExpr(*arg.value, builtin);
    if (failed(value)) {
      ok = false;
      continue;
    }
    if (builtin) {
      builtinArgs.push_back(std::move(*value));
      continue;
    }
    if (!arg.name.empty()) {
      auto [it, inserted] =
          firstSeen.try_emplace(arg.name, arg.nameRange.Start);
      if (!inserted) {
        (void)diags.error(arg.nameRange.Start,
                          "argument '" + arg.name + "' is given twice to '" +
                              expr.getCallee() + "'",
                          it->second, "first given here");
        ok = false;
        continue;
      }
    }
    // A positional argument's "name range" is its value's range.
    SMRange nameRange = arg.name.empty() ? value->range : arg.nameRange;
    call.args.push_back(
        SpecSetting{arg.name.str(), nameRange, std::move(*value)});
  }
  if (!ok)
    return failure();
  if (builtin)
    return callBuiltin(expr, builtinArgs, diags);
  return call;
}

FailureOr<SpecValue> Evaluator::evalList(const ListExpr &expr) {
  SpecValue list;
  list.kind = SpecValue::Kind::List;
  list.range = expr.getRange();
  bool ok = true;
  for (const ExprPtr &element : expr.getElements()) {
    FailureOr<SpecValue> value = evalExpr(*element, false);
    if (failed(value))
      ok = false;
    else
      list.list.push_back(std::move(*value));
  }
  if (!ok)
    return failure();
  return list;
}

FailureOr<bool> Evaluator::evalBool(const Expr &expr, const llvm::Twine &what,
                                    StringRef must) {
  FailureOr<SpecValue> value = evalExpr(expr, /*asOperand=*/true);
  if (failed(value))
    return failure();
  if (value->kind != SpecValue::Kind::Bool)
    return diags.error(expr.getLoc(), what + " " + must + ", found " +
                                          getTypeName(*value) + " " +
                                          formatValue(*value));
  return value->boolValue;
}

FailureOr<SpecValue> Evaluator::evalUnary(const UnaryExpr &expr) {
  if (expr.getOp() == UnaryExpr::Op::Not) {
    FailureOr<bool> operand =
        evalBool(expr.getOperand(), "the operand of 'not'", "must be a bool");
    if (failed(operand))
      return failure();
    return makeBool(!*operand, expr.getRange());
  }
  FailureOr<SpecValue> operand = evalExpr(expr.getOperand(), true);
  if (failed(operand))
    return failure();
  return applyNeg(expr, *operand, diags);
}

FailureOr<SpecValue> Evaluator::evalLogic(const BinaryExpr &expr) {
  bool isAnd = expr.getOp() == BinaryExpr::Op::And;
  std::string what =
      ("operands of '" + BinaryExpr::getOpSpelling(expr.getOp()) + "'").str();
  FailureOr<bool> lhs = evalBool(expr.getLHS(), what, "must be bools");
  if (failed(lhs))
    return failure();
  // Short-circuit: `i > 0 and 8 // i > 1` is fine for i == 0.
  if (*lhs != isAnd)
    return makeBool(*lhs, expr.getRange());
  FailureOr<bool> rhs = evalBool(expr.getRHS(), what, "must be bools");
  if (failed(rhs))
    return failure();
  return makeBool(*rhs, expr.getRange());
}

FailureOr<SpecValue> Evaluator::evalBinary(const BinaryExpr &expr) {
  if (expr.getOp() == BinaryExpr::Op::And || expr.getOp() == BinaryExpr::Op::Or)
    return evalLogic(expr);
  // Both sides first, so that two independent mistakes are both reported.
  FailureOr<SpecValue> lhs = evalExpr(expr.getLHS(), true);
  FailureOr<SpecValue> rhs = evalExpr(expr.getRHS(), true);
  if (failed(lhs) || failed(rhs))
    return failure();
  return applyBinary(expr, *lhs, *rhs, diags);
}

SpecFile moec::frontend::evaluate(const File &file, DiagnosticReporter &diags) {
  diags.setOneErrorPerLocation(true);
  SpecFile spec = Evaluator(diags).evaluate(file);
  diags.setOneErrorPerLocation(false);
  return spec;
}
