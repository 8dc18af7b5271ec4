//===- Parser.cpp - parse a .moe file into an AST -------------------------===//
//
// A recursive-descent parser with one token of lookahead beyond the current
// one. Each parse function carries its production from frontend/GRAMMAR.md.
//
// Error handling: the first syntax error in a statement is reported, the
// statement is dropped, and parsing resumes at the next token that starts a
// line outside any bracket of the broken statement (or at the `}` closing
// the enclosing body). An error token from the lexer was already reported,
// so the parser reports nothing more for it.
//
//===----------------------------------------------------------------------===//

#include "moec/Frontend/Parser.h"
#include "Lexer.h"
#include "moec/Frontend/Parse.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include <cmath>

using namespace moec::frontend;
using namespace moec::frontend::ast;
using llvm::failure;
using llvm::LogicalResult;
using llvm::SMLoc;
using llvm::SMRange;
using llvm::StringRef;
using llvm::success;

namespace {

/// How deeply parentheses, brackets, calls, bodies and unary operators may
/// nest.
constexpr unsigned kMaxNesting = 256;
/// How tall an expression tree may grow (long `a + b + ...` chains).
constexpr unsigned kMaxExprDepth = 1024;

class Parser {
public:
  explicit Parser(DiagnosticReporter &diags)
      : diags(diags), lexer(diags.getSourceMgr(), diags) {
    tok = lexer.lex();
    next = lexer.lex();
  }

  std::unique_ptr<File> parseFile();

private:
  //===--------------------------------------------------------------------===//
  // Tokens
  //===--------------------------------------------------------------------===//

  void consume() {
    if (tok.isAny(Token::l_paren, Token::l_square))
      openBrackets.push_back(tok.getKind());
    else if (!openBrackets.empty() &&
             ((tok.is(Token::r_paren) &&
               openBrackets.back() == Token::l_paren) ||
              (tok.is(Token::r_square) &&
               openBrackets.back() == Token::l_square)))
      openBrackets.pop_back();
    prevEnd = tok.getEndLoc();
    prevKind = tok.getKind();
    tok = next;
    next = lexer.lex();
  }

  /// The range from `start` to the end of the last consumed token.
  SMRange rangeFrom(SMLoc start) const { return {start, prevEnd}; }

  /// Reports a syntax error, unless the current token is an error token (the
  /// lexer reported that one). Always returns failure().
  /// Whether to drop an error: one at an error token (the lexer reported
  /// it), or one at the top level after a junk item (see parseFile).
  bool isSuppressed() {
    if (bodyDepth == 0) {
      topLevelError = true;
      if (topLevelJunk)
        return true;
    }
    return tok.is(Token::error);
  }
  LogicalResult emitError(SMLoc loc, const llvm::Twine &message) {
    if (isSuppressed())
      return failure();
    reportedAtEnd |= tok.is(Token::eof);
    return diags.error(loc, message);
  }
  LogicalResult emitError(SMLoc loc, const llvm::Twine &message, SMLoc noteLoc,
                          const llvm::Twine &note) {
    if (isSuppressed())
      return failure();
    reportedAtEnd |= tok.is(Token::eof);
    return diags.error(loc, message, noteLoc, note);
  }
  /// Where something missing before the current token belongs: at the
  /// current token, or, when that starts a line (or is the end of the
  /// file), right after the token before it, where the user stopped typing.
  SMLoc getMissingLoc() const {
    if ((tok.isAtLineStart() || tok.is(Token::eof)) && prevEnd.isValid())
      return prevEnd;
    return tok.getLoc();
  }
  /// Reports "expected <what>, found <current token>" at getMissingLoc().
  LogicalResult emitExpected(const llvm::Twine &what) {
    return emitError(getMissingLoc(),
                     "expected " + what + ", found " + tok.describe());
  }
  /// Reports "expected <what>, found <current token>" at the current token,
  /// which is itself the mistake.
  LogicalResult emitUnexpected(const llvm::Twine &what) {
    return emitError(tok.getLoc(),
                     "expected " + what + ", found " + tok.describe());
  }

  /// Parses one statement of a body (`inBody`) or one top-level item into
  /// `stmts`, and recovers after a syntax error in it.
  void parseWithRecovery(std::vector<StmtPtr> &stmts, bool inBody);
  /// Skips what is left of a statement that failed to parse: up to the next
  /// token that starts a line outside the statement's brackets, or the `}`
  /// that closes the enclosing body (when `inBody`). `stmtStart` is the
  /// statement's first token, which is always skipped.
  void recover(const char *stmtStart, bool inBody);
  /// After an error in the header of a section, `repeat`, `if` or `else`
  /// (named `owner`, starting at `headerLoc`): parses the body the header
  /// meant to open, so that its statements are neither lost nor read as
  /// statements of the enclosing body. The rest of the header line is
  /// skipped up to a `{`; with no `{` on it, the lines below, when indented
  /// deeper than the header, are read as a body whose `{` was forgotten.
  /// Returns false when no body was found.
  bool recoverBody(StringRef owner, SMLoc headerLoc, Body &body);
  /// During recovery inside an unclosed `(` or `[`: whether the current
  /// token, first on its line, rather starts the next statement than
  /// continues the brackets (after a missing `)`).
  bool startsStmtInsideBrackets() const;
  /// Whether the rest of the line from `loc` closes a bracket it did not
  /// open.
  bool closesOuterBracket(SMLoc loc) const;
  /// Whether the line of `lBrace` closes it.
  bool closesBraceOnLine(const Token &lBrace) const;

  /// Counts one level of nesting; false (after reporting) past kMaxNesting.
  bool enterNesting() {
    if (++nesting <= kMaxNesting)
      return true;
    (void)emitError(tok.getLoc(), "nesting is too deep (the limit is " +
                                      llvm::Twine(kMaxNesting) + " levels)");
    return false;
  }
  struct NestingGuard {
    explicit NestingGuard(Parser &parser)
        : parser(parser), ok(parser.enterNesting()) {}
    ~NestingGuard() { --parser.nesting; }
    Parser &parser;
    bool ok;
  };

  /// Reports an expression tree taller than kMaxExprDepth; returns `expr`,
  /// or null after the report.
  ExprPtr checkDepth(ExprPtr expr) {
    if (expr->getDepth() <= kMaxExprDepth)
      return expr;
    (void)emitError(expr->getLoc(),
                    "expression is too long or nested too deeply (the limit "
                    "is " +
                        llvm::Twine(kMaxExprDepth) + " levels)");
    return nullptr;
  }

  //===--------------------------------------------------------------------===//
  // Items and statements
  //===--------------------------------------------------------------------===//

  LogicalResult parseVersion(File &file, bool &fatal);
  LogicalResult parseItem(std::vector<StmtPtr> &items);
  LogicalResult parseSection(std::vector<StmtPtr> &items);
  LogicalResult parseBody(StringRef owner, Body &body, bool braceless = false);
  LogicalResult parseStmt(std::vector<StmtPtr> &stmts);
  LogicalResult parseLet(std::vector<StmtPtr> &stmts);
  LogicalResult parseNamedStmt(std::vector<StmtPtr> &stmts);
  LogicalResult parseRepeat(std::vector<StmtPtr> &stmts);
  LogicalResult parseIf(std::vector<StmtPtr> &stmts);
  LogicalResult parseArgs(StringRef owner, std::vector<Arg> &args);

  //===--------------------------------------------------------------------===//
  // Expressions
  //===--------------------------------------------------------------------===//

  ExprPtr parseExpr();
  ExprPtr parseOrExpr();
  ExprPtr parseAndExpr();
  ExprPtr parseNotExpr();
  ExprPtr parseCmpExpr();
  ExprPtr parseAddExpr();
  ExprPtr parseMulExpr();
  ExprPtr parseUnary();
  ExprPtr parsePower();
  ExprPtr parsePrimary();
  ExprPtr parseList();

  /// Consumes the operator token and parses the right operand with
  /// `parseRHS`, building `lhs <op> rhs`.
  ExprPtr parseBinaryRHS(ExprPtr lhs, BinaryExpr::Op op,
                         ExprPtr (Parser::*parseRHS)());

  DiagnosticReporter &diags;
  Lexer lexer;
  Token tok, next;
  /// The end and kind of the last consumed token.
  SMLoc prevEnd;
  Token::Kind prevKind = Token::eof;
  /// `(` and `[` consumed and not yet closed; recovery skips past them.
  llvm::SmallVector<Token::Kind, 8> openBrackets;
  unsigned nesting = 0;
  /// How many bodies enclose the current token.
  unsigned bodyDepth = 0;
  /// Whether the last top-level item was junk (see parseFile).
  bool topLevelJunk = false;
  /// Whether the current top-level item had an error at the top level.
  bool topLevelError = false;
  /// Set once an error was reported on reaching the end of the file, so
  /// that the bodies left open around it do not report it again.
  bool reportedAtEnd = false;
};

} // namespace

//===----------------------------------------------------------------------===//
// Recovery
//===----------------------------------------------------------------------===//

/// Whether the text from `ptr` to the end of its line closes a bracket it
/// did not open (strings and comments aside). A line ending in `,`, `(`,
/// `[` or an operator goes on, and so does the scan, for a few lines.
static bool closesOuterBracket(const char *ptr, const char *end) {
  int balance = 0;
  char last = ',';
  for (int lines = 0; lines < 16 && ptr != end; ++lines) {
    if (!llvm::StringRef(",([+-*/%=<>").contains(last))
      return false;
    last = '\0';
    for (; ptr != end && *ptr != '\n'; ++ptr) {
      char c = *ptr;
      if (c == '#') {
        while (ptr != end && *ptr != '\n')
          ++ptr;
        break;
      }
      if (c == '(' || c == '[') {
        ++balance;
      } else if (c == ')' || c == ']') {
        if (--balance < 0)
          return true;
      } else if (c == '"') {
        for (++ptr; ptr != end && *ptr != '"' && *ptr != '\n'; ++ptr)
          if (*ptr == '\\' && ptr + 1 != end)
            ++ptr;
        if (ptr == end || *ptr == '\n')
          return false;
      }
      if (!llvm::isSpace(c))
        last = c;
    }
    if (ptr != end)
      ++ptr; // '\n'
  }
  return false;
}

bool Parser::startsStmtInsideBrackets() const {
  // After `,`, `(`, `=` or an operator the brackets go on; so they do when
  // the line closes one of them (`  k = 2)` after a missing comma).
  bool prevEndsExpr =
      prevKind == Token::identifier || prevKind == Token::integer ||
      prevKind == Token::floatLiteral || prevKind == Token::string ||
      prevKind == Token::kw_true || prevKind == Token::kw_false ||
      prevKind == Token::r_paren || prevKind == Token::r_square ||
      prevKind == Token::error;
  if (!prevEndsExpr || !tok.isAny(Token::identifier, Token::kw_let,
                                  Token::kw_repeat, Token::kw_if))
    return false;
  return !closesOuterBracket(tok.getLoc());
}

bool Parser::closesBraceOnLine(const Token &lBrace) const {
  int depth = 0;
  const char *end = lexer.getBufferEnd();
  for (const char *ptr = lBrace.getSpelling().data();
       ptr != end && *ptr != '\n' && *ptr != '#'; ++ptr) {
    if (*ptr == '"') {
      for (++ptr; ptr != end && *ptr != '"' && *ptr != '\n'; ++ptr)
        if (*ptr == '\\' && ptr + 1 != end)
          ++ptr;
      if (ptr == end || *ptr == '\n')
        return false;
    } else if (*ptr == '{') {
      ++depth;
    } else if (*ptr == '}' && --depth == 0) {
      return true;
    }
  }
  return false;
}

bool Parser::closesOuterBracket(SMLoc loc) const {
  return ::closesOuterBracket(loc.getPointer(), lexer.getBufferEnd());
}

void Parser::parseWithRecovery(std::vector<StmtPtr> &stmts, bool inBody) {
  Token first = tok;
  SMLoc endBefore = prevEnd;
  size_t countBefore = stmts.size();
  openBrackets.clear();
  if (succeeded(inBody ? parseStmt(stmts) : parseItem(stmts)))
    return;
  // Junk right behind a `let` or a setting on its line (no separator
  // between) may mean that its value was cut short: a `let` keeps its name
  // but forgets its value, a setting is dropped, so that neither reports
  // anything more.
  if (!first.isAtLineStart() && countBefore > 0 &&
      stmts[countBefore - 1]->getRange().End == endBefore) {
    Stmt *previous = stmts[countBefore - 1].get();
    if (auto *let = llvm::dyn_cast<LetStmt>(previous))
      let->dropValue();
    else if (llvm::isa<SettingStmt>(previous))
      stmts.erase(stmts.begin() + (countBefore - 1));
  }
  recover(first.getSpelling().data(), inBody);
}

void Parser::recover(const char *stmtStart, bool inBody) {
  // A `{` its line does not close, or a `)` or `]` before a statement on
  // the same line, is stray: skip just it.
  bool strayOpener = tok.is(Token::l_brace) && !closesBraceOnLine(tok);
  bool strayCloser = tok.isAny(Token::r_paren, Token::r_square) &&
                     !next.isAtLineStart() &&
                     next.isAny(Token::identifier, Token::kw_let,
                                Token::kw_repeat, Token::kw_if);
  if (tok.getSpelling().data() == stmtStart && (strayOpener || strayCloser)) {
    consume();
    openBrackets.clear();
    return;
  }
  unsigned braces = 0;
  while (!tok.is(Token::eof)) {
    bool atStart = tok.getSpelling().data() == stmtStart;
    if (braces == 0 && tok.isAtLineStart() && !atStart &&
        (openBrackets.empty() || startsStmtInsideBrackets()))
      break;
    if (tok.is(Token::l_brace)) {
      ++braces;
    } else if (tok.is(Token::r_brace)) {
      // The `}` closing the enclosing body; unless it sits inside brackets
      // that its line goes on to close, as in `f(a = }b)`: a stray `}`.
      if (braces == 0 && inBody &&
          (openBrackets.empty() || !closesOuterBracket(tok.getEndLoc())))
        break;
      if (braces > 0)
        --braces;
    }
    consume();
  }
  openBrackets.clear();
}

bool Parser::recoverBody(StringRef owner, SMLoc headerLoc, Body &body) {
  while (!tok.isAny(Token::eof, Token::l_brace) && !tok.isAtLineStart())
    consume();
  openBrackets.clear();
  if (tok.is(Token::l_brace)) {
    (void)parseBody(owner, body);
    return true;
  }
  if (!tok.isAtLineStart() || !tok.isAny(Token::identifier, Token::kw_let,
                                         Token::kw_repeat, Token::kw_if))
    return false;
  llvm::SourceMgr &sourceMgr = diags.getSourceMgr();
  if (sourceMgr.getLineAndColumn(tok.getLoc()).second <=
      sourceMgr.getLineAndColumn(headerLoc).second)
    return false;
  (void)parseBody(owner, body, /*braceless=*/true);
  return true;
}

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
    // The top-level errors after it are dropped until an item parses
    // cleanly, so that the run of junk is reported once.
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
/// broken header, the body is still parsed (see recoverBody) and
/// the section kept.
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
    if (startsExpr(tok))
      return emitExpected("'=' after setting name '" + name.getSpelling() +
                          "'");
    (void)emitExpected("'=', '(' or '{' after '" + name.getSpelling() + "'");
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

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

/// expr ::= or-expr
ExprPtr Parser::parseExpr() {
  NestingGuard guard(*this);
  if (!guard.ok)
    return nullptr;
  return parseOrExpr();
}

ExprPtr Parser::parseBinaryRHS(ExprPtr lhs, BinaryExpr::Op op,
                               ExprPtr (Parser::*parseRHS)()) {
  SMRange opRange = tok.getRange();
  consume();
  ExprPtr rhs = (this->*parseRHS)();
  if (!rhs)
    return nullptr;
  SMRange range(lhs->getLoc(), rhs->getRange().End);
  return checkDepth(std::make_unique<BinaryExpr>(
      range, op, opRange, std::move(lhs), std::move(rhs)));
}

/// or-expr ::= and-expr ('or' and-expr)*
ExprPtr Parser::parseOrExpr() {
  ExprPtr lhs = parseAndExpr();
  while (lhs && tok.is(Token::kw_or))
    lhs = parseBinaryRHS(std::move(lhs), BinaryExpr::Op::Or,
                         &Parser::parseAndExpr);
  return lhs;
}

/// and-expr ::= not-expr ('and' not-expr)*
ExprPtr Parser::parseAndExpr() {
  ExprPtr lhs = parseNotExpr();
  while (lhs && tok.is(Token::kw_and))
    lhs = parseBinaryRHS(std::move(lhs), BinaryExpr::Op::And,
                         &Parser::parseNotExpr);
  return lhs;
}

/// not-expr ::= 'not' not-expr | cmp-expr
ExprPtr Parser::parseNotExpr() {
  if (!tok.is(Token::kw_not))
    return parseCmpExpr();
  NestingGuard guard(*this);
  if (!guard.ok)
    return nullptr;
  SMLoc start = tok.getLoc();
  consume();
  ExprPtr operand = parseNotExpr();
  if (!operand)
    return nullptr;
  SMRange range(start, operand->getRange().End);
  return checkDepth(std::make_unique<UnaryExpr>(range, UnaryExpr::Op::Not,
                                                std::move(operand)));
}

/// The comparison operator `token` spells, if any.
static std::optional<BinaryExpr::Op> getComparison(const Token &token) {
  switch (token.getKind()) {
  case Token::equalequal:
    return BinaryExpr::Op::Eq;
  case Token::notequal:
    return BinaryExpr::Op::Ne;
  case Token::less:
    return BinaryExpr::Op::Lt;
  case Token::lessequal:
    return BinaryExpr::Op::Le;
  case Token::greater:
    return BinaryExpr::Op::Gt;
  case Token::greaterequal:
    return BinaryExpr::Op::Ge;
  default:
    return std::nullopt;
  }
}

/// cmp-expr ::= add-expr (('=='|'!='|'<'|'<='|'>'|'>=') add-expr)?
///
/// Comparisons do not chain: `a < b < c` is an error.
ExprPtr Parser::parseCmpExpr() {
  ExprPtr lhs = parseAddExpr();
  if (!lhs)
    return nullptr;
  std::optional<BinaryExpr::Op> op = getComparison(tok);
  if (!op)
    return lhs;
  lhs = parseBinaryRHS(std::move(lhs), *op, &Parser::parseAddExpr);
  if (lhs && getComparison(tok)) {
    (void)emitError(tok.getLoc(), "comparisons do not chain; combine them "
                                  "with 'and'");
    return nullptr;
  }
  return lhs;
}

/// add-expr ::= mul-expr (('+'|'-') mul-expr)*
ExprPtr Parser::parseAddExpr() {
  ExprPtr lhs = parseMulExpr();
  while (lhs && tok.isAny(Token::plus, Token::minus)) {
    BinaryExpr::Op op =
        tok.is(Token::plus) ? BinaryExpr::Op::Add : BinaryExpr::Op::Sub;
    lhs = parseBinaryRHS(std::move(lhs), op, &Parser::parseMulExpr);
  }
  return lhs;
}

/// mul-expr ::= unary (('*'|'/'|'//'|'%') unary)*
ExprPtr Parser::parseMulExpr() {
  ExprPtr lhs = parseUnary();
  while (lhs && tok.isAny(Token::star, Token::slash, Token::slashslash,
                          Token::percent)) {
    BinaryExpr::Op op = tok.is(Token::star)         ? BinaryExpr::Op::Mul
                        : tok.is(Token::slash)      ? BinaryExpr::Op::Div
                        : tok.is(Token::slashslash) ? BinaryExpr::Op::FloorDiv
                                                    : BinaryExpr::Op::Mod;
    lhs = parseBinaryRHS(std::move(lhs), op, &Parser::parseUnary);
  }
  return lhs;
}

/// unary ::= '-' unary | power
ExprPtr Parser::parseUnary() {
  if (!tok.is(Token::minus))
    return parsePower();
  NestingGuard guard(*this);
  if (!guard.ok)
    return nullptr;
  SMLoc start = tok.getLoc();
  consume();
  ExprPtr operand = parseUnary();
  if (!operand)
    return nullptr;
  SMRange range(start, operand->getRange().End);
  return checkDepth(std::make_unique<UnaryExpr>(range, UnaryExpr::Op::Neg,
                                                std::move(operand)));
}

/// power ::= primary ('**' unary)?
///
/// `**` binds tighter than a unary minus on its left and is right
/// associative: `-2 ** 2` is -4, `2 ** 3 ** 2` is 512.
ExprPtr Parser::parsePower() {
  ExprPtr base = parsePrimary();
  if (!base || !tok.is(Token::starstar))
    return base;
  NestingGuard guard(*this);
  if (!guard.ok)
    return nullptr;
  return parseBinaryRHS(std::move(base), BinaryExpr::Op::Pow,
                        &Parser::parseUnary);
}

/// primary ::= NUMBER | STRING | 'true' | 'false' | IDENT
///           | IDENT '(' args? ')' | '(' expr ')' | list
ExprPtr Parser::parsePrimary() {
  Token start = tok;
  switch (tok.getKind()) {
  case Token::integer:
    consume();
    return std::make_unique<IntExpr>(start.getRange(), start.getIntValue());
  case Token::floatLiteral:
    consume();
    return std::make_unique<FloatExpr>(start.getRange(), start.getFloatValue());
  case Token::string:
    consume();
    return std::make_unique<StringExpr>(start.getRange(),
                                        start.getStringValue());
  case Token::kw_true:
  case Token::kw_false:
    consume();
    return std::make_unique<BoolExpr>(start.getRange(),
                                      start.is(Token::kw_true));
  case Token::identifier: {
    // `name =`, `name {` or `name label` starting a line is the next
    // statement, not an operand: the value before it is missing.
    if (tok.isAtLineStart() &&
        (next.isAny(Token::equal, Token::l_brace) ||
         (next.is(Token::identifier) && !next.isAtLineStart()))) {
      (void)emitExpected("an expression");
      return nullptr;
    }
    consume();
    if (!tok.is(Token::l_paren))
      return std::make_unique<NameExpr>(start.getRange(), start.getSpelling());
    std::vector<Arg> args;
    if (failed(parseArgs(start.getSpelling(), args)))
      return nullptr;
    return checkDepth(std::make_unique<CallExpr>(
        rangeFrom(start.getLoc()), start.getSpelling(), start.getRange(),
        std::move(args)));
  }
  case Token::l_paren: {
    consume();
    ExprPtr inner = parseExpr();
    if (!inner)
      return nullptr;
    if (!tok.is(Token::r_paren)) {
      (void)emitError(getMissingLoc(),
                      "expected ')' to close '(', found " + tok.describe(),
                      start.getLoc(), "'(' opened here");
      return nullptr;
    }
    consume();
    return inner;
  }
  case Token::l_square:
    return parseList();
  default:
    (void)emitExpected("an expression");
    return nullptr;
  }
}

/// list ::= '[' (expr (',' expr)* ','?)? ']'
ExprPtr Parser::parseList() {
  NestingGuard guard(*this);
  if (!guard.ok)
    return nullptr;
  SMLoc start = tok.getLoc();
  consume(); // '['
  std::vector<ExprPtr> elements;
  while (!tok.is(Token::r_square)) {
    ExprPtr element = parseExpr();
    if (!element)
      return nullptr;
    elements.push_back(std::move(element));
    if (tok.is(Token::comma)) {
      consume();
      continue;
    }
    if (tok.is(Token::r_square))
      break;
    (void)emitExpected("',' or ']' in a list");
    return nullptr;
  }
  consume(); // ']'
  return checkDepth(
      std::make_unique<ListExpr>(rangeFrom(start), std::move(elements)));
}

std::unique_ptr<File> moec::frontend::parseFile(DiagnosticReporter &diags) {
  return Parser(diags).parseFile();
}
