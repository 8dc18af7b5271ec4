//===- Arithmetic.cpp - operators on .moe values --------------------------===//
//
// Part of moec. See Values.h. The rules:
//   + - *   int when both operands are ints (overflow is an error), else
//           float;
//   /       always float;
//   //      floor division: int on ints, floor(a / b) as a float otherwise;
//   %       modulo with the sign of the divisor (as in Python), int on ints;
//   **      int when both are ints and the exponent is >= 0, else float;
//   == !=   on two numbers, bools, strings or symbols;
//   < <= > >= on two numbers.
// Dividing by zero, a float result that is not finite, and an int result
// that does not fit in 64 bits are errors.
//
//===----------------------------------------------------------------------===//

#include "Values.h"
#include "llvm/Support/MathExtras.h"
#include <cmath>
#include <limits>

using namespace moec::frontend;
using namespace moec::frontend::ast;
using llvm::failure;
using llvm::FailureOr;

static bool isNumber(const SpecValue &value) {
  return value.kind == SpecValue::Kind::Int ||
         value.kind == SpecValue::Kind::Float;
}

static double toDouble(const SpecValue &value) {
  return value.kind == SpecValue::Kind::Int
             ? static_cast<double>(value.intValue)
             : value.floatValue;
}

namespace {
/// Evaluates one BinaryExpr whose operands are already values.
class BinaryOp {
public:
  BinaryOp(const BinaryExpr &expr, const SpecValue &lhs, const SpecValue &rhs,
           DiagnosticReporter &diags)
      : expr(expr), lhs(lhs), rhs(rhs), diags(diags),
        op(BinaryExpr::getOpSpelling(expr.getOp())) {}

  FailureOr<SpecValue> apply();

private:
  llvm::LogicalResult emitError(const llvm::Twine &message) {
    return diags.error(expr.getOpRange().Start, message);
  }
  /// "<lhs> <op> <rhs>", as in "4 * d" with the values substituted.
  std::string describe() const {
    return formatValue(lhs) + " " + op.str() + " " + formatValue(rhs);
  }
  llvm::LogicalResult typeError(llvm::StringRef needs) {
    return emitError("operands of '" + op + "' must be " + needs + ", found " +
                     getTypeName(lhs) + " and " + getTypeName(rhs));
  }
  llvm::LogicalResult overflowError() {
    return emitError("integer overflow: " + describe() +
                     " does not fit in a 64-bit int");
  }
  FailureOr<SpecValue> makeInt(int64_t value) {
    return moec::frontend::makeInt(value, expr.getRange());
  }
  /// A float result, which must be finite.
  FailureOr<SpecValue> makeFloat(double value) {
    if (std::isnan(value))
      return emitError(describe() + " is not a real number");
    if (!std::isfinite(value))
      return emitError(describe() + " is too large for a 64-bit float");
    return moec::frontend::makeFloat(value, expr.getRange());
  }

  FailureOr<SpecValue> applyArith();
  FailureOr<SpecValue> applyPow();
  FailureOr<SpecValue> applyEquality();
  FailureOr<SpecValue> applyOrdering();

  const BinaryExpr &expr;
  const SpecValue &lhs;
  const SpecValue &rhs;
  DiagnosticReporter &diags;
  llvm::StringRef op;
};
} // namespace

FailureOr<SpecValue> BinaryOp::apply() {
  switch (expr.getOp()) {
  case BinaryExpr::Op::Add:
  case BinaryExpr::Op::Sub:
  case BinaryExpr::Op::Mul:
  case BinaryExpr::Op::Div:
  case BinaryExpr::Op::FloorDiv:
  case BinaryExpr::Op::Mod:
    return applyArith();
  case BinaryExpr::Op::Pow:
    return applyPow();
  case BinaryExpr::Op::Eq:
  case BinaryExpr::Op::Ne:
    return applyEquality();
  case BinaryExpr::Op::Lt:
  case BinaryExpr::Op::Le:
  case BinaryExpr::Op::Gt:
  case BinaryExpr::Op::Ge:
    return applyOrdering();
  case BinaryExpr::Op::And:
  case BinaryExpr::Op::Or:
    break;
  }
  return emitError("'" + op + "' is evaluated by the evaluator");
}

FailureOr<SpecValue> BinaryOp::applyArith() {
  if (!isNumber(lhs) || !isNumber(rhs))
    return typeError("numbers");
  BinaryExpr::Op kind = expr.getOp();
  bool isZero = rhs.kind == SpecValue::Kind::Int ? rhs.intValue == 0
                                                 : rhs.floatValue == 0.0;
  if (isZero &&
      (kind == BinaryExpr::Op::Div || kind == BinaryExpr::Op::FloorDiv ||
       kind == BinaryExpr::Op::Mod))
    return emitError(kind == BinaryExpr::Op::Mod
                         ? "modulo by zero: " + describe()
                         : "division by zero: " + describe());

  if (lhs.kind == SpecValue::Kind::Int && rhs.kind == SpecValue::Kind::Int &&
      kind != BinaryExpr::Op::Div) {
    int64_t a = lhs.intValue, b = rhs.intValue, result = 0;
    switch (kind) {
    case BinaryExpr::Op::Add:
      if (llvm::AddOverflow(a, b, result))
        return overflowError();
      return makeInt(result);
    case BinaryExpr::Op::Sub:
      if (llvm::SubOverflow(a, b, result))
        return overflowError();
      return makeInt(result);
    case BinaryExpr::Op::Mul:
      if (llvm::MulOverflow(a, b, result))
        return overflowError();
      return makeInt(result);
    case BinaryExpr::Op::FloorDiv: {
      if (a == std::numeric_limits<int64_t>::min() && b == -1)
        return overflowError();
      int64_t quotient = a / b;
      if (a % b != 0 && ((a < 0) != (b < 0)))
        --quotient;
      return makeInt(quotient);
    }
    case BinaryExpr::Op::Mod: {
      if (b == -1)
        return makeInt(0);
      int64_t remainder = a % b;
      if (remainder != 0 && ((remainder < 0) != (b < 0)))
        remainder += b;
      return makeInt(remainder);
    }
    default:
      break;
    }
  }

  double a = toDouble(lhs), b = toDouble(rhs);
  switch (kind) {
  case BinaryExpr::Op::Add:
    return makeFloat(a + b);
  case BinaryExpr::Op::Sub:
    return makeFloat(a - b);
  case BinaryExpr::Op::Mul:
    return makeFloat(a * b);
  case BinaryExpr::Op::Div:
    return makeFloat(a / b);
  case BinaryExpr::Op::FloorDiv:
    return makeFloat(std::floor(a / b));
  case BinaryExpr::Op::Mod: {
    double remainder = std::fmod(a, b);
    if (remainder != 0 && ((remainder < 0) != (b < 0)))
      remainder += b;
    return makeFloat(remainder);
  }
  default:
    break;
  }
  return emitError("'" + op + "' is no arithmetic operator");
}

FailureOr<SpecValue> BinaryOp::applyPow() {
  if (!isNumber(lhs) || !isNumber(rhs))
    return typeError("numbers");
  if (lhs.kind == SpecValue::Kind::Int && rhs.kind == SpecValue::Kind::Int &&
      rhs.intValue >= 0) {
    int64_t base = lhs.intValue, result = 1;
    for (int64_t exponent = rhs.intValue; exponent > 0; exponent >>= 1) {
      if ((exponent & 1) && llvm::MulOverflow(result, base, result))
        return overflowError();
      if (exponent > 1 && llvm::MulOverflow(base, base, base))
        return overflowError();
    }
    return makeInt(result);
  }
  double base = toDouble(lhs), exponent = toDouble(rhs);
  if (base == 0 && exponent < 0)
    return emitError("division by zero: " + describe());
  return makeFloat(std::pow(base, exponent));
}

FailureOr<SpecValue> BinaryOp::applyEquality() {
  bool equal;
  if (isNumber(lhs) && isNumber(rhs)) {
    if (lhs.kind == SpecValue::Kind::Int && rhs.kind == SpecValue::Kind::Int)
      equal = lhs.intValue == rhs.intValue;
    else
      equal = toDouble(lhs) == toDouble(rhs);
  } else if (lhs.kind != rhs.kind) {
    return emitError("cannot compare " + getTypeName(lhs) + " and " +
                     getTypeName(rhs) + " with '" + op + "'");
  } else if (lhs.kind == SpecValue::Kind::Bool) {
    equal = lhs.boolValue == rhs.boolValue;
  } else if (lhs.kind == SpecValue::Kind::String ||
             lhs.kind == SpecValue::Kind::Symbol) {
    equal = lhs.text == rhs.text;
  } else {
    return emitError("cannot compare " + getTypeName(lhs) + "s with '" + op +
                     "'");
  }
  bool result = expr.getOp() == BinaryExpr::Op::Eq ? equal : !equal;
  return moec::frontend::makeBool(result, expr.getRange());
}

FailureOr<SpecValue> BinaryOp::applyOrdering() {
  if (!isNumber(lhs) || !isNumber(rhs))
    return typeError("numbers");
  bool less, equal;
  if (lhs.kind == SpecValue::Kind::Int && rhs.kind == SpecValue::Kind::Int) {
    less = lhs.intValue < rhs.intValue;
    equal = lhs.intValue == rhs.intValue;
  } else {
    less = toDouble(lhs) < toDouble(rhs);
    equal = toDouble(lhs) == toDouble(rhs);
  }
  bool result = false;
  switch (expr.getOp()) {
  case BinaryExpr::Op::Lt:
    result = less;
    break;
  case BinaryExpr::Op::Le:
    result = less || equal;
    break;
  case BinaryExpr::Op::Gt:
    result = !less && !equal;
    break;
  default: // Ge
    result = !less;
    break;
  }
  return moec::frontend::makeBool(result, expr.getRange());
}

FailureOr<SpecValue> moec::frontend::applyBinary(const BinaryExpr &expr,
                                                 const SpecValue &lhs,
                                                 const SpecValue &rhs,
                                                 DiagnosticReporter &diags) {
  return BinaryOp(expr, lhs, rhs, diags).apply();
}

FailureOr<SpecValue> moec::frontend::applyNeg(const UnaryExpr &expr,
                                              const SpecValue &operand,
                                              DiagnosticReporter &diags) {
  if (operand.kind == SpecValue::Kind::Int) {
    if (operand.intValue == std::numeric_limits<int64_t>::min())
      return diags.error(expr.getLoc(), "integer overflow: -(" +
                                            formatValue(operand) +
                                            ") does not fit in a 64-bit int");
    return makeInt(-operand.intValue, expr.getRange());
  }
  if (operand.kind == SpecValue::Kind::Float)
    return makeFloat(-operand.floatValue, expr.getRange());
  return diags.error(expr.getLoc(), "operand of '-' must be a number, found " +
                                        getTypeName(operand));
}
