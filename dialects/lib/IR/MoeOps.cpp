//===- MoeOps.cpp - moe op verifiers and shape functions -----------------===//
//
// Each op's shape function is its verifier: verify() runs it on the operand
// types (dynamic dimensions unknown) and checks the declared result types
// against what it computes. moe-infer-shapes runs it on symbolic shapes.
//
//===----------------------------------------------------------------------===//

#include "moe/IR/MoeOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include <cmath>

#include <cmath>

using namespace mlir;
using namespace mlir::moe;

#include "moe/IR/MoeInterfaces.cpp.inc"

namespace {

/// Checks operand shapes for one op and reports the first mismatch.
class ShapeCheck {
public:
  ShapeCheck(Operation *op, ArrayRef<SymShape> shapes)
      : op(op), shapes(shapes) {}

  const SymShape &operator[](unsigned i) const { return shapes[i]; }
  bool has(unsigned i) const { return i < shapes.size(); }

  /// Operand `i` (called `name`) has exactly `rank` dimensions.
  LogicalResult rank(unsigned i, StringRef name, unsigned rank) {
    if (shapes[i].size() == rank)
      return success();
    return op->emitOpError() << name << " must have rank " << rank
                             << ", got " << shapeStr(shapes[i]);
  }
  /// Operand `i` has at least `rank` dimensions.
  LogicalResult minRank(unsigned i, StringRef name, unsigned rank) {
    if (shapes[i].size() >= rank)
      return success();
    return op->emitOpError() << name << " must have rank >= " << rank
                             << ", got " << shapeStr(shapes[i]);
  }
  /// `actual` (described by `what`) equals `expected`, unless one is unknown.
  LogicalResult dim(const SymDim &actual, const SymDim &expected,
                    const Twine &what) {
    if (actual.isUnknown() || expected.isUnknown() || actual == expected)
      return success();
    return op->emitOpError() << what << " must be " << expected.str()
                             << ", got " << actual.str();
  }
  /// Operand `i` has exactly `expected` as its shape.
  LogicalResult shape(unsigned i, StringRef name, ArrayRef<SymDim> expected) {
    if (shapes[i].size() != expected.size())
      return op->emitOpError() << name << " must have shape "
                               << shapeStr(expected) << ", got "
                               << shapeStr(shapes[i]);
    for (auto [a, e] : llvm::zip(shapes[i], expected))
      if (!a.isUnknown() && !e.isUnknown() && a != e)
        return op->emitOpError() << name << " must have shape "
                                 << shapeStr(expected) << ", got "
                                 << shapeStr(shapes[i]);
    return success();
  }
  /// Operand `i` has leading dimensions `lead` followed by `tail`.
  LogicalResult leadingThen(unsigned i, StringRef name, ArrayRef<SymDim> lead,
                            ArrayRef<SymDim> tail) {
    SymShape expected(lead.begin(), lead.end());
    expected.append(tail.begin(), tail.end());
    return shape(i, name, expected);
  }

  Operation *op;
  ArrayRef<SymShape> shapes;
};

SymShape lead(const SymShape &s, unsigned trailing = 1) {
  return SymShape(s.begin(), s.end() - trailing);
}
SymShape concat(ArrayRef<SymDim> a, ArrayRef<SymDim> b) {
  SymShape s(a.begin(), a.end());
  s.append(b.begin(), b.end());
  return s;
}
SymShape scalarShape() { return {}; }

/// Runs the op's shape function on its operand types and compares the
/// declared result types with the inferred ones.
LogicalResult verifyWithShapes(Operation *op) {
  SmallVector<SymShape> operands;
  for (Value v : op->getOperands()) {
    auto ranked = dyn_cast<RankedTensorType>(v.getType());
    if (!ranked)
      return success(); // Shapes are checked once moe-infer-shapes ran.
    operands.push_back(symShapeOf(ranked));
  }
  SmallVector<SymShape> results;
  if (failed(cast<SymbolicShapeOpInterface>(op).inferSymbolicShapes(operands,
                                                                   results)))
    return failure();
  if (results.size() != op->getNumResults())
    return op->emitOpError() << "internal error: shape function returned "
                             << results.size() << " shapes for "
                             << op->getNumResults() << " results";
  for (auto [i, pair] : llvm::enumerate(llvm::zip(op->getResults(), results))) {
    auto [value, shape] = pair;
    auto ranked = dyn_cast<RankedTensorType>(value.getType());
    if (!ranked)
      continue;
    bool ok = ranked.getRank() == static_cast<int64_t>(shape.size());
    for (unsigned d = 0; ok && d < shape.size(); ++d)
      ok = ranked.isDynamicDim(d) || shape[d].isUnknown() ||
           !shape[d].isStatic() || ranked.getDimSize(d) == shape[d].getStatic();
    if (!ok)
      return op->emitOpError()
             << "result #" << i << " has type " << ranked
             << " but its operands imply shape " << shapeStr(shape);
  }
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Declarations.
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  auto type = dyn_cast<RankedTensorType>(getType());
  if (!type || !type.hasStaticShape())
    return emitOpError("parameter type must be a statically shaped tensor, got ")
           << getType();
  if (!isa<FloatType>(type.getElementType()))
    return emitOpError("parameter element type must be a float type, got ")
           << type.getElementType();
  if (getInit() == Init::Sinusoidal && type.getRank() != 2)
    return emitOpError("sinusoidal needs a [positions, width] parameter, "
                       "got rank ")
           << type.getRank();
  if (getInit() == Init::XavierUniform && type.getRank() < 2)
    return emitOpError("xavier_uniform needs a parameter of rank >= 2, got ")
           << type;
  if (getInit() == Init::Orthogonal && type.getRank() < 2)
    return emitOpError("orthogonal needs a parameter of rank >= 2, got ")
           << type;
  if (getScale().convertToDouble() < 0)
    return emitOpError("init scale must be >= 0, got ")
           << getScale().convertToDouble();
  if (std::optional<APFloat> rowNorm = getRowNorm()) {
    double norm = rowNorm->convertToDouble();
    if (!(norm > 0) || !std::isfinite(norm))
      return emitOpError("row_norm must be a finite number > 0, got ") << norm;
    if (type.getRank() != 2)
      return emitOpError("row_norm needs a [rows, width] parameter, got ")
             << type;
    // Only the optimizer update writes the rescaled rows back.
    if (getFrozen())
      return emitOpError("row_norm needs a trainable parameter: a frozen one "
                         "is never written back");
  }
  if (std::optional<StringRef> group = getGroup()) {
    if (group->empty())
      return emitOpError("group must be a non-empty name");
    if (getFrozen())
      return emitOpError("a frozen parameter is trained by no group, got "
                         "group \"")
             << *group << "\"";
  }
  return success();
}

LogicalResult StateOp::verify() {
  auto type = dyn_cast<RankedTensorType>(getType());
  if (!type)
    return emitOpError("state type must be a ranked tensor, got ") << getType();
  if (static_cast<int64_t>(getDims().size()) != type.getRank())
    return emitOpError("dims has ") << getDims().size()
                                    << " entries for a tensor of rank "
                                    << type.getRank();
  for (auto [i, attr] : llvm::enumerate(getDims())) {
    std::optional<SymDim> dim = fromDimAttr(attr);
    if (!dim || dim->isUnknown())
      return emitOpError("dims entry #")
             << i << " must be a size or a symbol expression, got " << attr;
    if (dim->isStatic() != !type.isDynamicDim(i) ||
        (dim->isStatic() && dim->getStatic() != type.getDimSize(i)))
      return emitOpError("dims entry #")
             << i << " (" << dim->str() << ") does not match the type "
             << type;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Embeddings.
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                               SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.rank(1, "table", 2)))
    return failure();
  r.push_back(concat(s[0], {s[1][1]}));
  return success();
}
LogicalResult EmbeddingOp::verify() { return verifyWithShapes(*this); }

LogicalResult
EmbeddingGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                     SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.minRank(1, "dy", 1)) ||
      failed(c.leadingThen(1, "dy", s[0], {s[1].back()})))
    return failure();
  r.push_back({SymDim(getVocab()), s[1].back()});
  return success();
}
LogicalResult EmbeddingGradOp::verify() { return verifyWithShapes(*this); }

LogicalResult
AddPositionsOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                    SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.rank(0, "x", 3)) || failed(c.rank(1, "table", 2)) ||
      failed(c.rank(2, "start", 0)) ||
      failed(c.dim(s[1][1], s[0][2], "table width")))
    return failure();
  if (s[0][1].isStatic() && s[1][0].isStatic() &&
      s[0][1].getStatic() > s[1][0].getStatic())
    return emitOpError() << "sequence length " << s[0][1].str()
                         << " exceeds the position table length "
                         << s[1][0].str();
  r.push_back(s[0]);
  return success();
}
LogicalResult AddPositionsOp::verify() { return verifyWithShapes(*this); }

LogicalResult
AddPositionsGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                        SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.rank(0, "dy", 3)) || failed(c.rank(1, "start", 0)))
    return failure();
  r.push_back({SymDim(getMaxLen()), s[0][2]});
  return success();
}
LogicalResult AddPositionsGradOp::verify() { return verifyWithShapes(*this); }

LogicalResult RopeOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                          SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.rank(0, "x", 3)) || failed(c.rank(1, "start", 0)))
    return failure();
  int64_t heads = static_cast<int64_t>(getNumHeads());
  int64_t headDim = static_cast<int64_t>(getHeadDim());
  if (failed(c.dim(s[0][2], SymDim(heads * headDim),
                   "x width (num_heads * head_dim)")))
    return failure();
  r.push_back(s[0]);
  return success();
}
LogicalResult RopeOp::verify() {
  int64_t headDim = static_cast<int64_t>(getHeadDim());
  int64_t rotary = static_cast<int64_t>(getRotaryDim());
  if (rotary % 2 != 0 || rotary > headDim)
    return emitOpError("rotary_dim (")
           << rotary << ") must be even and at most head_dim (" << headDim
           << ")";
  double base = getBase().convertToDouble();
  if (!(base > 0) || !std::isfinite(base))
    return emitOpError("base must be a finite number > 0, got ") << base;
  return verifyWithShapes(*this);
}

//===----------------------------------------------------------------------===//
// Dense layers.
//===----------------------------------------------------------------------===//

/// [K, N] of a linear weight, whichever way it is stored.
static std::pair<SymDim, SymDim> linearKN(const SymShape &w, bool transposed) {
  return transposed ? std::make_pair(w[1], w[0]) : std::make_pair(w[0], w[1]);
}

LogicalResult LinearOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                            SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.minRank(0, "x", 1)) || failed(c.rank(1, "weight", 2)))
    return failure();
  auto [k, n] = linearKN(s[1], getTransposeWeight());
  if (failed(c.dim(k, s[0].back(), "weight input dimension")))
    return failure();
  if (getBias() && failed(c.shape(2, "bias", {n})))
    return failure();
  r.push_back(concat(lead(s[0]), {n}));
  return success();
}
LogicalResult LinearOp::verify() { return verifyWithShapes(*this); }

LogicalResult LinearGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                                SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.minRank(0, "x", 1)) || failed(c.rank(1, "weight", 2)))
    return failure();
  auto [k, n] = linearKN(s[1], getTransposeWeight());
  if (failed(c.dim(k, s[0].back(), "weight input dimension")) ||
      failed(c.leadingThen(2, "dy", lead(s[0]), {n})))
    return failure();
  r.push_back(s[0]);
  r.push_back(s[1]);
  if (getHasBias())
    r.push_back({n});
  return success();
}
LogicalResult LinearGradOp::verify() {
  if (getHasBias() != static_cast<bool>(getDbias()))
    return emitOpError(getHasBias() ? "has_bias is set but there is no dbias "
                                      "result"
                                    : "has a dbias result without has_bias");
  return verifyWithShapes(*this);
}

static LogicalResult checkEps(Operation *op, double eps) {
  if (eps > 0)
    return success();
  return op->emitOpError() << "eps must be > 0, got " << eps;
}

LogicalResult LayerNormOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                               SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.minRank(0, "x", 1)) ||
      failed(c.shape(1, "gamma", {s[0].back()})) ||
      failed(c.shape(2, "beta", {s[0].back()})))
    return failure();
  r.push_back(s[0]);
  return success();
}
LogicalResult LayerNormOp::verify() {
  if (failed(checkEps(*this, getEps().convertToDouble())))
    return failure();
  return verifyWithShapes(*this);
}

LogicalResult
LayerNormGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                     SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.minRank(0, "x", 1)) ||
      failed(c.shape(1, "gamma", {s[0].back()})) ||
      failed(c.shape(2, "dy", s[0])))
    return failure();
  r.push_back(s[0]);
  r.push_back(s[1]);
  r.push_back(s[1]);
  return success();
}
LogicalResult LayerNormGradOp::verify() {
  if (failed(checkEps(*this, getEps().convertToDouble())))
    return failure();
  return verifyWithShapes(*this);
}

LogicalResult RmsNormOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                             SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.minRank(0, "x", 1)) ||
      failed(c.shape(1, "gamma", {s[0].back()})))
    return failure();
  r.push_back(s[0]);
  return success();
}
LogicalResult RmsNormOp::verify() {
  if (failed(checkEps(*this, getEps().convertToDouble())))
    return failure();
  return verifyWithShapes(*this);
}

LogicalResult RmsNormGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                                 SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.minRank(0, "x", 1)) ||
      failed(c.shape(1, "gamma", {s[0].back()})) ||
      failed(c.shape(2, "dy", s[0])))
    return failure();
  r.push_back(s[0]);
  r.push_back(s[1]);
  return success();
}
LogicalResult RmsNormGradOp::verify() {
  if (failed(checkEps(*this, getEps().convertToDouble())))
    return failure();
  return verifyWithShapes(*this);
}

/// Batch norm's shapes: x `[N..., d]` (operand 0) with at least one leading
/// dimension, the `[d]` operands `vectors` (index and name), an optional
/// mask of x's leading shape at `maskIndex`, and dy at `dyIndex` (-1: none).
static LogicalResult
batchNormShapes(ShapeCheck &c, ArrayRef<std::pair<unsigned, StringRef>> vectors,
                int dyIndex, unsigned maskIndex) {
  if (failed(c.minRank(0, "x", 2)))
    return failure();
  SymDim d = c[0].back();
  for (auto [index, name] : vectors)
    if (failed(c.shape(index, name, {d})))
      return failure();
  if (dyIndex >= 0 && failed(c.shape(dyIndex, "dy", c[0])))
    return failure();
  if (c.has(maskIndex) && failed(c.shape(maskIndex, "mask", lead(c[0]))))
    return failure();
  return success();
}

static Type elementTypeOf(Value v) {
  return cast<TensorType>(v.getType()).getElementType();
}

/// The element types of batch norm: the `[d]` operands share one float
/// type, x's or f32 under a bf16 x (the gate's master type); each result
/// has the type of the operand it follows.
static LogicalResult
batchNormTypes(Operation *op, Value x, ArrayRef<std::pair<Value, StringRef>> vectors,
               ArrayRef<std::pair<Value, Value>> resultLikeOperand) {
  Type xType = elementTypeOf(x), pType = elementTypeOf(vectors.front().first);
  for (auto [v, name] : vectors)
    if (elementTypeOf(v) != pType)
      return op->emitOpError()
             << name << " must have the element type of " << vectors.front().second
             << " (" << pType << "), got " << elementTypeOf(v);
  if (pType != xType && !(xType.isBF16() && pType.isF32()))
    return op->emitOpError()
           << "gamma, beta and the running statistics must be " << xType
           << (xType.isBF16() ? " or f32" : "") << " like x, got " << pType;
  for (auto [result, like] : resultLikeOperand)
    if (elementTypeOf(result) != elementTypeOf(like))
      return op->emitOpError()
             << "result #" << cast<OpResult>(result).getResultNumber()
             << " must have element type " << elementTypeOf(like) << ", got "
             << elementTypeOf(result);
  return success();
}

LogicalResult BatchNormOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                               SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(batchNormShapes(c,
                             {{1, "gamma"},
                              {2, "beta"},
                              {3, "running_mean"},
                              {4, "running_var"}},
                             -1, 5)))
    return failure();
  r.push_back(s[0]);
  r.push_back(s[1]);
  r.push_back(s[1]);
  return success();
}
LogicalResult BatchNormOp::verify() {
  if (failed(checkEps(*this, getEps().convertToDouble())))
    return failure();
  double momentum = getMomentum().convertToDouble();
  if (!(momentum > 0 && momentum <= 1))
    return emitOpError("momentum must be in (0, 1], got ") << momentum;
  if (failed(batchNormTypes(*this, getX(),
                            {{getGamma(), "gamma"},
                             {getBeta(), "beta"},
                             {getRunningMean(), "running_mean"},
                             {getRunningVar(), "running_var"}},
                            {{getResult(), getX()},
                             {getNewMean(), getRunningMean()},
                             {getNewVar(), getRunningVar()}})))
    return failure();
  return verifyWithShapes(*this);
}

LogicalResult
BatchNormGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                     SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(batchNormShapes(
          c, {{1, "gamma"}, {2, "running_mean"}, {3, "running_var"}}, 4, 5)))
    return failure();
  r.push_back(s[0]);
  r.push_back(s[1]);
  r.push_back(s[1]);
  return success();
}
LogicalResult BatchNormGradOp::verify() {
  if (failed(checkEps(*this, getEps().convertToDouble())))
    return failure();
  if (elementTypeOf(getDy()) != elementTypeOf(getX()))
    return emitOpError("dy must have x's element type ")
           << elementTypeOf(getX()) << ", got " << elementTypeOf(getDy());
  if (failed(batchNormTypes(*this, getX(),
                            {{getGamma(), "gamma"},
                             {getRunningMean(), "running_mean"},
                             {getRunningVar(), "running_var"}},
                            {{getDx(), getX()},
                             {getDgamma(), getGamma()},
                             {getDbeta(), getGamma()}})))
    return failure();
  return verifyWithShapes(*this);
}

LogicalResult ActivationOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                                SmallVectorImpl<SymShape> &r) {
  r.push_back(s[0]);
  return success();
}
LogicalResult ActivationOp::verify() { return verifyWithShapes(*this); }

LogicalResult
ActivationGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                      SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.shape(1, "dy", s[0])))
    return failure();
  r.push_back(s[0]);
  return success();
}
LogicalResult ActivationGradOp::verify() { return verifyWithShapes(*this); }

LogicalResult CastOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                          SmallVectorImpl<SymShape> &r) {
  r.push_back(s[0]);
  return success();
}
LogicalResult CastOp::verify() { return verifyWithShapes(*this); }

static LogicalResult checkDropoutRate(Operation *op, double rate) {
  if (rate >= 0 && rate < 1)
    return success();
  return op->emitOpError() << "rate must be in [0, 1), got " << rate;
}

LogicalResult DropoutOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                             SmallVectorImpl<SymShape> &r) {
  r.push_back(s[0]);
  return success();
}
LogicalResult DropoutOp::verify() {
  if (failed(checkDropoutRate(*this, getRate().convertToDouble())))
    return failure();
  return verifyWithShapes(*this);
}

LogicalResult DropoutGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                                 SmallVectorImpl<SymShape> &r) {
  r.push_back(s[0]);
  return success();
}
LogicalResult DropoutGradOp::verify() {
  if (failed(checkDropoutRate(*this, getRate().convertToDouble())))
    return failure();
  return verifyWithShapes(*this);
}

//===----------------------------------------------------------------------===//
// Attention.
//===----------------------------------------------------------------------===//

/// Checks q [B, Sq, H*dh], k and v [B, Sk, Hkv*dh]; returns the lse shape.
static FailureOr<SymShape> checkAttention(ShapeCheck &c, int64_t heads,
                                          int64_t kvHeads) {
  Operation *op = c.op;
  if (heads % kvHeads != 0)
    return op->emitOpError() << "num_heads (" << heads
                             << ") must be a multiple of num_kv_heads ("
                             << kvHeads << ")";
  if (failed(c.rank(0, "q", 3)) || failed(c.rank(1, "k", 3)) ||
      failed(c.shape(2, "v", c[1])) ||
      failed(c.dim(c[1][0], c[0][0], "k batch dimension")))
    return failure();
  const SymDim &qWidth = c[0][2];
  if (qWidth.isStatic() && qWidth.getStatic() % heads != 0)
    return op->emitOpError() << "q width " << qWidth.str()
                             << " is not divisible by num_heads (" << heads
                             << ")";
  if (qWidth.isStatic()) {
    int64_t headDim = qWidth.getStatic() / heads;
    if (failed(c.dim(c[1][2], SymDim(headDim * kvHeads),
                     "k width (num_kv_heads * head_dim)")))
      return failure();
  }
  return SymShape{c[0][0], SymDim(heads), c[0][1]};
}

LogicalResult AttentionOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                               SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  FailureOr<SymShape> lse = checkAttention(c, getNumHeads(), getNumKvHeads());
  if (failed(lse))
    return failure();
  unsigned next = 3;
  if (getPast() && failed(c.rank(next++, "past", 0)))
    return failure();
  if (getKeyMask() &&
      failed(c.shape(next, "key_mask", {s[1][0], s[1][1]})))
    return failure();
  r.push_back(s[0]);
  r.push_back(*lse);
  return success();
}
LogicalResult AttentionOp::verify() { return verifyWithShapes(*this); }

LogicalResult
AttentionGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                     SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  FailureOr<SymShape> lse = checkAttention(c, getNumHeads(), getNumKvHeads());
  if (failed(lse) || failed(c.shape(3, "out", s[0])) ||
      failed(c.shape(4, "lse", *lse)) || failed(c.shape(5, "dout", s[0])) ||
      (getKeyMask() &&
       failed(c.shape(6, "key_mask", {s[1][0], s[1][1]}))))
    return failure();
  r.push_back(s[0]);
  r.push_back(s[1]);
  r.push_back(s[2]);
  return success();
}
LogicalResult AttentionGradOp::verify() { return verifyWithShapes(*this); }

LogicalResult
KvCacheWriteOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                    SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.rank(0, "cache", 3)) || failed(c.rank(1, "update", 3)) ||
      failed(c.rank(2, "past", 0)) ||
      failed(c.dim(s[1][0], s[0][0], "update batch dimension")) ||
      failed(c.dim(s[1][2], s[0][2], "update width")))
    return failure();
  r.push_back(s[0]);
  return success();
}
LogicalResult KvCacheWriteOp::verify() { return verifyWithShapes(*this); }

//===----------------------------------------------------------------------===//
// Routing.
//===----------------------------------------------------------------------===//

LogicalResult
TopKRouterOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                  SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.minRank(0, "logits", 1)))
    return failure();
  const SymDim &experts = s[0].back();
  if (experts.isStatic() && static_cast<int64_t>(getK()) > experts.getStatic())
    return emitOpError() << "k (" << getK()
                         << ") exceeds the number of experts ("
                         << experts.str() << ")";
  unsigned next = 1;
  if (getMask() && failed(c.shape(next++, "mask", lead(s[0]))))
    return failure();
  if (getSeed() && failed(c.rank(next, "seed", 0)))
    return failure();
  SymShape routed = concat(lead(s[0]), {SymDim(getK())});
  r.push_back(s[0]);
  r.append({routed, routed, routed});
  return success();
}
LogicalResult TopKRouterOp::verify() {
  if (getCapacity() != Capacity::None &&
      getCapacityFactor().convertToDouble() <= 0)
    return emitOpError("capacity_factor must be > 0, got ")
           << getCapacityFactor().convertToDouble();
  if (static_cast<int64_t>(getMinCapacity()) < 0)
    return emitOpError("min_capacity must be >= 0, got ")
           << static_cast<int64_t>(getMinCapacity());
  int64_t sample = getSample();
  if (sample < 0 || sample > static_cast<int64_t>(getK()))
    return emitOpError("sample must be in [0, k = ")
           << getK() << "], got " << sample;
  if (sample > 0 && !getSeed())
    return emitOpError("sample > 0 draws experts at random and needs a seed");
  return verifyWithShapes(*this);
}

LogicalResult
TopKRouterGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                      SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.minRank(0, "probs", 1)) || failed(c.minRank(1, "expert", 1)))
    return failure();
  SymShape routed = concat(lead(s[0]), {s[1].back()});
  unsigned next = 4;
  if (failed(c.shape(1, "expert", routed)) ||
      failed(c.shape(2, "gates", routed)) ||
      failed(c.shape(3, "slot", routed)) ||
      (getDgates() && failed(c.shape(next++, "dgates", routed))) ||
      (getDprobs() && failed(c.shape(next++, "dprobs", s[0]))))
    return failure();
  r.push_back(s[0]);
  return success();
}
LogicalResult TopKRouterGradOp::verify() {
  if (!getDgates() && !getDprobs())
    return emitOpError("needs at least one of dgates and dprobs");
  return verifyWithShapes(*this);
}

//===----------------------------------------------------------------------===//
// Gate scores.
//===----------------------------------------------------------------------===//

/// The result shape of an op that maps a `[..., C]` x (operand 0) to the
/// same shape, with any further operands of that shape too (dy).
static LogicalResult sameRowShape(ShapeCheck &c, SmallVectorImpl<SymShape> &r,
                                  StringRef second = "") {
  if (failed(c.minRank(0, "x", 1)) ||
      (!second.empty() && failed(c.shape(1, second, c[0]))))
    return failure();
  r.push_back(c[0]);
  return success();
}

LogicalResult
NormalizeRowsOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                     SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  return sameRowShape(c, r);
}
LogicalResult NormalizeRowsOp::verify() {
  if (failed(checkEps(*this, getEps().convertToDouble())))
    return failure();
  return verifyWithShapes(*this);
}

LogicalResult
NormalizeRowsGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                         SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  return sameRowShape(c, r, "dy");
}
LogicalResult NormalizeRowsGradOp::verify() {
  if (failed(checkEps(*this, getEps().convertToDouble())))
    return failure();
  return verifyWithShapes(*this);
}

LogicalResult FiniteOrMinOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                                 SmallVectorImpl<SymShape> &r) {
  r.push_back(s[0]);
  return success();
}
LogicalResult FiniteOrMinOp::verify() { return verifyWithShapes(*this); }

LogicalResult
FiniteOrMinGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                       SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.shape(1, "dy", s[0])))
    return failure();
  r.push_back(s[0]);
  return success();
}
LogicalResult FiniteOrMinGradOp::verify() { return verifyWithShapes(*this); }

//===----------------------------------------------------------------------===//
// The MAE layer.
//===----------------------------------------------------------------------===//

/// Fails unless `value` has the element type of `like` (called `name`).
static LogicalResult sameElementType(Operation *op, Value value,
                                     StringRef what, Value like,
                                     StringRef name) {
  Type a = getElementTypeOrSelf(value.getType());
  Type b = getElementTypeOrSelf(like.getType());
  if (a == b)
    return success();
  return op->emitOpError() << what << " must have " << name
                           << "'s element type " << b << ", got " << a;
}

/// The window attributes of moe.window_mean and its gradient.
static LogicalResult checkWindow(Operation *op, PoolWindow window,
                                 int64_t size, bool mask) {
  if (window == PoolWindow::Last && size < 1)
    return op->emitOpError("window last needs size >= 1, got ") << size;
  if (window != PoolWindow::Last && size != 0)
    return op->emitOpError("size is the length of a last window; window ")
           << stringifyPoolWindow(window) << " needs 0, got " << size;
  if (mask && window != PoolWindow::Sequence)
    return op->emitOpError("mask goes with window sequence only, not ")
           << stringifyPoolWindow(window);
  return success();
}

/// The result shape of a window mean of x `[B, S, d]`.
static SymShape windowMeanShape(const SymShape &x, PoolWindow window) {
  if (window == PoolWindow::Sequence)
    return {x[0], SymDim(1), x[2]};
  return x;
}

LogicalResult WindowMeanOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                                SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.rank(0, "x", 3)))
    return failure();
  unsigned next = 1;
  if (getHistory()) {
    unsigned h = next++;
    if (failed(c.rank(h, "history", 3)) ||
        failed(c.dim(s[h][0], s[0][0], "history batch dimension")) ||
        failed(c.dim(s[h][2], s[0][2], "history width")))
      return failure();
  }
  if (getPast() && failed(c.rank(next++, "past", 0)))
    return failure();
  if (getMask() && failed(c.shape(next, "mask", {s[0][0], s[0][1]})))
    return failure();
  r.push_back(windowMeanShape(s[0], getWindow()));
  return success();
}
LogicalResult WindowMeanOp::verify() {
  if (failed(checkWindow(*this, getWindow(), getSize(),
                         static_cast<bool>(getMask()))))
    return failure();
  if (getHistory() && !getPast())
    return emitOpError("history needs past, the number of positions before "
                       "x's first");
  if (getPast() && !getHistory())
    return emitOpError("past goes with history only");
  if (getHistory() && getWindow() == PoolWindow::Sequence)
    return emitOpError("history goes with the prefix and last windows only");
  if ((getHistory() && failed(sameElementType(*this, getHistory(), "history",
                                              getX(), "x"))) ||
      failed(sameElementType(*this, getResult(), "the result", getX(), "x")))
    return failure();
  return verifyWithShapes(*this);
}

LogicalResult
WindowMeanGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                      SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.rank(0, "x", 3)) ||
      failed(c.shape(1, "dy", windowMeanShape(s[0], getWindow()))) ||
      (getMask() && failed(c.shape(2, "mask", {s[0][0], s[0][1]}))))
    return failure();
  r.push_back(s[0]);
  return success();
}
LogicalResult WindowMeanGradOp::verify() {
  if (failed(checkWindow(*this, getWindow(), getSize(),
                         static_cast<bool>(getMask()))) ||
      failed(sameElementType(*this, getDx(), "dx", getX(), "x")))
    return failure();
  return verifyWithShapes(*this);
}

/// context `[B, S, H * dh]` (operand `ci`) and g `[B, G, H]` with G = 1 or
/// G = S (operand `gi`).
static LogicalResult checkHeadMixture(ShapeCheck &c, unsigned ci, unsigned gi,
                                      int64_t heads) {
  if (failed(c.rank(ci, "context", 3)) || failed(c.rank(gi, "g", 3)))
    return failure();
  const SymShape &context = c[ci], &g = c[gi];
  if (context[2].isStatic() && context[2].getStatic() % heads != 0)
    return c.op->emitOpError()
           << "context width " << context[2].str()
           << " is not divisible by num_heads (" << heads << ")";
  if (failed(c.dim(g[0], context[0], "g batch dimension")) ||
      failed(c.dim(g[2], SymDim(heads), "g width (num_heads)")))
    return failure();
  const SymDim &groups = g[1], &seq = context[1];
  if (groups.isUnknown() || seq.isUnknown() || groups == SymDim(1) ||
      groups == seq)
    return success();
  return c.op->emitOpError()
         << "g must have one row per sequence (1) or per position ("
         << seq.str() << "), got " << groups.str();
}

LogicalResult
HeadMixtureOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                   SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(checkHeadMixture(c, 0, 1, getNumHeads())))
    return failure();
  r.push_back(s[0]);
  return success();
}
LogicalResult HeadMixtureOp::verify() {
  if (failed(sameElementType(*this, getResult(), "the result", getContext(),
                             "context")))
    return failure();
  return verifyWithShapes(*this);
}

LogicalResult
HeadMixtureGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                       SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(checkHeadMixture(c, 1, 2, getNumHeads())) ||
      failed(c.shape(0, "dy", s[1])))
    return failure();
  r.push_back(s[1]);
  r.push_back(s[2]);
  return success();
}
LogicalResult HeadMixtureGradOp::verify() {
  if (failed(sameElementType(*this, getDcontext(), "dcontext", getContext(),
                             "context")) ||
      failed(sameElementType(*this, getDg(), "dg", getG(), "g")))
    return failure();
  return verifyWithShapes(*this);
}

LogicalResult
SampleExpertOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                    SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  SymDim experts(static_cast<int64_t>(getNumExperts()));
  if (failed(c.rank(0, "p", 3)) || failed(c.rank(1, "seed", 0)) ||
      (!getUniform() && failed(c.dim(s[0][2], experts, "p width (num_experts)"))))
    return failure();
  r.push_back({s[0][0], s[0][1], experts});
  return success();
}
LogicalResult SampleExpertOp::verify() { return verifyWithShapes(*this); }

LogicalResult GateStatsOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                               SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.rank(0, "g", 3)))
    return failure();
  const SymDim &heads = s[0][2];
  if (!heads.isStatic())
    return emitOpError() << "g needs a static number of experts, got "
                         << heads.str();
  r.push_back({SymDim(heads.getStatic() + 1)});
  return success();
}
LogicalResult GateStatsOp::verify() { return verifyWithShapes(*this); }

//===----------------------------------------------------------------------===//
// Experts.
//===----------------------------------------------------------------------===//

/// Checks the operands shared by expert_ffn and its gradient. Operand
/// positions follow the ODS order with the optional ones present or not.
template <typename OpT>
static LogicalResult checkExpertFfn(OpT op, ShapeCheck &c) {
  unsigned i = 0;
  unsigned x = i++, expert = i++, gates = i++, slot = i++, w1 = i++;
  int b1 = op.getB1() ? static_cast<int>(i++) : -1;
  unsigned w2 = i++;
  int b2 = op.getB2() ? static_cast<int>(i++) : -1;
  int w3 = op.getW3() ? static_cast<int>(i++) : -1;
  if (failed(c.minRank(x, "x", 1)) || failed(c.minRank(expert, "expert", 1)) ||
      failed(c.rank(w1, "w1", 3)))
    return failure();
  SymShape tokens = lead(c[x]);
  SymShape routed = concat(tokens, {c[expert].back()});
  SymDim e = c[w1][0], d = c[x].back(), f = c[w1][2];
  if (failed(c.shape(expert, "expert", routed)) ||
      failed(c.shape(gates, "gates", routed)) ||
      failed(c.shape(slot, "slot", routed)) ||
      failed(c.shape(w1, "w1", {e, d, f})) ||
      (b1 >= 0 && failed(c.shape(b1, "b1", {e, f}))) ||
      failed(c.shape(w2, "w2", {e, f, d})) ||
      (b2 >= 0 && failed(c.shape(b2, "b2", {e, d}))) ||
      (w3 >= 0 && failed(c.shape(w3, "w3", {e, d, f}))))
    return failure();
  return success();
}

LogicalResult ExpertFfnOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                               SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(checkExpertFfn(*this, c)))
    return failure();
  r.push_back(s[0]);
  return success();
}
LogicalResult ExpertFfnOp::verify() { return verifyWithShapes(*this); }

LogicalResult
ExpertFfnGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                     SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(checkExpertFfn(*this, c)) ||
      failed(c.shape(s.size() - 1, "dy", s[0])))
    return failure();
  // dx, dgates, then one gradient per weight operand in order.
  for (unsigned i = 0; i + 1 < s.size(); ++i)
    if (i != 1 && i != 3)
      r.push_back(s[i]);
  return success();
}
LogicalResult ExpertFfnGradOp::verify() {
  size_t weights = 2 + (getB1() ? 1 : 0) + (getB2() ? 1 : 0) + (getW3() ? 1 : 0);
  if (getDweights().size() != weights)
    return emitOpError("has ")
           << getDweights().size() << " weight gradients for " << weights
           << " weight operands";
  return verifyWithShapes(*this);
}

/// Checks x-like `[..., d]` operand `xi` against expert and slot `[..., k]`
/// (operands `ei`, `si`) and returns the routed shape `[..., k]`.
static FailureOr<SymShape> checkRouted(ShapeCheck &c, unsigned xi,
                                       StringRef xName, unsigned ei,
                                       unsigned si) {
  if (failed(c.minRank(xi, xName, 1)) || failed(c.minRank(ei, "expert", 1)))
    return failure();
  SymShape routed = concat(lead(c[xi]), {c[ei].back()});
  if (failed(c.shape(ei, "expert", routed)) ||
      failed(c.shape(si, "slot", routed)))
    return failure();
  return routed;
}

/// moe.expert_map and its gradient: x [..., d], weight [E, d, h].
static FailureOr<SymShape> checkExpertMap(ShapeCheck &c) {
  FailureOr<SymShape> routed = checkRouted(c, 0, "x", 1, 2);
  if (failed(routed) || failed(c.rank(3, "weight", 3)) ||
      failed(c.dim(c[3][1], c[0].back(), "weight input width")))
    return failure();
  return concat(lead(c[0]), {routed->back() * c[3][2]});
}

LogicalResult ExpertMapOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                               SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  FailureOr<SymShape> y = checkExpertMap(c);
  if (failed(y))
    return failure();
  r.push_back(*y);
  return success();
}
LogicalResult ExpertMapOp::verify() { return verifyWithShapes(*this); }

LogicalResult
ExpertMapGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                     SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  FailureOr<SymShape> y = checkExpertMap(c);
  if (failed(y) || failed(c.shape(4, "dy", *y)))
    return failure();
  r.push_back(s[0]);
  r.push_back(s[3]);
  return success();
}
LogicalResult ExpertMapGradOp::verify() { return verifyWithShapes(*this); }

/// moe.expert_reduce and its gradient: c [..., k * h], gates [..., k],
/// weight [E, h, d]; returns the result shape [..., d].
static FailureOr<SymShape> checkExpertReduce(ShapeCheck &c) {
  FailureOr<SymShape> routed = checkRouted(c, 0, "c", 1, 3);
  if (failed(routed) || failed(c.shape(2, "gates", *routed)) ||
      failed(c.rank(4, "weight", 3)) ||
      failed(c.dim(c[0].back(), routed->back() * c[4][1],
                   "c width (k * weight rows)")))
    return failure();
  return concat(lead(c[0]), {c[4][2]});
}

LogicalResult
ExpertReduceOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                    SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  FailureOr<SymShape> y = checkExpertReduce(c);
  if (failed(y))
    return failure();
  r.push_back(*y);
  return success();
}
LogicalResult ExpertReduceOp::verify() { return verifyWithShapes(*this); }

LogicalResult
ExpertReduceGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                        SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  FailureOr<SymShape> y = checkExpertReduce(c);
  if (failed(y) || failed(c.shape(5, "dy", *y)))
    return failure();
  r.push_back(s[0]);
  r.push_back(s[2]);
  r.push_back(s[4]);
  return success();
}
LogicalResult ExpertReduceGradOp::verify() { return verifyWithShapes(*this); }

LogicalResult
ExpertLoadOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                  SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.minRank(0, "expert", 1)) || failed(c.shape(1, "slot", s[0])))
    return failure();
  r.push_back({SymDim(getNumExperts())});
  return success();
}
LogicalResult ExpertLoadOp::verify() { return verifyWithShapes(*this); }

LogicalResult
RoutingStatsOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                    SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.minRank(0, "expert", 2)) || failed(c.shape(1, "slot", s[0])))
    return failure();
  const SymDim &rows = s[0][s[0].size() - 2];
  if (!rows.divideExactly(getParts()))
    return emitOpError() << "the rows " << rows.str() << " of expert "
                         << shapeStr(s[0]) << " are not a multiple of parts = "
                         << getParts();
  r.push_back({SymDim(6)});
  return success();
}
LogicalResult RoutingStatsOp::verify() { return verifyWithShapes(*this); }

//===----------------------------------------------------------------------===//
// Views.
//===----------------------------------------------------------------------===//

/// [..., rows, width] -> [..., rows * moved, width / moved] for a split
/// (moved = parts), the inverse for a merge.
static LogicalResult regroupShape(Operation *op, const SymShape &x,
                                  int64_t parts, bool split,
                                  SmallVectorImpl<SymShape> &r) {
  if (x.size() < 2)
    return op->emitOpError() << "x must have rank >= 2, got " << shapeStr(x);
  SymShape out = x;
  SymDim &rows = out[out.size() - 2], &width = out.back();
  SymDim &divided = split ? width : rows;
  std::optional<SymDim> quotient = divided.divideExactly(parts);
  if (!quotient)
    return op->emitOpError()
           << (split ? "the feature width " : "the row count ") << divided.str()
           << " of x " << shapeStr(x) << " is not a multiple of parts = "
           << parts;
  divided = *quotient;
  SymDim &multiplied = split ? rows : width;
  multiplied = multiplied * SymDim(parts);
  r.push_back(out);
  return success();
}

LogicalResult
SplitTokensOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                   SmallVectorImpl<SymShape> &r) {
  return regroupShape(*this, s[0], getParts(), /*split=*/true, r);
}
LogicalResult SplitTokensOp::verify() { return verifyWithShapes(*this); }

LogicalResult
MergeTokensOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                   SmallVectorImpl<SymShape> &r) {
  return regroupShape(*this, s[0], getParts(), /*split=*/false, r);
}
LogicalResult MergeTokensOp::verify() { return verifyWithShapes(*this); }

//===----------------------------------------------------------------------===//
// Losses.
//===----------------------------------------------------------------------===//

static LogicalResult checkProbsAndExpert(ShapeCheck &c) {
  if (failed(c.minRank(0, "probs", 1)) || failed(c.minRank(1, "expert", 1)))
    return failure();
  return c.shape(1, "expert", concat(lead(c[0]), {c[1].back()}));
}

LogicalResult
SwitchLossOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                  SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(checkProbsAndExpert(c)))
    return failure();
  r.push_back(scalarShape());
  return success();
}
LogicalResult SwitchLossOp::verify() { return verifyWithShapes(*this); }

LogicalResult
SwitchLossGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                      SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(checkProbsAndExpert(c)) || failed(c.rank(2, "dloss", 0)))
    return failure();
  r.push_back(s[0]);
  return success();
}
LogicalResult SwitchLossGradOp::verify() { return verifyWithShapes(*this); }

/// gates and expert [..., k] of moe.cv_loss and its gradient.
static LogicalResult checkCvLoss(ShapeCheck &c) {
  if (failed(c.minRank(0, "gates", 1)) || failed(c.shape(1, "expert", c[0])))
    return failure();
  return success();
}

LogicalResult CvLossOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                            SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(checkCvLoss(c)))
    return failure();
  r.push_back(scalarShape());
  return success();
}
LogicalResult CvLossOp::verify() { return verifyWithShapes(*this); }

LogicalResult CvLossGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                                SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(checkCvLoss(c)) || failed(c.rank(2, "dloss", 0)))
    return failure();
  r.push_back(s[0]);
  return success();
}
LogicalResult CvLossGradOp::verify() { return verifyWithShapes(*this); }

LogicalResult ZLossOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                           SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.minRank(0, "logits", 1)))
    return failure();
  r.push_back(scalarShape());
  return success();
}
LogicalResult ZLossOp::verify() { return verifyWithShapes(*this); }

LogicalResult ZLossGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                               SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.minRank(0, "logits", 1)) || failed(c.rank(1, "dloss", 0)))
    return failure();
  r.push_back(s[0]);
  return success();
}
LogicalResult ZLossGradOp::verify() { return verifyWithShapes(*this); }

static LogicalResult checkSmoothing(Operation *op, double a) {
  if (a >= 0 && a < 1)
    return success();
  return op->emitOpError() << "label_smoothing must be in [0, 1), got " << a;
}

LogicalResult
CrossEntropyOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                    SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.minRank(0, "logits", 1)) ||
      failed(c.shape(1, "targets", lead(s[0]))))
    return failure();
  r.push_back(scalarShape());
  r.push_back(scalarShape());
  if (getCorrect())
    r.push_back(scalarShape());
  return success();
}
LogicalResult CrossEntropyOp::verify() {
  if (failed(checkSmoothing(*this, getLabelSmoothing().convertToDouble())))
    return failure();
  return verifyWithShapes(*this);
}

LogicalResult
CrossEntropyGradOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                        SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.minRank(0, "logits", 1)) ||
      failed(c.shape(1, "targets", lead(s[0]))) ||
      failed(c.rank(2, "dloss", 0)))
    return failure();
  r.push_back(s[0]);
  return success();
}
LogicalResult CrossEntropyGradOp::verify() {
  if (failed(checkSmoothing(*this, getLabelSmoothing().convertToDouble())))
    return failure();
  return verifyWithShapes(*this);
}

//===----------------------------------------------------------------------===//
// Optimisation.
//===----------------------------------------------------------------------===//

LogicalResult
LrScheduleOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                  SmallVectorImpl<SymShape> &r) {
  r.push_back(scalarShape());
  return success();
}
LogicalResult LrScheduleOp::verify() {
  if (getBaseLr().convertToDouble() <= 0)
    return emitOpError("base_lr must be > 0, got ")
           << getBaseLr().convertToDouble();
  int64_t warmup = static_cast<int64_t>(getWarmup());
  int64_t total = static_cast<int64_t>(getTotalSteps());
  if (warmup < 0 || total < 0)
    return emitOpError("warmup and total_steps must be >= 0");
  LrSchedule kind = getKind();
  if ((kind == LrSchedule::Linear || kind == LrSchedule::Cosine ||
       kind == LrSchedule::Polynomial) &&
      total <= warmup)
    return emitOpError("total_steps (")
           << total << ") must exceed warmup (" << warmup
           << ") for a decaying schedule";
  double power = getPower().convertToDouble();
  if (!(power > 0) || !std::isfinite(power))
    return emitOpError("power must be a finite number > 0, got ") << power;
  return verifyWithShapes(*this);
}

LogicalResult
GlobalNormOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                  SmallVectorImpl<SymShape> &r) {
  r.push_back(scalarShape());
  return success();
}
LogicalResult GlobalNormOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  return verifyWithShapes(*this);
}

LogicalResult
AdamUpdateOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                  SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.shape(1, "grad", s[0])) || failed(c.shape(2, "m", s[0])) ||
      failed(c.shape(3, "v", s[0])))
    return failure();
  r.append({s[0], s[0], s[0]});
  return success();
}
LogicalResult AdamUpdateOp::verify() {
  double b1 = getBeta1().convertToDouble(), b2 = getBeta2().convertToDouble();
  if (!(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1))
    return emitOpError("beta1 and beta2 must be in [0, 1), got ")
           << b1 << " and " << b2;
  if (getEps().convertToDouble() <= 0)
    return emitOpError("eps must be > 0");
  return verifyWithShapes(*this);
}

LogicalResult RescaleRowsOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                                 SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  return sameRowShape(c, r);
}
LogicalResult RescaleRowsOp::verify() {
  double norm = getNorm().convertToDouble();
  if (!(norm > 0) || !std::isfinite(norm))
    return emitOpError("norm must be a finite number > 0, got ") << norm;
  return verifyWithShapes(*this);
}

LogicalResult
SgdUpdateOp::inferSymbolicShapes(ArrayRef<SymShape> s,
                                 SmallVectorImpl<SymShape> &r) {
  ShapeCheck c(*this, s);
  if (failed(c.shape(1, "grad", s[0])) || failed(c.shape(2, "m", s[0])))
    return failure();
  r.append({s[0], s[0]});
  return success();
}
LogicalResult SgdUpdateOp::verify() {
  if (getMomentum().convertToDouble() < 0)
    return emitOpError("momentum must be >= 0");
  return verifyWithShapes(*this);
}

//===----------------------------------------------------------------------===//
// Upstream ops used in moe programs.
//===----------------------------------------------------------------------===//

LogicalResult
mlir::moe::inferUpstreamShapes(Operation *op, ArrayRef<SymShape> operands,
                               SmallVectorImpl<SymShape> &results) {
  if (auto cst = dyn_cast<arith::ConstantOp>(op)) {
    auto type = dyn_cast<RankedTensorType>(cst.getType());
    if (!type || !type.hasStaticShape())
      return op->emitOpError("moe programs need statically shaped tensor "
                             "constants");
    results.push_back(symShapeOf(type));
    return success();
  }
  if (isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
          arith::NegFOp, arith::MaximumFOp, arith::MinimumFOp>(op)) {
    // Elementwise arith ops on tensors: all operands share one shape, except
    // that 0-d operands broadcast.
    SymShape shape;
    for (const SymShape &s : operands)
      if (s.size() > shape.size())
        shape = s;
    for (auto [i, s] : llvm::enumerate(operands)) {
      if (s.empty())
        continue;
      ShapeCheck c(op, operands);
      if (failed(c.shape(i, "operand", shape)))
        return failure();
    }
    results.push_back(shape);
    return success();
  }
  if (isa<func::ReturnOp>(op))
    return success();
  return op->emitOpError("is not supported in moe programs");
}

#define GET_OP_CLASSES
#include "moe/IR/MoeOps.cpp.inc"
