//===- ParserImpl.h - the .moe parser class ---------------------*- C++ -*-===//
//
// The recursive-descent parser behind parseFile (moec/Frontend/Parser.h),
// shared by its three source files: Parser.cpp (the file, items and
// statements), ParseExpr.cpp (expressions) and ParserRecovery.cpp (what it
// does after a syntax error). Each parse function carries its production
// from frontend/GRAMMAR.md.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_FRONTEND_LIB_PARSERIMPL_H
#define MOEC_FRONTEND_LIB_PARSERIMPL_H

#include "Lexer.h"
#include "moec/Frontend/AST.h"
#include "moec/Frontend/Diagnostics.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/LogicalResult.h"
#include <memory>
#include <vector>

namespace moec::frontend::detail {

using ast::Arg;
using ast::BinaryExpr;
using ast::Body;
using ast::ExprPtr;
using ast::File;
using ast::StmtPtr;
using llvm::failure;
using llvm::LogicalResult;
using llvm::SMLoc;
using llvm::SMRange;
using llvm::StringRef;

/// How deeply parentheses, brackets, calls, bodies and unary operators may
/// nest.
constexpr unsigned kMaxNesting = 256;
/// How tall an expression tree may grow (long `a + b + ...` chains).
constexpr unsigned kMaxExprDepth = 1024;

/// Parses the main buffer of a DiagnosticReporter's SourceMgr into an
/// ast::File, reporting syntax errors through the reporter.
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

  //===--------------------------------------------------------------------===//
  // Recovery (ParserRecovery.cpp)
  //===--------------------------------------------------------------------===//

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
  /// Whether the rest of the line from `loc` (and the lines it goes on to)
  /// closes a bracket it did not open.
  bool closesOuterBracket(SMLoc loc) const;
  /// Whether the line of `lBrace` closes it.
  bool closesBraceOnLine(const Token &lBrace) const;

  //===--------------------------------------------------------------------===//
  // Limits
  //===--------------------------------------------------------------------===//

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
  // Items and statements (Parser.cpp)
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
  // Expressions (ParseExpr.cpp)
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

} // namespace moec::frontend::detail

#endif // MOEC_FRONTEND_LIB_PARSERIMPL_H
