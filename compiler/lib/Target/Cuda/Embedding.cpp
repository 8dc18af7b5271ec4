//===- Embedding.cpp - embeddings, positions, KV caches -------------------===//
//
// Gathers and their gradients. The forward is a grid-stride loop over the
// output elements with the position embedding and any dropout fused in.
// The gradients are written without atomics: each output element is one
// thread's ordered sum (over the tokens of its id, found by a stable
// counting sort of the ids, or over the batch).
//
//===----------------------------------------------------------------------===//

#include "GroupEmitter.h"
#include "moe/IR/MoeOps.h"
#include "llvm/Support/FormatVariadic.h"
#include <optional>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cuda;

namespace {


const char *kGridStride =
    "for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + "
    "threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)";

} // namespace

LogicalResult mlir::moe::cuda::emitEmbeddingGroup(GroupEmitter &e) {
  const KernelGroup &g = e.group();
  Value out = g.ops.back()->getResult(0);
  const SymShape &shape = e.shapeOf(out);
  int64_t d = cast<RankedTensorType>(out.getType()).getShape().back();
  e.beginKernel("");
  CodeWriter w;
  w.indent();
  SymDim n = e.numElements(out);
  e.declareScalar(w, "n", n);
  llvm::DenseMap<Value, std::string> stores;
  for (Operation *op : g.ops)
    if (e.escapes(op->getResult(0)))
      stores[op->getResult(0)] = e.declared(w, op->getResult(0), true, "out");
  // Per-op operands declared up front.
  struct Piece {
    Operation *op;
    llvm::SmallVector<std::string> ptrs;
  };
  llvm::SmallVector<Piece> pieces;
  for (Operation *op : g.ops) {
    Piece piece{op, {}};
    for (Value v : op->getOperands())
      piece.ptrs.push_back(e.inGroup(v) ? std::string()
                                        : e.declared(w, v, false, "in"));
    pieces.push_back(piece);
  }
  // S: the sequence length, for the position of row t (= t % S).
  SymDim seq = shape.size() >= 3 ? shape[shape.size() - 2] : SymDim(1);
  e.declareScalar(w, "S", seq);
  {
    CodeWriter::Scope loop(w, kGridStride);
    w.line(llvm::formatv("const int64_t t = i / {0}, c = i % {0};", d));
    llvm::DenseMap<Value, std::string> values;
    for (Piece &piece : pieces) {
      Operation *op = piece.op;
      std::string v = e.fresh();
      if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
        double scale = embedding.getScale().convertToDouble();
        w.line(fill("const float ${v} = ${scale}moec::toFloat(${table}["
                    "static_cast<int64_t>(${ids}[t]) * ${d} + c]);",
                    {{"v", v},
                     {"scale", scale == 1.0 ? std::string()
                                            : floatLiteral(scale) + " * "},
                     {"table", piece.ptrs[1]},
                     {"ids", piece.ptrs[0]},
                     {"d", d}}));
      } else if (isa<AddPositionsOp>(op)) {
        std::string x = piece.ptrs[0].empty() ? values[op->getOperand(0)]
                                              : piece.ptrs[0] + "[i]";
        w.line(llvm::formatv("const float {0} = {1} + {2}[({3}[0] + t % S) * "
                             "{4} + c];",
                             v, x, piece.ptrs[1], piece.ptrs[2], d));
      } else {
        llvm::SmallVector<std::string> in;
        for (auto [operand, ptr] : llvm::zip(op->getOperands(), piece.ptrs))
          in.push_back(ptr.empty() ? values[operand]
                                   : cast<RankedTensorType>(operand.getType())
                                                 .getRank() == 0
                                         ? ptr + "[0]"
                                         : ptr + "[i]");
        FailureOr<std::string> r = e.elementwise(w, op, in, "i");
        if (failed(r))
          return op->emitOpError("cannot be fused into an embedding kernel");
        v = *r;
      }
      values[op->getResult(0)] = v;
      if (stores.count(op->getResult(0)))
        w.line(stores[op->getResult(0)] + "[i] = " + v + ";");
    }
  }
  int64_t threads = e.tile(e.tiles().getThreads()), items = e.tile(e.tiles().getItems());
  e.finishKernel(w.str(), GridDim{n, threads * items}, GridDim(), GridDim(),
                 threads);
  return success();
}

LogicalResult mlir::moe::cuda::emitEmbeddingGradGroup(GroupEmitter &e) {
  auto grad = cast<EmbeddingGradOp>(e.first());
  int64_t vocab = static_cast<int64_t>(grad.getVocab());
  int64_t d = cast<RankedTensorType>(grad.getDy().getType()).getShape().back();
  // Tokens sorted by id, stably: each id's tokens are then a run of
  // `order`, in token order, and the gradient is O(T d + vocab d).
  CountingSort sort = emitCountingSort(e, grad.getIds(), vocab);
  Type i32 = IntegerType::get(grad.getContext(), 32);
  e.beginKernel("sum");
  CodeWriter w;
  w.indent();
  std::string dy = e.declared(w, grad.getDy(), false, "dy");
  std::string out = e.declared(w, grad.getDtable(), true, "dtable");
  w.line("const moec::gptr<const int32_t> offsets = " +
         e.bufferExpr(e.argument(sort.offsets), i32, false) + ";");
  w.line("const moec::gptr<const int32_t> order = " +
         e.bufferExpr(e.argument(sort.order), i32, false) + ";");
  // Block v sums the rows of its tokens in token order (ids out of range
  // are in no run); an id without tokens gets zeros.
  w.line("const int64_t v = blockIdx.x;");
  w.line("const int32_t begin = offsets[v], end = offsets[v + 1];");
  {
    CodeWriter::Scope cols(w, llvm::formatv("for (int64_t c = threadIdx.x; c "
                                            "< {0}; c += blockDim.x)",
                                            d)
                                  .str());
    w.line("float sum = 0.0f;");
    w.line("for (int32_t k = begin; k < end; ++k)");
    w.line(llvm::formatv("  sum += {0}[static_cast<int64_t>(order[k]) * {1} "
                         "+ c];",
                         dy, d));
    double scale = grad.getScale().convertToDouble();
    w.line(fill("${out}[v * ${d} + c] = ${scale}sum;",
                {{"out", out},
                 {"d", d},
                 {"scale", scale == 1.0 ? std::string()
                                        : floatLiteral(scale) + " * "}}));
  }
  e.finishKernel(w.str(), GridDim{SymDim(vocab), 1}, GridDim(), GridDim(),
                 std::min<int64_t>(256, std::max<int64_t>(32, d)));
  return success();
}

LogicalResult mlir::moe::cuda::emitPositionsGradGroup(GroupEmitter &e) {
  auto grad = cast<AddPositionsGradOp>(e.first());
  const SymShape &shape = e.shapeOf(grad.getDy());
  int64_t maxLen = static_cast<int64_t>(grad.getMaxLen());
  int64_t d = cast<RankedTensorType>(grad.getDy().getType()).getShape().back();
  e.beginKernel("");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "B", shape[0]);
  e.declareScalar(w, "S", shape[1]);
  w.line(llvm::formatv("const int64_t n = {0};", maxLen * d));
  std::string dy = e.declared(w, grad.getDy(), false, "dy");
  std::string start = e.declared(w, grad.getStart(), false, "start");
  std::string out = e.declared(w, grad.getDtable(), true, "dtable");
  {
    CodeWriter::Scope loop(w, kGridStride);
    w.line(llvm::formatv("const int64_t s = i / {0} - {1}[0], c = i % {0};", d,
                         start));
    w.line("float sum = 0.0f;");
    w.line("if (s >= 0 && s < S)");
    w.line(llvm::formatv("  for (int64_t b = 0; b < B; ++b) sum += {0}[(b * S "
                         "+ s) * {1} + c];",
                         dy, d));
    w.line(out + "[i] = sum;");
  }
  e.finishKernel(w.str(), GridDim{SymDim(maxLen * d), 1024}, GridDim(),
                 GridDim(), 256);
  return success();
}

int mlir::moe::cuda::emitCacheCopies(GroupEmitter &e,
                                     ArrayRef<KvCacheWriteOp> writes,
                                     int64_t threads, int64_t perBlock) {
  int copies = 0;
  for (KvCacheWriteOp write : writes) {
    if (e.sameBuffer(write.getCache(), write.getResult()))
      continue;
    // A kernel name each: caches of other types give other code.
    e.beginKernel(copies ? "copy" + std::to_string(copies) : "copy");
    ++copies;
    CodeWriter c;
    c.indent();
    SymDim n = e.numElements(write.getCache());
    e.declareScalar(c, "n", n);
    std::string from = e.declared(c, write.getCache(), false, "from");
    std::string to = e.declared(c, write.getResult(), true, "to");
    {
      CodeWriter::Scope loop(c, kGridStride);
      c.line(to + "[i] = " + from + "[i];");
    }
    e.finishKernel(c.str(), GridDim{n, perBlock}, GridDim(), GridDim(),
                   threads);
  }
  return copies;
}

LogicalResult mlir::moe::cuda::emitKvWriteGroup(GroupEmitter &e) {
  SmallVector<KvCacheWriteOp> writes;
  for (Operation *op : e.group().ops)
    if (auto write = dyn_cast<KvCacheWriteOp>(op))
      writes.push_back(write);
  int64_t threads = e.tile(e.tiles().getThreads()),
          items = e.tile(e.tiles().getItems());
  int copies = emitCacheCopies(e, writes, threads, threads * items);
  // One launch writes every cache of the group (rotated keys, an MAE pool:
  // what no projection's epilogue writes), each in a grid-stride loop of
  // its own: the grid fits the first write, and the loops cover a larger
  // one.
  e.beginKernel(copies ? "write" : "");
  CodeWriter w;
  w.indent();
  for (KvCacheWriteOp write : writes) {
    const SymShape &updateShape = e.shapeOf(write.getUpdate());
    auto cacheType = cast<RankedTensorType>(write.getCache().getType());
    int64_t maxLen = cacheType.getDimSize(1), width = cacheType.getDimSize(2);
    // Each write's names in a block of its own when there are several.
    std::optional<CodeWriter::Scope> block;
    if (writes.size() > 1)
      block.emplace(w, "");
    e.declareScalar(w, "n", e.numElements(write.getUpdate()));
    e.declareScalar(w, "S", updateShape[1]);
    std::string update = e.declared(w, write.getUpdate(), false, "update");
    std::string past = e.declared(w, write.getPast(), false, "past");
    std::string cache = e.declared(w, write.getResult(), true, "cache");
    CodeWriter::Scope loop(w, kGridStride);
    w.line(llvm::formatv("const int64_t b = i / (S * {0}), s = i / {0} % S, c "
                         "= i % {0};",
                         width));
    w.line(llvm::formatv("{0}[(b * {1} + {2}[0] + s) * {3} + c] = {4}[i];", cache,
                         maxLen, past, width, update));
  }
  e.finishKernel(
      w.str(),
      GridDim{e.numElements(writes.front().getUpdate()), threads * items},
      GridDim(), GridDim(), threads);
  return success();
}
