//===- Lexer.cpp - the .moe lexer -----------------------------------------===//
//
// Part of moec. See Lexer.h; the lexical grammar is in frontend/GRAMMAR.md.
//
//===----------------------------------------------------------------------===//

#include "Lexer.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include <cmath>
#include <cstdlib>

using namespace moec::frontend;

//===----------------------------------------------------------------------===//
// Token
//===----------------------------------------------------------------------===//

/// The digits of a number token without its `_` separators.
static std::string stripSeparators(llvm::StringRef spelling) {
  std::string digits;
  digits.reserve(spelling.size());
  for (char c : spelling)
    if (c != '_')
      digits.push_back(c);
  return digits;
}

int64_t Token::getIntValue() const {
  int64_t value = 0;
  (void)llvm::StringRef(stripSeparators(spelling)).getAsInteger(10, value);
  return value;
}

double Token::getFloatValue() const {
  return std::strtod(stripSeparators(spelling).c_str(), nullptr);
}

std::string Token::getStringValue() const {
  // Drop the quotes; the lexer checked every escape.
  llvm::StringRef body = spelling.drop_front().drop_back();
  std::string value;
  value.reserve(body.size());
  for (size_t i = 0, e = body.size(); i < e; ++i) {
    char c = body[i];
    if (c != '\\' || i + 1 == e) {
      value.push_back(c);
      continue;
    }
    switch (body[++i]) {
    case 'n':
      value.push_back('\n');
      break;
    case 't':
      value.push_back('\t');
      break;
    default: // '"' and '\\'
      value.push_back(body[i]);
      break;
    }
  }
  return value;
}

std::string Token::describe() const {
  if (kind == eof)
    return "end of file";
  llvm::StringRef text = spelling;
  if (text.size() > 24)
    return ("'" + text.take_front(20) + "...'").str();
  return ("'" + text + "'").str();
}

llvm::StringRef Token::getKindSpelling(Kind kind) {
  switch (kind) {
  case eof:
    return "end of file";
  case error:
    return "an invalid token";
  case identifier:
    return "a name";
  case integer:
    return "an integer";
  case floatLiteral:
    return "a number";
  case string:
    return "a string";
  case kw_and:
    return "'and'";
  case kw_as:
    return "'as'";
  case kw_else:
    return "'else'";
  case kw_false:
    return "'false'";
  case kw_if:
    return "'if'";
  case kw_let:
    return "'let'";
  case kw_not:
    return "'not'";
  case kw_or:
    return "'or'";
  case kw_repeat:
    return "'repeat'";
  case kw_true:
    return "'true'";
  case l_brace:
    return "'{'";
  case r_brace:
    return "'}'";
  case l_paren:
    return "'('";
  case r_paren:
    return "')'";
  case l_square:
    return "'['";
  case r_square:
    return "']'";
  case comma:
    return "','";
  case semicolon:
    return "';'";
  case equal:
    return "'='";
  case plus:
    return "'+'";
  case minus:
    return "'-'";
  case star:
    return "'*'";
  case starstar:
    return "'**'";
  case slash:
    return "'/'";
  case slashslash:
    return "'//'";
  case percent:
    return "'%'";
  case equalequal:
    return "'=='";
  case notequal:
    return "'!='";
  case less:
    return "'<'";
  case lessequal:
    return "'<='";
  case greater:
    return "'>'";
  case greaterequal:
    return "'>='";
  }
  return "a token";
}

//===----------------------------------------------------------------------===//
// Lexer
//===----------------------------------------------------------------------===//

Lexer::Lexer(llvm::SourceMgr &sourceMgr, DiagnosticReporter &diags)
    : diags(diags) {
  buffer = sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())->getBuffer();
  curPtr = buffer.begin();
  // Skip a UTF-8 byte order mark.
  if (buffer.starts_with("\xEF\xBB\xBF"))
    curPtr += 3;
}

Token Lexer::emitError(const char *loc, const llvm::Twine &message,
                       const char *start) {
  (void)diags.error(llvm::SMLoc::getFromPointer(loc), message);
  return formToken(Token::error, start);
}

void Lexer::skipWhitespace() {
  while (curPtr != buffer.end()) {
    switch (*curPtr) {
    case '\n':
      atLineStart = true;
      ++curPtr;
      break;
    case ' ':
    case '\t':
    case '\r':
    case '\f':
    case '\v':
      ++curPtr;
      break;
    case '#':
      while (curPtr != buffer.end() && *curPtr != '\n')
        ++curPtr;
      break;
    default:
      return;
    }
  }
}

Token Lexer::lex() {
  skipWhitespace();
  const char *start = curPtr;
  if (curPtr == buffer.end())
    return formToken(Token::eof, start);

  char c = *curPtr++;
  // The next character, or '\0' at the end of the buffer.
  auto peek = [&] { return curPtr == buffer.end() ? '\0' : *curPtr; };
  auto lexPair = [&](char second, Token::Kind pairKind,
                     Token::Kind singleKind) {
    if (peek() == second) {
      ++curPtr;
      return formToken(pairKind, start);
    }
    return formToken(singleKind, start);
  };

  if (llvm::isAlpha(c) || c == '_')
    return lexIdentifier(start);
  if (llvm::isDigit(c))
    return lexNumber(start);

  switch (c) {
  case '"':
    return lexString(start);
  case '{':
    return formToken(Token::l_brace, start);
  case '}':
    return formToken(Token::r_brace, start);
  case '(':
    return formToken(Token::l_paren, start);
  case ')':
    return formToken(Token::r_paren, start);
  case '[':
    return formToken(Token::l_square, start);
  case ']':
    return formToken(Token::r_square, start);
  case ',':
    return formToken(Token::comma, start);
  case ';':
    return formToken(Token::semicolon, start);
  case '+':
    return formToken(Token::plus, start);
  case '-':
    return formToken(Token::minus, start);
  case '%':
    return formToken(Token::percent, start);
  case '*':
    return lexPair('*', Token::starstar, Token::star);
  case '/':
    return lexPair('/', Token::slashslash, Token::slash);
  case '=':
    return lexPair('=', Token::equalequal, Token::equal);
  case '<':
    return lexPair('=', Token::lessequal, Token::less);
  case '>':
    return lexPair('=', Token::greaterequal, Token::greater);
  case '!':
    if (peek() == '=') {
      ++curPtr;
      return formToken(Token::notequal, start);
    }
    return emitError(start,
                     "unexpected character '!'; write 'not' for "
                     "logical negation",
                     start);
  default:
    break;
  }

  if (static_cast<unsigned char>(c) >= 0x80) {
    // Swallow the rest of a UTF-8 sequence so it makes one error.
    while (curPtr != buffer.end() &&
           (static_cast<unsigned char>(*curPtr) & 0xC0) == 0x80)
      ++curPtr;
    return emitError(start, "unexpected non-ASCII character", start);
  }
  if (!llvm::isPrint(c))
    return emitError(start,
                     "unexpected character '\\x" +
                         llvm::toHex(llvm::StringRef(&c, 1),
                                     /*LowerCase=*/true) +
                         "'",
                     start);
  return emitError(start, "unexpected character '" + llvm::Twine(c) + "'",
                   start);
}

Token Lexer::lexIdentifier(const char *start) {
  while (curPtr != buffer.end() && (llvm::isAlnum(*curPtr) || *curPtr == '_'))
    ++curPtr;
  llvm::StringRef text(start, curPtr - start);
  Token::Kind kind = llvm::StringSwitch<Token::Kind>(text)
                         .Case("and", Token::kw_and)
                         .Case("as", Token::kw_as)
                         .Case("else", Token::kw_else)
                         .Case("false", Token::kw_false)
                         .Case("if", Token::kw_if)
                         .Case("let", Token::kw_let)
                         .Case("not", Token::kw_not)
                         .Case("or", Token::kw_or)
                         .Case("repeat", Token::kw_repeat)
                         .Case("true", Token::kw_true)
                         .Default(Token::identifier);
  return formToken(kind, start);
}

Token Lexer::lexNumber(const char *start) {
  auto at = [&](const char *p) { return p < buffer.end() ? *p : '\0'; };
  // Digits with `_` separators; a `_` counts only when a digit follows.
  auto lexDigits = [&] {
    while (llvm::isDigit(at(curPtr)) ||
           (at(curPtr) == '_' && llvm::isDigit(at(curPtr + 1))))
      ++curPtr;
  };
  lexDigits();

  bool isFloat = false;
  if (at(curPtr) == '.') {
    ++curPtr;
    isFloat = true;
    lexDigits();
  }
  // An exponent only when digits follow: `2else` is `2` then `else`.
  char e = at(curPtr);
  if (e == 'e' || e == 'E') {
    const char *digits = curPtr + 1;
    if (at(digits) == '+' || at(digits) == '-')
      ++digits;
    if (llvm::isDigit(at(digits))) {
      curPtr = digits;
      isFloat = true;
      lexDigits();
    }
  }

  llvm::StringRef text(start, curPtr - start);
  std::string digits = stripSeparators(text);
  if (isFloat) {
    double value = std::strtod(digits.c_str(), nullptr);
    if (!std::isfinite(value))
      return emitError(start,
                       "number '" + text + "' is too large for a 64-bit float",
                       start);
    return formToken(Token::floatLiteral, start);
  }
  int64_t value;
  if (llvm::StringRef(digits).getAsInteger(10, value))
    return emitError(start,
                     "integer '" + text +
                         "' is too large for a 64-bit int (the largest is "
                         "9223372036854775807)",
                     start);
  return formToken(Token::integer, start);
}

Token Lexer::lexString(const char *start) {
  const char *badEscape = nullptr;
  while (true) {
    if (curPtr == buffer.end() || *curPtr == '\n' || *curPtr == '\r')
      return emitError(start,
                       "unterminated string: a string must end with '\"' "
                       "on the line where it starts",
                       start);
    char c = *curPtr++;
    if (c == '"')
      break;
    if (c != '\\')
      continue;
    char escaped = curPtr == buffer.end() ? '\0' : *curPtr;
    if (escaped == '"' || escaped == '\\' || escaped == 'n' || escaped == 't') {
      ++curPtr;
      continue;
    }
    if (!badEscape)
      badEscape = curPtr - 1;
  }
  if (badEscape) {
    llvm::StringRef escape(badEscape, llvm::isPrint(badEscape[1]) ? 2 : 1);
    return emitError(badEscape,
                     "unknown escape '" + escape +
                         "' in string; the escapes are \\\", \\\\, \\n "
                         "and \\t",
                     start);
  }
  return formToken(Token::string, start);
}
