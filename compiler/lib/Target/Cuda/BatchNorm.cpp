//===- BatchNorm.cpp - moe.batch_norm and its gradient --------------------===//
//
// batch_norm, training: `moments` (a grid of 32-column strips times a
// static number of row chunks, Welford partials; batchnorm.cuh), `stats`
// (one thread per column merges the chunks in order and writes the
// running statistics' update), `apply` (grid-stride normalisation). Eval:
// `stats` from the running statistics, then `apply`. The gradient
// recomputes the statistics the same way (bit for bit the forward's),
// then `sums` and `sums_finish` (the column sums of dy and dy * x_hat in
// the same strip-by-chunk layout, which give dbeta and dgamma), and
// `apply` (dx).
//
//===----------------------------------------------------------------------===//

#include "GroupEmitter.h"
#include "moe/IR/MoeOps.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cuda;

namespace {

/// Threads of every batch-norm launch (the moments layout needs 8 x 32).
constexpr int64_t kThreads = 256;

/// The static sizes of a batch-norm group: the row width, its 32-column
/// strips and the row chunks. Chunks keep about 1024 blocks in the
/// column launches whatever d is (8 to 128 chunks), so a ~1e5-row batch
/// spreads over the whole GPU instead of one block per strip.
struct BnLayout {
  int64_t d, strips, chunks;
};

FailureOr<BnLayout> bnLayout(GroupEmitter &e, Value x) {
  auto type = cast<RankedTensorType>(x.getType());
  if (type.getRank() < 2 || type.isDynamicDim(type.getRank() - 1))
    return e.error("batch norm needs a static row width");
  BnLayout l;
  l.d = type.getShape().back();
  l.strips = (l.d + 31) / 32;
  l.chunks = 128;
  while (l.chunks > 8 && l.strips * l.chunks > 1024)
    l.chunks /= 2;
  return l;
}

/// A null pointer argument of v's storage type (an absent value).
std::string nullOf(Value v, bool writable) {
  return "moec::gptr<" + std::string(writable ? "" : "const ") +
         storageTypeOf(v) + ">()";
}

/// `v` declared when it is present (and, for results, read after the
/// group), else a null pointer.
std::string optionalDeclared(GroupEmitter &e, CodeWriter &w, Value v,
                             bool writable, StringRef prefix, Value like) {
  if (v && (!writable || e.escapes(v)))
    return e.declared(w, v, writable, prefix);
  return nullOf(like, writable);
}

struct Scratches {
  int64_t partA = -1, partB = -1, partC = -1, stats = -1, sums = -1;
};

/// The x and running statistics that the statistics launches read.
struct StatsInputs {
  Value x, mask, runningMean, runningVar, newMean, newVar;
  double eps, momentum;
  bool training;
};

/// Emits the launches that fill the stats scratch ([3 * d]: mean, rstd, n)
/// and, where they are read, new_mean and new_var.
void emitStats(GroupEmitter &e, const BnLayout &l, const StatsInputs &in,
               Scratches &s) {
  MLIRContext *ctx = in.x.getContext();
  Type f32 = Float32Type::get(ctx);
  std::string p = storageTypeOf(in.runningMean);
  s.stats = e.scratch(f32, {SymDim(3 * l.d)});
  if (in.training) {
    SymShape partShape{SymDim(l.chunks * l.d)};
    s.partA = e.scratch(f32, partShape);
    s.partB = e.scratch(f32, partShape);
    s.partC = e.scratch(f32, partShape);
    e.beginKernel("moments");
    CodeWriter w;
    w.indent();
    e.declareScalar(w, "rows", e.rowsOf(in.x));
    std::string x = e.declared(w, in.x, false, "x");
    std::string mask = in.mask ? e.declared(w, in.mask, false, "mask")
                               : "moec::gptr<const int32_t>()";
    w.line(fill("moec::bnMomentPartials<${d}, ${t}>(rows, ${x}, ${mask}, "
                "${n}, ${mean}, ${m2});",
                {{"d", l.d},
                 {"t", storageTypeOf(in.x)},
                 {"x", x},
                 {"mask", mask},
                 {"n", e.bufferExpr(e.argument(s.partA), f32, true)},
                 {"mean", e.bufferExpr(e.argument(s.partB), f32, true)},
                 {"m2", e.bufferExpr(e.argument(s.partC), f32, true)}}));
    e.finishKernel(w.str(), GridDim{SymDim(l.strips), 1},
                   GridDim{SymDim(l.chunks), 1}, GridDim(), kThreads);
  }
  e.beginKernel("stats");
  CodeWriter w;
  w.indent();
  std::string rm = e.declared(w, in.runningMean, false, "running_mean");
  std::string rv = e.declared(w, in.runningVar, false, "running_var");
  std::string nm =
      optionalDeclared(e, w, in.newMean, true, "new_mean", in.runningMean);
  std::string nv =
      optionalDeclared(e, w, in.newVar, true, "new_var", in.runningVar);
  std::string stats = e.bufferExpr(e.argument(s.stats), f32, true);
  if (in.training)
    w.line(fill("moec::bnMomentsFinish<${d}, ${chunks}, ${p}>(${eps}, "
                "${momentum}, ${n}, ${mean}, ${m2}, ${rm}, ${rv}, ${stats}, "
                "${nm}, ${nv});",
                {{"d", l.d},
                 {"chunks", l.chunks},
                 {"p", p},
                 {"eps", floatLiteral(in.eps)},
                 {"momentum", floatLiteral(in.momentum)},
                 {"n", e.bufferExpr(e.argument(s.partA), f32, false)},
                 {"mean", e.bufferExpr(e.argument(s.partB), f32, false)},
                 {"m2", e.bufferExpr(e.argument(s.partC), f32, false)},
                 {"rm", rm},
                 {"rv", rv},
                 {"stats", stats},
                 {"nm", nm},
                 {"nv", nv}}));
  else
    w.line(fill("moec::bnRunningStats<${d}, ${p}>(${eps}, ${rm}, ${rv}, "
                "${stats}, ${nm}, ${nv});",
                {{"d", l.d},
                 {"p", p},
                 {"eps", floatLiteral(in.eps)},
                 {"rm", rm},
                 {"rv", rv},
                 {"stats", stats},
                 {"nm", nm},
                 {"nv", nv}}));
  e.finishKernel(w.str(), GridDim{SymDim(l.d), kThreads}, GridDim(),
                 GridDim(), kThreads);
}

/// A grid-stride launch over the n elements of x.
void finishElementwise(GroupEmitter &e, CodeWriter &w, Value x) {
  int64_t threads = e.tile(e.tiles().getThreads());
  int64_t items = e.tile(e.tiles().getItems());
  e.finishKernel(w.str(), GridDim{e.numElements(x), threads * items},
                 GridDim(), GridDim(), threads);
}

} // namespace

LogicalResult mlir::moe::cuda::emitBatchNormGroup(GroupEmitter &e) {
  auto op = cast<BatchNormOp>(e.first());
  FailureOr<BnLayout> l = bnLayout(e, op.getX());
  if (failed(l))
    return failure();
  Scratches s;
  emitStats(e, *l,
            {op.getX(), op.getMask(), op.getRunningMean(), op.getRunningVar(),
             op.getNewMean(), op.getNewVar(), op.getEps().convertToDouble(),
             op.getMomentum().convertToDouble(), op.getTraining()},
            s);
  if (!e.escapes(op.getResult()))
    return success();
  Type f32 = Float32Type::get(op->getContext());
  e.beginKernel("apply");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "n", e.numElements(op.getX()));
  std::string x = e.declared(w, op.getX(), false, "x");
  std::string gamma = e.declared(w, op.getGamma(), false, "gamma");
  std::string beta = e.declared(w, op.getBeta(), false, "beta");
  std::string y = e.declared(w, op.getResult(), true, "y");
  w.line(fill("moec::bnApply<${d}, ${t}, ${p}>(n, ${x}, ${stats}, ${gamma}, "
              "${beta}, ${y});",
              {{"d", l->d},
               {"t", storageTypeOf(op.getX())},
               {"p", storageTypeOf(op.getGamma())},
               {"x", x},
               {"stats", e.bufferExpr(e.argument(s.stats), f32, false)},
               {"gamma", gamma},
               {"beta", beta},
               {"y", y}}));
  finishElementwise(e, w, op.getX());
  return success();
}

LogicalResult mlir::moe::cuda::emitBatchNormGradGroup(GroupEmitter &e) {
  auto op = cast<BatchNormGradOp>(e.first());
  FailureOr<BnLayout> l = bnLayout(e, op.getX());
  if (failed(l))
    return failure();
  Type f32 = Float32Type::get(op->getContext());
  bool training = op.getTraining();
  Scratches s;
  emitStats(e, *l,
            {op.getX(), op.getMask(), op.getRunningMean(), op.getRunningVar(),
             Value(), Value(), op.getEps().convertToDouble(), 0.1, training},
            s);
  std::string t = storageTypeOf(op.getX());
  std::string p = storageTypeOf(op.getGamma());
  bool needSums = training || e.escapes(op.getDgamma()) ||
                  e.escapes(op.getDbeta());
  if (needSums) {
    SymShape partShape{SymDim(l->chunks * l->d)};
    int64_t partA = e.scratch(f32, partShape);
    int64_t partB = e.scratch(f32, partShape);
    s.sums = e.scratch(f32, {SymDim(2 * l->d)});
    e.beginKernel("sums");
    CodeWriter w;
    w.indent();
    e.declareScalar(w, "rows", e.rowsOf(op.getX()));
    std::string x = e.declared(w, op.getX(), false, "x");
    std::string dy = e.declared(w, op.getDy(), false, "dy");
    w.line(fill("moec::bnGradPartials<${d}, ${t}>(rows, ${x}, ${dy}, "
                "${stats}, ${a}, ${b});",
                {{"d", l->d},
                 {"t", t},
                 {"x", x},
                 {"dy", dy},
                 {"stats", e.bufferExpr(e.argument(s.stats), f32, false)},
                 {"a", e.bufferExpr(e.argument(partA), f32, true)},
                 {"b", e.bufferExpr(e.argument(partB), f32, true)}}));
    e.finishKernel(w.str(), GridDim{SymDim(l->strips), 1},
                   GridDim{SymDim(l->chunks), 1}, GridDim(), kThreads);

    e.beginKernel("sums_finish");
    CodeWriter f;
    f.indent();
    std::string dgamma =
        optionalDeclared(e, f, op.getDgamma(), true, "dgamma", op.getGamma());
    std::string dbeta =
        optionalDeclared(e, f, op.getDbeta(), true, "dbeta", op.getGamma());
    f.line(fill("moec::bnGradFinish<${d}, ${chunks}, ${p}>(${a}, ${b}, "
                "${sums}, ${dgamma}, ${dbeta});",
                {{"d", l->d},
                 {"chunks", l->chunks},
                 {"p", p},
                 {"a", e.bufferExpr(e.argument(partA), f32, false)},
                 {"b", e.bufferExpr(e.argument(partB), f32, false)},
                 {"sums", e.bufferExpr(e.argument(s.sums), f32, true)},
                 {"dgamma", dgamma},
                 {"dbeta", dbeta}}));
    e.finishKernel(f.str(), GridDim{SymDim(l->d), kThreads}, GridDim(),
                   GridDim(), kThreads);
  }
  if (!e.escapes(op.getDx()))
    return success();
  e.beginKernel("apply");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "n", e.numElements(op.getX()));
  std::string x = e.declared(w, op.getX(), false, "x");
  std::string dy = e.declared(w, op.getDy(), false, "dy");
  std::string mask = op.getMask() && training
                         ? e.declared(w, op.getMask(), false, "mask")
                         : "moec::gptr<const int32_t>()";
  std::string gamma = e.declared(w, op.getGamma(), false, "gamma");
  std::string dx = e.declared(w, op.getDx(), true, "dx");
  w.line(fill("moec::bnGradApply<${d}, ${training}, ${t}, ${p}>(n, ${x}, "
              "${dy}, ${mask}, ${stats}, ${sums}, ${gamma}, ${dx});",
              {{"d", l->d},
               {"training", training},
               {"t", t},
               {"p", p},
               {"x", x},
               {"dy", dy},
               {"mask", mask},
               {"stats", e.bufferExpr(e.argument(s.stats), f32, false)},
               {"sums", needSums
                            ? e.bufferExpr(e.argument(s.sums), f32, false)
                            : std::string("moec::gptr<const float>()")},
               {"gamma", gamma},
               {"dx", dx}}));
  finishElementwise(e, w, op.getX());
  return success();
}
