//===- ParseExpr.cpp - parse .moe expressions -----------------------------===//
//
// The expression half of the parser (see ParserImpl.h), one function per
// precedence level, each with its production from frontend/GRAMMAR.md.
//
//===----------------------------------------------------------------------===//

#include "ParserImpl.h"

using namespace moec::frontend;
using namespace moec::frontend::ast;
using llvm::failure;
using llvm::LogicalResult;
using llvm::SMLoc;
using llvm::SMRange;
using llvm::StringRef;
using llvm::success;
using moec::frontend::detail::Parser;

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
