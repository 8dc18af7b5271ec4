//===- Parser.cpp - parse a .moe file into an AST -------------------------===//
//
// The file, its items and statements. A recursive-descent parser with one
// token of lookahead beyond the current one (see ParserImpl.h); each parse
// function carries its production from frontend/GRAMMAR.md. Expressions are
// in ParseExpr.cpp, error recovery in ParserRecovery.cpp.
//
//===----------------------------------------------------------------------===//

#include "moec/Frontend/Parser.h"
#include "ParserImpl.h"
#include "moec/Frontend/ReadSpec.h"
#include "moec/support/Suggest.h"
#include "llvm/ADT/ScopeExit.h"
#include <cmath>

using namespace moec::frontend;
using namespace moec::frontend::ast;
using llvm::failure;
using llvm::LogicalResult;
using llvm::SMLoc;
using llvm::SMRange;
using llvm::StringRef;
using llvm::success;
using moec::frontend::detail::Parser;

//===----------------------------------------------------------------------===//
// File and items
//===----------------------------------------------------------------------===//

/// file ::= version item*
std::unique_ptr<File> Parser::parseFile() {
  auto file = std::make_unique<File>();
  bool fatal = false;
  if (failed(parseVersion(*file, fatal)) && fatal)
    return nullptr;

  while (!tok.is(Token::eof) && !diags.shouldStop()) {
    if (tok.isAny(Token::semicolon, Token::comma)) {
      consume();
      continue;
    }
    // An item with an error that is indented or starts with `}` is junk:
    // most likely body statements left at the top level by a stray `}`.
    // The top-level errors of the items after it are dropped, up to the
    // first item that is not junk, so that a run of junk is reported once.
    Token first = tok;
    topLevelError = false;
    parseWithRecovery(file->items, /*inBody=*/false);
    topLevelJunk =
        topLevelError &&
        (first.is(Token::r_brace) ||
         diags.getSourceMgr().getLineAndColumn(first.getLoc()).second > 1);
  }
  return file;
}

/// Normalises a version number: `1`, `1.0` and `01` are all "1".
static std::string normaliseVersion(const Token &number) {
  if (number.is(Token::integer))
    return std::to_string(number.getIntValue());
  double value = number.getFloatValue();
  if (value == std::floor(value) && std::fabs(value) < 1e15)
    return std::to_string(static_cast<int64_t>(value));
  return number.getSpelling().str();
}

/// version ::= 'moe' NUMBER
///
/// The first token of the file, alone on its line.
LogicalResult Parser::parseVersion(File &file, bool &fatal) {
  bool isMoe = tok.is(Token::identifier) && tok.getSpelling() == "moe";
  if (isMoe && next.isAny(Token::integer, Token::floatLiteral)) {
    SMLoc start = tok.getLoc();
    consume();
    Token number = tok;
    consume();
    file.version = normaliseVersion(number);
    file.versionRange = rangeFrom(start);
    if (file.version != kLanguageVersion) {
      fatal = true;
      return diags.error(number.getLoc(),
                         "unsupported language version " + file.version +
                             "; this moec reads version " + kLanguageVersion);
    }
    if (tok.is(Token::eof) || tok.isAtLineStart())
      return success();
    (void)emitExpected("the end of the version line");
    recover(tok.getSpelling().data(), /*inBody=*/false);
    return failure();
  }
  // `moe x` or a lone `moe` is a broken version line; `moe(...)` or
  // `moe { ... }` is content with no version line before it.
  if (isMoe && !next.isAny(Token::l_paren, Token::l_brace)) {
    const char *start = tok.getSpelling().data();
    consume();
    (void)emitExpected("a version number after 'moe'");
    recover(start, /*inBody=*/false);
    return failure();
  }
  return diags.error(tok.getLoc(), "expected the version line `moe " +
                                       llvm::Twine(kLanguageVersion) +
                                       "` at the start of the file");
}

/// item ::= let | section
LogicalResult Parser::parseItem(std::vector<StmtPtr> &items) {
  if (tok.is(Token::kw_let))
    return parseLet(items);
  if (tok.is(Token::identifier))
    return parseSection(items);
  return emitUnexpected("a section (like `model name { ... }`) or 'let'");
}

/// section ::= IDENT IDENT? body
///
/// The label (the second IDENT) must be on the line of the first. After a
/// broken header, the body is still parsed (see recoverBody) and the
/// section kept.
LogicalResult Parser::parseSection(std::vector<StmtPtr> &items) {
  Token name = tok;
  consume();
  if (tok.is(Token::equal)) {
    // A setting outside any section: report it, then read it as the `let`
    // it probably lost, so that its uses report nothing more.
    (void)emitError(name.getLoc(), "setting '" + name.getSpelling() +
                                       "' is outside any section; write `let " +
                                       name.getSpelling() +
                                       " = ...` to define a constant");
    consume(); // '='
    ExprPtr value = parseExpr();
    bool ok = value != nullptr;
    items.push_back(
        std::make_unique<LetStmt>(rangeFrom(name.getLoc()), name.getSpelling(),
                                  name.getRange(), std::move(value)));
    return llvm::success(ok);
  }
  // The label is on the section's line: a name on the next line starts
  // the body whose `{` is missing.
  Token label;
  if (tok.is(Token::identifier) && !tok.isAtLineStart()) {
    label = tok;
    consume();
  }
  Body body;
  if (tok.is(Token::l_brace)) {
    if (failed(parseBody(name.getSpelling(), body)))
      return failure();
  } else {
    if (label.is(Token::identifier))
      (void)emitExpected("'{' after '" + name.getSpelling() + " " +
                         label.getSpelling() + "'");
    else
      (void)emitExpected("'{' after section name '" + name.getSpelling() + "'");
    // `lett x = ...`: a misspelt `let`, most likely. Define `x` (with no
    // value) so that its uses report nothing more.
    if (label.is(Token::identifier) && tok.is(Token::equal)) {
      items.push_back(std::make_unique<LetStmt>(
          label.getRange(), label.getSpelling(), label.getRange(), nullptr));
      return failure();
    }
    if (!recoverBody(name.getSpelling(), name.getLoc(), body))
      return failure();
  }
  SMRange labelRange =
      label.is(Token::identifier) ? label.getRange() : SMRange();
  items.push_back(std::make_unique<SectionStmt>(
      rangeFrom(name.getLoc()), name.getSpelling(), name.getRange(),
      label.is(Token::identifier) ? label.getSpelling() : StringRef(),
      labelRange, std::move(body)));
  return success();
}

//===----------------------------------------------------------------------===//
// Bodies and statements
//===----------------------------------------------------------------------===//

/// body ::= '{' stmt* '}'
///
/// Statements may be separated by `;` or `,`; newlines mean nothing. A
/// statement that fails to parse is reported and skipped. `owner` names
/// the body in messages ("the body of 'model'"). A `braceless` body (see
/// recoverBody) starts at the current token, and says nothing more when it
/// reaches the end of the file.
LogicalResult Parser::parseBody(StringRef owner, Body &body, bool braceless) {
  NestingGuard guard(*this);
  if (!guard.ok)
    return failure();
  ++bodyDepth;
  auto leave = llvm::make_scope_exit([&] { --bodyDepth; });
  body.lBraceLoc = tok.getLoc();
  if (!braceless)
    consume(); // '{'
  while (true) {
    if (tok.is(Token::r_brace)) {
      body.rBraceLoc = tok.getLoc();
      consume();
      return success();
    }
    if (tok.is(Token::eof)) {
      if (reportedAtEnd || braceless)
        return failure();
      return emitError(getMissingLoc(),
                       "expected '}' to close the body of '" + owner +
                           "', found end of file",
                       body.lBraceLoc,
                       "the body of '" + owner + "' opened here");
    }
    if (diags.shouldStop())
      return failure();
    if (tok.isAny(Token::semicolon, Token::comma)) {
      consume();
      continue;
    }
    parseWithRecovery(body.stmts, /*inBody=*/true);
  }
}

/// stmt ::= let | setting | repeat | if-stmt | layer
LogicalResult Parser::parseStmt(std::vector<StmtPtr> &stmts) {
  switch (tok.getKind()) {
  case Token::kw_let:
    return parseLet(stmts);
  case Token::kw_repeat:
    return parseRepeat(stmts);
  case Token::kw_if:
    return parseIf(stmts);
  case Token::identifier:
    return parseNamedStmt(stmts);
  case Token::kw_else:
    return emitError(tok.getLoc(), "'else' without an 'if' before it");
  default:
    return emitUnexpected(
        "a statement (a setting, a layer, 'let', 'repeat' or 'if')");
  }
}

/// let ::= 'let' IDENT '=' expr
///
/// When the value fails to parse, the constant is still recorded (with no
/// value), so that its uses report nothing more.
LogicalResult Parser::parseLet(std::vector<StmtPtr> &stmts) {
  SMLoc start = tok.getLoc();
  consume(); // 'let'
  if (!tok.is(Token::identifier)) {
    if (tok.isKeyword())
      return emitError(tok.getLoc(), tok.describe() +
                                         " is a keyword and cannot name a "
                                         "constant");
    return emitExpected("a name after 'let'");
  }
  Token name = tok;
  consume();
  auto record = [&](ExprPtr value) {
    stmts.push_back(
        std::make_unique<LetStmt>(rangeFrom(start), name.getSpelling(),
                                  name.getRange(), std::move(value)));
  };
  if (!tok.is(Token::equal)) {
    (void)emitExpected("'=' after constant name '" + name.getSpelling() + "'");
    record(nullptr);
    return failure();
  }
  consume(); // '='
  ExprPtr value = parseExpr();
  bool ok = value != nullptr;
  record(std::move(value));
  return llvm::success(ok);
}

/// Whether `token` can start an expression.
static bool startsExpr(const Token &token) {
  return token.isAny(Token::integer, Token::floatLiteral, Token::string,
                     Token::kw_true, Token::kw_false, Token::kw_not,
                     Token::l_square, Token::minus);
}

/// setting ::= IDENT '=' expr
/// layer   ::= IDENT ('(' args? ')')? body?
///
/// A bare IDENT is a layer statement when what follows starts a new
/// statement: a new line, `}`, `;` or `,`.
LogicalResult Parser::parseNamedStmt(std::vector<StmtPtr> &stmts) {
  Token name = tok;
  SMLoc start = name.getLoc();
  consume();

  if (tok.is(Token::equal)) {
    consume();
    ExprPtr value = parseExpr();
    if (!value)
      return failure();
    stmts.push_back(
        std::make_unique<SettingStmt>(rangeFrom(start), name.getSpelling(),
                                      name.getRange(), std::move(value)));
    return success();
  }

  std::vector<Arg> args;
  if (tok.is(Token::l_paren)) {
    if (failed(parseArgs(name.getSpelling(), args)))
      return failure();
  } else if (!tok.isAny(Token::l_brace, Token::r_brace, Token::semicolon,
                        Token::comma, Token::eof) &&
             !tok.isAtLineStart()) {
    // `reapet 4 { ... }`: a misspelt keyword, most likely.
    static const std::vector<std::string> keywords = {
        "repeat", "block",    "if",      "else",    "let",
        "model",  "train",    "data",    "generate", "encoder",
        "decoder"};
    std::string keyword =
        support::nearestName(name.getSpelling().str(), keywords);
    if (!keyword.empty())
      (void)emitError(name.getLoc(), "unknown statement '" +
                                         name.getSpelling() +
                                         "'; did you mean '" + keyword + "'?");
    else if (startsExpr(tok))
      return emitExpected("'=' after setting name '" + name.getSpelling() +
                          "'");
    else
      (void)emitExpected("'=', '(' or '{' after '" + name.getSpelling() +
                         "'");
    // `lett x = ...`: a misspelt `let`, most likely. Define `x` (with no
    // value) so that its uses report nothing more.
    if (tok.is(Token::identifier) && next.is(Token::equal))
      stmts.push_back(std::make_unique<LetStmt>(
          tok.getRange(), tok.getSpelling(), tok.getRange(), nullptr));
    return failure();
  }

  std::optional<Body> body;
  if (tok.is(Token::l_brace)) {
    body.emplace();
    if (failed(parseBody(name.getSpelling(), *body)))
      return failure();
  }
  stmts.push_back(std::make_unique<LayerStmt>(
      rangeFrom(start), name.getSpelling(), name.getRange(), std::move(args),
      std::move(body)));
  return success();
}

/// repeat ::= 'repeat' expr ('as' IDENT)? body
///
/// After a broken header, the body is still parsed (see recoverBody) but
/// the statement dropped.
LogicalResult Parser::parseRepeat(std::vector<StmtPtr> &stmts) {
  SMLoc start = tok.getLoc();
  consume(); // 'repeat'
  Token var;
  ExprPtr count = parseExpr();
  LogicalResult header = llvm::success(count != nullptr);
  if (succeeded(header) && tok.is(Token::kw_as)) {
    consume();
    if (tok.is(Token::identifier)) {
      var = tok;
      consume();
    } else {
      header = emitExpected("a loop variable name after 'as'");
    }
  } else if (succeeded(header) && !tok.is(Token::l_brace)) {
    header = emitExpected("'as' or '{' after the repeat count");
  }
  if (succeeded(header) && !tok.is(Token::l_brace))
    header = emitExpected("'{' to open the body of 'repeat'");
  Body body;
  if (failed(header)) {
    if (!recoverBody("repeat", start, body))
      return failure();
    return success(); // Reported; the statement is dropped.
  }
  if (failed(parseBody("repeat", body)))
    return failure();
  bool hasVar = var.is(Token::identifier);
  stmts.push_back(std::make_unique<RepeatStmt>(
      rangeFrom(start), std::move(count),
      hasVar ? var.getSpelling() : StringRef(),
      hasVar ? var.getRange() : SMRange(), std::move(body)));
  return success();
}

/// if-stmt ::= 'if' expr body ('else' (body | if-stmt))?
LogicalResult Parser::parseIf(std::vector<StmtPtr> &stmts) {
  NestingGuard guard(*this);
  if (!guard.ok)
    return failure();
  SMLoc start = tok.getLoc();
  consume(); // 'if'
  ExprPtr cond = parseExpr();
  bool headerOk = cond != nullptr;
  if (headerOk && !tok.is(Token::l_brace)) {
    (void)emitExpected("'{' after the condition of 'if'");
    headerOk = false;
  }
  Body thenBody;
  if (headerOk) {
    if (failed(parseBody("if", thenBody)))
      return failure();
  } else if (!recoverBody("if", start, thenBody)) {
    return failure();
  }

  std::optional<Body> elseBody;
  if (tok.is(Token::kw_else)) {
    SMLoc elseLoc = tok.getLoc();
    consume();
    elseBody.emplace();
    if (tok.is(Token::kw_if)) {
      // `else if`: an else body holding the nested if.
      elseBody->lBraceLoc = tok.getLoc();
      if (failed(parseIf(elseBody->stmts)))
        return failure();
      elseBody->rBraceLoc = prevEnd;
    } else if (tok.is(Token::l_brace)) {
      if (failed(parseBody("else", *elseBody)))
        return failure();
    } else {
      (void)emitExpected("'{' or 'if' after 'else'");
      headerOk = false;
      if (!recoverBody("else", elseLoc, *elseBody))
        return failure();
    }
  }
  if (!headerOk)
    return success(); // Reported; the statement is dropped.
  stmts.push_back(std::make_unique<IfStmt>(rangeFrom(start), std::move(cond),
                                           std::move(thenBody),
                                           std::move(elseBody)));
  return success();
}

/// args ::= arg (',' arg)* ','?
/// arg  ::= (IDENT '=')? expr
///
/// Parses `'(' args? ')'` for the call or layer `owner`.
LogicalResult Parser::parseArgs(StringRef owner, std::vector<Arg> &args) {
  NestingGuard guard(*this);
  if (!guard.ok)
    return failure();
  SMLoc lParen = tok.getLoc();
  consume(); // '('
  while (!tok.is(Token::r_paren)) {
    Arg arg;
    if (tok.is(Token::identifier) && next.is(Token::equal)) {
      arg.name = tok.getSpelling();
      arg.nameRange = tok.getRange();
      consume();
      consume();
    }
    arg.value = parseExpr();
    if (!arg.value)
      return failure();
    args.push_back(std::move(arg));
    if (tok.is(Token::comma)) {
      consume();
      continue;
    }
    if (tok.is(Token::r_paren))
      break;
    if (tok.is(Token::eof))
      return emitError(getMissingLoc(),
                       "expected ')' to close the arguments of '" + owner +
                           "', found end of file",
                       lParen, "'(' opened here");
    return emitExpected("',' or ')' after an argument of '" + owner + "'");
  }
  consume(); // ')'
  return success();
}

std::unique_ptr<File> moec::frontend::parseFile(DiagnosticReporter &diags) {
  return Parser(diags).parseFile();
}
