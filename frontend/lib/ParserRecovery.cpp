//===- ParserRecovery.cpp - .moe parsing after a syntax error -------------===//
//
// After the first syntax error in a statement, the statement is dropped and
// parsing resumes at the next token that starts a line outside the broken
// statement's brackets (or at the `}` closing the enclosing body). An error
// token from the lexer was already reported, so the parser reports nothing
// more for it. A few heuristics keep one mistake from causing more errors:
// bodies of broken headers, stray brackets, runs of junk at the top level,
// names the user meant to define. frontend/GRAMMAR.md lists them.
//
//===----------------------------------------------------------------------===//

#include "ParserImpl.h"
#include "llvm/ADT/StringExtras.h"

using namespace moec::frontend;
using namespace moec::frontend::ast;
using llvm::failure;
using llvm::LogicalResult;
using llvm::SMLoc;
using llvm::SMRange;
using llvm::StringRef;
using llvm::success;
using moec::frontend::detail::Parser;

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
