//===- Lexer.h - the .moe lexer ---------------------------------*- C++ -*-===//
//
// Splits a .moe buffer into tokens. A token is a StringRef into the buffer
// held by the llvm::SourceMgr, so its location and range come for free.
// Lexical errors (an unexpected character, an unterminated string, an
// integer literal too large for int64) are reported here, and the lexer
// returns an `error` token: the parser then recovers without reporting a
// second error for the same mistake.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_FRONTEND_LIB_LEXER_H
#define MOEC_FRONTEND_LIB_LEXER_H

#include "moec/Frontend/Diagnostics.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"
#include <cstdint>
#include <string>

namespace moec::frontend {

class Token {
public:
  enum Kind {
    // Markers.
    eof,
    error,

    // Values.
    identifier,
    integer,
    floatLiteral,
    string,

    // Keywords. `moe` is no keyword: it only means something as the first
    // token of the file, and `moe(experts = 8)` is a layer statement.
    kw_and,
    kw_as,
    kw_else,
    kw_false,
    kw_if,
    kw_let,
    kw_not,
    kw_or,
    kw_repeat,
    kw_true,

    // Punctuation.
    l_brace,
    r_brace,
    l_paren,
    r_paren,
    l_square,
    r_square,
    comma,
    semicolon,
    equal,

    // Operators.
    plus,
    minus,
    star,
    starstar,
    slash,
    slashslash,
    percent,
    equalequal,
    notequal,
    less,
    lessequal,
    greater,
    greaterequal,
  };

  Token() = default;
  Token(Kind kind, llvm::StringRef spelling, bool atLineStart)
      : kind(kind), spelling(spelling), atLineStart(atLineStart) {}

  Kind getKind() const { return kind; }
  bool is(Kind k) const { return kind == k; }
  template <typename... Kinds> bool isAny(Kinds... ks) const {
    return ((kind == ks) || ...);
  }
  bool isKeyword() const { return kind >= kw_and && kind <= kw_true; }

  /// The token's text as written (with the quotes of a string).
  llvm::StringRef getSpelling() const { return spelling; }

  /// True when the token is the first on its line.
  bool isAtLineStart() const { return atLineStart; }

  llvm::SMLoc getLoc() const {
    return llvm::SMLoc::getFromPointer(spelling.data());
  }
  llvm::SMLoc getEndLoc() const {
    return llvm::SMLoc::getFromPointer(spelling.data() + spelling.size());
  }
  llvm::SMRange getRange() const { return {getLoc(), getEndLoc()}; }

  /// The value of an `integer` token (checked by the lexer to fit).
  int64_t getIntValue() const;
  /// The value of a `floatLiteral` token (checked by the lexer to be
  /// finite).
  double getFloatValue() const;
  /// The contents of a `string` token with its escapes decoded.
  std::string getStringValue() const;

  /// How the token appears in a "found ..." message: `'heads'`, `'}'`,
  /// `end of file`.
  std::string describe() const;

  /// How a token of `kind` appears in an "expected ..." message, e.g. `'}'`.
  static llvm::StringRef getKindSpelling(Kind kind);

private:
  Kind kind = eof;
  llvm::StringRef spelling;
  bool atLineStart = false;
};

class Lexer {
public:
  Lexer(llvm::SourceMgr &sourceMgr, DiagnosticReporter &diags);

  /// Lexes and returns the next token.
  Token lex();

  /// The end of the buffer being lexed.
  const char *getBufferEnd() const { return buffer.end(); }

private:
  Token formToken(Token::Kind kind, const char *start) {
    Token token(kind, llvm::StringRef(start, curPtr - start), atLineStart);
    atLineStart = false;
    return token;
  }
  /// Reports `message` at `loc` and forms an error token from `start`.
  Token emitError(const char *loc, const llvm::Twine &message,
                  const char *start);

  /// Skips blanks, newlines and `#` comments, noting whether a newline was
  /// crossed.
  void skipWhitespace();

  Token lexIdentifier(const char *start);
  Token lexNumber(const char *start);
  Token lexString(const char *start);

  DiagnosticReporter &diags;
  llvm::StringRef buffer;
  const char *curPtr;
  /// Whether the next token is the first on its line.
  bool atLineStart = true;
};

} // namespace moec::frontend

#endif // MOEC_FRONTEND_LIB_LEXER_H
