//===- Attention.cpp - attention and its gradient -------------------------===//

#include "GroupEmitter.h"
#include "moe/IR/MoeOps.h"
#include "moec/Analysis/AttentionPath.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cuda;

namespace {


struct Geometry {
  int64_t heads, kvHeads, headDim;
  double scale;
  bool causal;
};

/// Declares `s`, the moec::AttentionShape of the launch; `past` is the
/// pointer of the cache length (a null one where the program has no cache),
/// or empty for a kernel that never reads a cache; `keyMask` the mask's
/// buffer, or null.
void shapeDecl(GroupEmitter &e, CodeWriter &w, Value q, Value k,
               const Geometry &geo, StringRef past, Value keyMask) {
  const SymShape &qs = e.shapeOf(q), &ks = e.shapeOf(k);
  e.declareScalar(w, "batch", qs[0]);
  e.declareScalar(w, "sq", qs[1]);
  // With a cache argument the key rows have a slot of their own even where
  // they are the query rows, so that the kernel reads the same with and
  // without a cache.
  e.declareScalar(w, "rows", ks[1], /*ownSlot=*/!past.empty());
  w.line("moec::AttentionShape s{};");
  w.line("s.batch = batch;");
  w.line("s.sq = sq;");
  w.line("s.rowsPerBatch = rows;");
  if (past.empty()) {
    w.line("s.kvLen = rows;");
    w.line("s.offset = rows - sq;");
  } else {
    w.line(llvm::formatv("s.kvLen = {0} ? {0}[0] + sq : rows;", past));
    w.line(llvm::formatv("s.offset = {0} ? {0}[0] : rows - sq;", past));
  }
  w.line(llvm::formatv("s.heads = {0};", geo.heads));
  w.line(llvm::formatv("s.kvHeads = {0};", geo.kvHeads));
  w.line(llvm::formatv("s.scale = {0};", floatLiteral(geo.scale)));
  w.line(llvm::formatv("s.causal = {0};", geo.causal ? "true" : "false"));
  if (keyMask)
    w.line("s.keyMask = " + e.declared(w, keyMask, false, "keyMask") + ";");
}

/// The registers a thread of a tensor-core attention kernel (forward, dq,
/// dk/dv) needs, by head dim: 128 (four blocks an SM) up to 32 dims; 168
/// (three) up to 64, where the fragments and accumulators of 16 rows take
/// 112 to 128 a lane and ptxas spills a few bytes at 128 (the forward,
/// which reads a cache length, dq and dk/dv on sm_90); 255 (two) beyond, as
/// FlashAttention-2 runs head dim 128.
void budgetTensorCoreRegisters(GroupEmitter &e, int64_t headDim) {
  if (headDim > 64)
    e.setRegisterBudget(255);
  else if (headDim > 32)
    e.setRegisterBudget(168);
}

/// Names the tiles an attention kernel runs in its header (fields in
/// alphabetical order, as the group's tiles print: for the tensor-core
/// kernels they are not the group's; `block_columns` where a head takes
/// several blocks) and returns them as the template arguments every
/// attention kernel takes: head_dim, tile_q, tile_k, threads, and the
/// output columns a block computes when that is below head_dim.
std::string kernelTiles(GroupEmitter &e, const Geometry &geo, int64_t tq,
                        int64_t tk, int64_t threads, int64_t columns = 0) {
  std::string header = fill(
      "head_dim=${headDim} threads=${threads} tile_k=${tk} tile_q=${tq}",
      {{"headDim", geo.headDim}, {"threads", threads}, {"tk", tk}, {"tq", tq}});
  std::string args = fill(
      "${headDim}, ${tq}, ${tk}, ${threads}",
      {{"headDim", geo.headDim}, {"tq", tq}, {"tk", tk}, {"threads", threads}});
  if (columns > 0 && columns < geo.headDim) {
    header = "block_columns=" + std::to_string(columns) + " " + header;
    args += ", " + std::to_string(columns);
  }
  e.setKernelTiles(std::move(header));
  return args;
}

} // namespace

LogicalResult mlir::moe::cuda::emitAttentionGroup(GroupEmitter &e) {
  auto op = cast<AttentionOp>(e.first());
  Geometry geo{static_cast<int64_t>(op.getNumHeads()),
               static_cast<int64_t>(op.getNumKvHeads()), attentionHeadDim(op),
               op.getScale().convertToDouble(), op.getCausal()};
  int64_t tq = e.tile(e.tiles().getTileQ()), tk = e.tile(e.tiles().getTileK()),
          threads = e.tile(e.tiles().getThreads());
  e.beginKernel("");
  CodeWriter w;
  w.indent();
  // The same arguments with and without a cache, so that the decode
  // program's attention is the training forward's kernel (NVRTC compiles
  // it once): q, k, v, out, the row statistics, the cache length. Without a
  // cache the row statistics are always stored, read or not, so that the
  // forward, loss and backward programs share it too (4 bytes a head and
  // query row); with one they are a null argument, as the cache length is
  // without.
  std::string q = e.declared(w, op.getQ(), false, "q");
  std::string k = e.declared(w, op.getK(), false, "k");
  std::string v = e.declared(w, op.getV(), false, "v");
  std::string out = e.declared(w, op.getResult(), true, "out");
  std::string lse =
      e.escapes(op.getLse()) || !op.getPast()
          ? e.declared(w, op.getLse(), true, "lse")
          : e.declaredNull(w, elementTypeOf(op.getLse()), true, "lse");
  std::string past =
      op.getPast() ? e.declared(w, op.getPast(), false, "past")
                   : e.declaredNull(w, IntegerType::get(op.getContext(), 64),
                                    false, "past");
  shapeDecl(e, w, op.getQ(), op.getK(), geo, past, op.getKeyMask());
  // bf16 with a head dim of 16 to 128 in steps of 16, or of 160 to 256 in
  // steps of 32, runs on the tensor cores, everything else on CUDA cores
  // (AttentionPath.h). Above 64 dims its Q, O and S fragments alone take
  // 112 registers a lane, and three resident blocks (168 registers) still
  // spill with the cache length. Past 128 dims each head takes HD / OD
  // blocks, each computing OD of its output columns.
  bool mma = attentionOnTensorCores(op);
  int64_t columns = mma ? attentionMmaOutputColumns(op) : geo.headDim;
  int64_t parts = geo.headDim / columns;
  if (mma)
    budgetTensorCoreRegisters(e, geo.headDim);
  std::string tiles = kernelTiles(e, geo, tq, tk, threads, columns);
  w.line(fill("moec::${kernel}<${tiles}>(s, ${q}, ${k}, ${v}, ${out}, "
              "${lse});",
              {{"kernel", mma ? "attentionForwardMma" : "attentionForward"},
               {"tiles", tiles},
               {"q", q},
               {"k", k},
               {"v", v},
               {"out", out},
               {"lse", lse}}));
  const SymShape &qs = e.shapeOf(op.getQ());
  e.finishKernel(w.str(), GridDim{qs[1], tq},
                 GridDim{SymDim(geo.heads * parts), 1}, GridDim{qs[0], 1},
                 threads);
  return success();
}

LogicalResult mlir::moe::cuda::emitAttentionGradGroup(GroupEmitter &e) {
  auto op = cast<AttentionGradOp>(e.first());
  Geometry geo{static_cast<int64_t>(op.getNumHeads()),
               static_cast<int64_t>(op.getNumKvHeads()), attentionHeadDim(op),
               op.getScale().convertToDouble(), op.getCausal()};
  int64_t tq = e.tile(e.tiles().getTileQ()), tk = e.tile(e.tiles().getTileK()),
          threads = e.tile(e.tiles().getThreads());
  const SymShape &qs = e.shapeOf(op.getQ()), &ks = e.shapeOf(op.getK());
  Type f32 = elementTypeOf(op.getLse());
  int64_t delta = e.scratch(f32, e.shapeOf(op.getLse()));

  // delta = <dout, out> per query row.
  e.beginKernel("delta");
  e.setKernelTiles(fill("head_dim=${headDim} threads=${threads}",
                        {{"headDim", geo.headDim}, {"threads", threads}}));
  {
    CodeWriter w;
    w.indent();
    shapeDecl(e, w, op.getQ(), op.getK(), geo, "", Value());
    std::string out = e.declared(w, op.getOut(), false, "out");
    std::string dout = e.declared(w, op.getDout(), false, "dout");
    w.line(llvm::formatv("moec::attentionDelta<{0}, {1}>(s, {2}, {3}, {4});",
                         geo.headDim, threads, out, dout,
                         e.bufferExpr(e.argument(delta), f32, true)));
    e.finishKernel(w.str(),
                   GridDim{qs[0] * qs[1] * SymDim(geo.heads), threads / 32},
                   GridDim(), GridDim(), threads);
  }
  // Both gradient kernels take (s, q, k, v, dout, lse, delta, ...).
  auto inputs = [&](CodeWriter &w) {
    shapeDecl(e, w, op.getQ(), op.getK(), geo, "", op.getKeyMask());
    std::string args = "s";
    for (auto [value, name] : {std::make_pair(op.getQ(), "q"),
                               std::make_pair(op.getK(), "k"),
                               std::make_pair(op.getV(), "v"),
                               std::make_pair(op.getDout(), "dout"),
                               std::make_pair(op.getLse(), "lse")})
      args += ", " + e.declared(w, value, false, name);
    return args + ", " + e.bufferExpr(e.argument(delta), f32, false);
  };
  if (e.escapes(op.getDq())) {
    // bf16 with a head dim of 16 to 128 in steps of 16, or of 32 up to
    // 256, computes dq on the tensor cores: 16 queries a warp against
    // 32-key tiles (16 past 128 dims, where each head takes two blocks of
    // half its columns, four of a quarter at 256; AttentionPath.h).
    bool mma = attentionGradQOnTensorCores(op);
    int64_t columns = mma ? attentionGradQMmaOutputColumns(op) : geo.headDim;
    int64_t parts = geo.headDim / columns;
    int64_t dqTq = mma ? 16 * (threads / 32) : tq;
    int64_t dqTk = mma ? attentionGradQMmaKeys(op) : tk;
    e.beginKernel("dq");
    if (mma)
      budgetTensorCoreRegisters(e, geo.headDim);
    std::string tiles = kernelTiles(e, geo, dqTq, dqTk, threads, columns);
    CodeWriter w;
    w.indent();
    std::string args = inputs(w);
    std::string dq = e.declared(w, op.getDq(), true, "dq");
    w.line(fill("moec::${kernel}<${tiles}>(${inputs}, ${dq});",
                {{"kernel", mma ? "attentionGradQMma" : "attentionGradQ"},
                 {"tiles", tiles},
                 {"inputs", args},
                 {"dq", dq}}));
    e.finishKernel(w.str(), GridDim{qs[1], dqTq},
                   GridDim{SymDim(geo.heads * parts), 1}, GridDim{qs[0], 1},
                   threads);
  }
  if (e.escapes(op.getDk()) || e.escapes(op.getDv())) {
    // bf16 with a head dim of 16 to 128 in steps of 16, or of 160 to 256 in
    // steps of 32, computes dk and dv on the tensor cores: 16 keys a warp
    // against 32-query tiles; past 112 dims each K/V head takes blocks of
    // 64 columns (80 at 160, 32 at 224; against 16-query tiles past 128),
    // which with the K and V fragments take 160 registers a lane at 128
    // (AttentionPath.h). On CUDA cores a lane keeps 2 x
    // ceil(HD / 32) accumulators for each of its warp's keys, which past 32 of
    // them spill at 128 registers (48 at head dim 80, 64 at 48 with sm_90's
    // 64-key tiles).
    bool mma = attentionGradKVOnTensorCores(op);
    int64_t columns = mma ? attentionGradKVMmaOutputColumns(op) : geo.headDim;
    int64_t parts = geo.headDim / columns;
    int64_t kvTq = mma ? attentionGradKVMmaQueries(op) : tq;
    int64_t kvTk = mma ? 16 * (threads / 32) : tk;
    e.beginKernel("dkv");
    int64_t accumulators =
        2 * ((geo.headDim + 31) / 32) * (tk / (threads / 32));
    if (mma)
      budgetTensorCoreRegisters(e, geo.headDim);
    else if (accumulators > 32)
      e.setRegisterBudget(168);
    std::string tiles = kernelTiles(e, geo, kvTq, kvTk, threads, columns);
    CodeWriter w;
    w.indent();
    std::string args = inputs(w);
    std::string dk = e.declared(w, op.getDk(), true, "dk");
    std::string dv = e.declared(w, op.getDv(), true, "dv");
    w.line(fill("moec::${kernel}<${tiles}>(${inputs}, ${dk}, ${dv});",
                {{"kernel", mma ? "attentionGradKVMma" : "attentionGradKV"},
                 {"tiles", tiles},
                 {"inputs", args},
                 {"dk", dk},
                 {"dv", dv}}));
    e.finishKernel(w.str(), GridDim{ks[1], kvTk},
                   GridDim{SymDim(geo.kvHeads * parts), 1}, GridDim{qs[0], 1},
                   threads);
  }
  return success();
}
