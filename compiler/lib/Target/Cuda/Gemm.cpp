//===- Gemm.cpp - linear layers and their gradients -----------------------===//
//
// A linear op is one tiled GEMM whose store applies the group's fused
// epilogue: bias, activation, residual add, computed on the accumulator in
// registers; every intermediate value another group reads is stored too.
// A decoding layer's key or value projection stores its rows straight into
// the cache at the decoding position (moe.kv_cache_write in its group).
// Its gradient is up to three launches: dx = dy W^T and dW = x^T dy as
// GEMMs (each output accumulated by one thread over k: deterministic), and
// db as fixed-order column sums.
//
//===----------------------------------------------------------------------===//

#include "GemmTiles.h"
#include "moe/IR/MoeOps.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cuda;

namespace {

/// Writes the call of the GEMM tile for this block; `a` and `b` are the
/// values the operands are read from (their storage picks the tile).
/// The block's first column is `n0`, by default blockIdx.x tiles of TN.
/// With `fewRows` (decoding), a launch of at most moec::kGemmRowsMax rows
/// runs moec::gemmRows instead, which streams B once without the tile's
/// stages: the tile's TM is larger (asserted in the kernel), so the grid
/// has one block row and gemmRows takes every row.
void gemmCall(CodeWriter &w, Value a, Value b, int64_t tm, int64_t tn,
              int64_t tk, int64_t threads, StringRef m, StringRef n,
              StringRef k, StringRef loadA, StringRef loadB, StringRef store,
              StringRef n0 = "", bool fewRows = false) {
  std::string firstColumn =
      n0.empty() ? "static_cast<int64_t>(blockIdx.x) * " + std::to_string(tn)
                 : n0.str();
  GemmTile tile = gemmTileFor(a, b, tm, tn, tk, threads);
  std::string operands =
      fill("${n0}, ${m}, ${n}, ${k}, ${loadA}, ${loadB}, ${store}",
           {{"n0", firstColumn},
            {"m", m},
            {"n", n},
            {"k", k},
            {"loadA", loadA},
            {"loadB", loadB},
            {"store", store}});
  // M <= kGemmRowsMax must mean one block row, all of it gemmRows' rows.
  if (fewRows)
    w.line(fill("static_assert(${TM} > moec::kGemmRowsMax, \"gemmRows takes "
                "the rows of one block row\");",
                {{"TM", tm}}));
  writeGemmTileCall(
      w, tile, fill("static_cast<int64_t>(blockIdx.y) * ${TM}", {{"TM", tm}}),
      m, operands, fewRows);
}

/// A GEMM operand loader (`kind` is RowMajor or ColMajor) over `ptr`, which
/// holds `v`, with leading dimension `ld`.
std::string loader(StringRef kind, StringRef ptr, Value v, StringRef ld) {
  return llvm::formatv("moec::{0}<{1}>{{{2}, {3}}", kind, storageTypeOf(v), ptr,
                       ld)
      .str();
}
std::string loader(StringRef kind, StringRef ptr, Value v, int64_t ld) {
  return loader(kind, ptr, v, std::to_string(ld));
}

/// declareScalar's `ownSlot` for a weight's sizes: as kernel arguments in
/// slots of their own, not literals, the layers of a model whose GEMMs differ
/// only in them share one kernel (NVRTC compiles it once). The tiles loop
/// over runtime sizes and check bounds either way.
constexpr bool kOwnSlot = true;

/// The narrowest output width and depth cuBLASLt takes: below them a
/// library call costs more than the product, and the generated tile is as
/// fast.
constexpr int64_t kLibraryMinWidth = 64;

bool narrow(const SymDim &d) {
  return d.isStatic() && d.getStatic() < kLibraryMinWidth;
}

/// How D = A B (+ bias) is computed, given its operands' values and sizes:
/// cuBLASLt unless `fused` names what the kernel fuses, or cuBLASLt has no
/// matching type combination, or the product is too small to pay.
GemmPath choosePath(Value a, Value b, Value d, Value bias, StringRef fused,
                    const SymDim &m, const SymDim &n, const SymDim &k) {
  GemmPath path;
  Type ta = elementTypeOf(a), td = elementTypeOf(d);
  if (!fused.empty())
    path.why = ("fuses " + fused + " into its epilogue").str();
  else if (ta != elementTypeOf(b) ||
           !(ta.isF32() || ta.isBF16() || ta.isF64()) ||
           (td != ta && !(ta.isBF16() && td.isF32())) ||
           (bias && elementTypeOf(bias) != td))
    path.why = "operand types cuBLASLt does not pair";
  else if (ta.isF32() && f32MatmulOf(a) == "tf32x3")
    path.why = "f32_matmul = tf32x3 has no cuBLASLt compute type";
  else if (narrow(n) || narrow(k))
    path.why = llvm::formatv("narrower than {0} (n {1}, k {2}): the launch "
                             "costs more than the product",
                             kLibraryMinWidth, n.str(), k.str())
                   .str();
  if (!path.why.empty())
    return path;
  path.library = true;
  path.why = bias ? "dense GEMM with its bias, nothing fused"
                  : "dense GEMM, nothing fused";
  path.m = m;
  path.n = n;
  path.k = k;
  if (ta.isF64())
    path.compute = "f64";
  else
    path.compute = ta.isF32() && f32MatmulOf(a) == "tf32" ? "tf32" : "f32";
  return path;
}

/// `path` with its operands: kernel arguments and storage orders.
GemmPath withOperands(GemmPath path, GroupEmitter &e, Value a, bool aCol,
                      int64_t lda, Value b, bool bCol, int64_t ldb, Value d,
                      Value bias) {
  if (!path.library)
    return path;
  path.a = e.buffer(a);
  path.b = e.buffer(b);
  path.d = e.buffer(d);
  path.bias = bias ? e.buffer(bias) : -1;
  path.aColMajor = aCol;
  path.bColMajor = bCol;
  path.lda = lda;
  path.ldb = ldb;
  return path;
}

/// The store of element (m, col) of a cache write's product into the cache
/// `cache` at row m's position (moec::cacheRow).
std::string cacheStore(KvCacheWriteOp write, StringRef cache, StringRef past,
                       int64_t width, StringRef value) {
  int64_t maxLen =
      cast<RankedTensorType>(write.getCache().getType()).getDimSize(1);
  return llvm::formatv("{0}[moec::cacheRow(m, S, {1}, {2}[0]) * {3} + col] = "
                       "{4};",
                       cache, maxLen, past, width, value)
      .str();
}

/// One product of a projections group and the cache write of it, if any.
struct Projection {
  LinearOp linear;
  KvCacheWriteOp write;
};

/// A gemm group's tiles say nothing of its cache copies: four elements a
/// thread, as elementwise kernels take.
constexpr int64_t kCopyItemsPerThread = 4;

/// Projections of one input in one launch (decoding's q, k and v), or one
/// projection whose epilogue writes the cache: the blocks of each
/// product's columns follow the previous product's, each block finds its
/// product, weight, width and epilogue (bias, the stored product, the cache
/// write) from its first column.
LogicalResult emitProjectionsGroup(GroupEmitter &e,
                                   MutableArrayRef<Projection> products) {
  Value x = products.front().linear.getX();
  bool transposed = products.front().linear.getTransposeWeight();
  int64_t tm = e.tile(e.tiles().getTileM()), tn = e.tile(e.tiles().getTileN()),
          tk = e.tile(e.tiles().getTileK()),
          threads = e.tile(e.tiles().getThreads());
  auto widthOf = [&](LinearOp l) {
    auto t = cast<RankedTensorType>(l.getWeight().getType());
    return t.getDimSize(transposed ? 0 : 1);
  };
  Value w0 = products.front().linear.getWeight();
  int64_t k =
      cast<RankedTensorType>(w0.getType()).getDimSize(transposed ? 1 : 0);
  SymDim rows = e.rowsOf(x);
  SmallVector<KvCacheWriteOp> writes;
  for (Projection &p : products)
    if (p.write)
      writes.push_back(p.write);
  int copies =
      emitCacheCopies(e, writes, threads, threads * kCopyItemsPerThread);

  e.beginKernel(copies ? "gemm" : "");
  CodeWriter body;
  body.indent();
  e.declareScalar(body, "M", rows);
  std::string xp = e.declared(body, x, false, "x");
  if (!writes.empty())
    e.declareScalar(body, "S", e.shapeOf(writes.front().getUpdate())[1]);
  // Per product: its weight and the statements of its epilogue.
  SmallVector<std::string> weights;
  SmallVector<SmallVector<std::string, 3>> epilogues;
  SmallVector<std::string> findProduct;
  llvm::DenseMap<Value, std::string> pasts;
  int64_t columns = 0;
  for (auto [i, p] : llvm::enumerate(products)) {
    int64_t n = widthOf(p.linear);
    weights.push_back(e.declared(body, p.linear.getWeight(), false, "w"));
    std::string value = "acc";
    SmallVector<std::string, 3> epilogue;
    if (p.linear.getBias()) {
      std::string bias = e.declared(body, p.linear.getBias(), false, "b");
      epilogue.push_back("const float y = acc + moec::toFloat(" + bias +
                         "[col]);");
      value = "y";
    }
    if (e.escapes(p.linear.getResult())) {
      std::string out = e.declared(body, p.linear.getResult(), true, "out");
      epilogue.push_back(
          llvm::formatv("{0}[m * {1} + col] = {2};", out, n, value));
    }
    if (p.write) {
      std::string &past = pasts[p.write.getPast()];
      if (past.empty())
        past = e.declared(body, p.write.getPast(), false, "past");
      std::string cache = e.declared(body, p.write.getResult(), true, "cache");
      epilogue.push_back(cacheStore(p.write, cache, past, n, value));
    }
    epilogues.push_back(std::move(epilogue));
    // Each product's columns take whole blocks.
    int64_t blocks = (n + tn - 1) / tn * tn;
    if (i + 1 < products.size())
      findProduct.push_back(
          llvm::formatv("if (product == {0} && n0 >= {1}) {{ n0 -= {1}; "
                        "product = {2}; }",
                        i, blocks, i + 1));
    columns += blocks;
  }
  bool several = products.size() > 1;
  body.line((several ? "int64_t" : "const int64_t") +
            std::string(" n0 = static_cast<int64_t>(blockIdx.x) * ") +
            std::to_string(tn) + ";");
  if (several)
    body.line("int product = 0;");
  for (const std::string &line : findProduct)
    body.line(line);
  auto select = [&](auto valueOf) {
    std::string chain = valueOf(products.size() - 1);
    for (size_t i = products.size() - 1; i-- > 0;)
      chain = llvm::formatv("product == {0} ? {1} : {2}", i, valueOf(i), chain)
                  .str();
    return chain;
  };
  body.line("const auto w = " + select([&](size_t i) { return weights[i]; }) +
            ";");
  body.line("const int64_t N = " + select([&](size_t i) {
              return std::to_string(widthOf(products[i].linear));
            }) +
            ";");
  body.line("const auto store = [=](int64_t m, int64_t col, float acc) {");
  body.indent();
  for (auto [i, lines] : llvm::enumerate(epilogues)) {
    if (several) {
      body.line(
          llvm::formatv("{0}if (product == {1}) {{", i ? "} else " : "", i));
      body.indent();
    }
    for (const std::string &line : lines)
      body.line(line);
    if (several)
      body.dedent();
  }
  if (several)
    body.line("}");
  body.dedent();
  body.line("};");
  GemmPath path;
  path.why = several ? "projections of one input in one launch, their cache "
                       "writes in its epilogue"
                     : "fuses moe.kv_cache_write into its epilogue";
  e.setGemmPath(path);
  std::string loadB = transposed ? loader("ColMajor", "w", w0, k)
                                 : loader("RowMajor", "w", w0, "N");
  gemmCall(body, x, w0, tm, tn, tk, threads, "M", "N", std::to_string(k),
           loader("RowMajor", xp, x, k), loadB, "store", "n0",
           /*fewRows=*/decodes(e.first()));
  e.finishKernel(body.str(), GridDim{SymDim(columns), tn}, GridDim{rows, tm},
                 GridDim(), threads);
  return success();
}

} // namespace

LogicalResult mlir::moe::cuda::emitGemmGroup(GroupEmitter &e) {
  SmallVector<Projection> products;
  for (Operation *op : e.group().ops) {
    if (auto l = dyn_cast<LinearOp>(op))
      products.push_back({l, KvCacheWriteOp()});
    else if (auto w = dyn_cast<KvCacheWriteOp>(op); w && !products.empty())
      products.back().write = w;
  }
  // The moe.kernel verifier holds such groups to projections of one input,
  // each with at most the cache write of its product after it.
  if (products.size() > 1 || products.front().write)
    return emitProjectionsGroup(e, products);
  auto linear = cast<LinearOp>(e.first());
  Value x = linear.getX(), w = linear.getWeight();
  auto wType = cast<RankedTensorType>(w.getType());
  bool transposed = linear.getTransposeWeight();
  int64_t k = wType.getDimSize(transposed ? 1 : 0);
  int64_t n = wType.getDimSize(transposed ? 0 : 1);
  int64_t tm = e.tile(e.tiles().getTileM()), tn = e.tile(e.tiles().getTileN()),
          tk = e.tile(e.tiles().getTileK()),
          threads = e.tile(e.tiles().getThreads());
  SymDim rows = e.rowsOf(x);

  std::string fused;
  for (Operation *op : llvm::drop_begin(e.group().ops))
    fused += (fused.empty() ? "" : ", ") + op->getName().getStringRef().str();

  e.beginKernel("");
  CodeWriter body;
  body.indent();
  e.declareScalar(body, "M", rows);
  // A GEMM that fuses nothing takes its width and depth as kernel arguments
  // (see kOwnSlot); a fused epilogue keeps them literal.
  bool sizedAtRunTime = fused.empty();
  std::string nExpr = std::to_string(n), kExpr = std::to_string(k);
  if (sizedAtRunTime) {
    e.declareScalar(body, "N", SymDim(n), kOwnSlot);
    e.declareScalar(body, "K", SymDim(k), kOwnSlot);
    nExpr = "N";
    kExpr = "K";
  }
  std::string xp = e.declared(body, x, false, "x");
  std::string wp = e.declared(body, w, false, "w");
  std::string bias = linear.getBias()
                         ? e.declared(body, linear.getBias(), false, "b")
                         : std::string();
  // Epilogue operands from outside the group and the values to store.
  llvm::DenseMap<Value, std::string> names, outputs;
  for (Operation *op : llvm::drop_begin(e.group().ops))
    for (Value v : op->getOperands())
      if (!e.inGroup(v) && !names.count(v))
        names[v] = e.declared(body, v, false, "in");
  for (Operation *op : e.group().ops)
    if (e.escapes(op->getResult(0)))
      outputs[op->getResult(0)] =
          e.declared(body, op->getResult(0), true, "out");

  body.line("const auto store = [=](int64_t m, int64_t col, float acc) {");
  body.indent();
  body.line(llvm::formatv("const int64_t i = m * {0} + col;", nExpr));
  llvm::DenseMap<Value, std::string> values;
  std::string y = e.fresh();
  body.line("const float " + y + " = acc" +
            (bias.empty() ? "" : " + moec::toFloat(" + bias + "[col])") + ";");
  values[linear.getResult()] = y;
  auto storeIfNeeded = [&](Value v) {
    if (outputs.count(v))
      body.line(outputs[v] + "[i] = " + values[v] + ";");
  };
  storeIfNeeded(linear.getResult());
  for (Operation *op : llvm::drop_begin(e.group().ops)) {
    llvm::SmallVector<std::string> in;
    for (Value v : op->getOperands()) {
      if (values.count(v)) {
        in.push_back(values[v]);
      } else if (cast<RankedTensorType>(v.getType()).getRank() == 0) {
        in.push_back(names[v] + "[0]");
      } else {
        in.push_back(names[v] + "[i]");
      }
    }
    FailureOr<std::string> v = e.elementwise(body, op, in, "i");
    if (failed(v))
      return op->emitOpError("cannot be fused into a GEMM epilogue");
    values[op->getResult(0)] = *v;
    storeIfNeeded(op->getResult(0));
  }
  body.dedent();
  body.line("};");
  e.setGemmPath(
      withOperands(choosePath(x, w, linear.getResult(), linear.getBias(), fused,
                              rows, SymDim(n), SymDim(k)),
                   e, x, false, k, w, transposed, transposed ? k : n,
                   linear.getResult(), linear.getBias()));
  std::string loadB = transposed ? loader("ColMajor", wp, w, kExpr)
                                 : loader("RowMajor", wp, w, nExpr);
  gemmCall(body, x, w, tm, tn, tk, threads, "M", nExpr, kExpr,
           loader("RowMajor", xp, x, kExpr), loadB, "store", /*n0=*/"",
           /*fewRows=*/decodes(e.first()));
  e.finishKernel(body.str(), GridDim{SymDim(n), tn}, GridDim{rows, tm},
                 GridDim(), threads);
  return success();
}

LogicalResult mlir::moe::cuda::emitGemmGradGroup(GroupEmitter &e) {
  auto grad = cast<LinearGradOp>(e.first());
  if (e.group().ops.size() != 1)
    return e.error("gemm_grad groups hold one op");
  Value x = grad.getX(), w = grad.getWeight(), dy = grad.getDy();
  auto wType = cast<RankedTensorType>(w.getType());
  bool transposed = grad.getTransposeWeight();
  int64_t kin = wType.getDimSize(transposed ? 1 : 0);
  int64_t nout = wType.getDimSize(transposed ? 0 : 1);
  int64_t tm = e.tile(e.tiles().getTileM()), tn = e.tile(e.tiles().getTileN()),
          tk = e.tile(e.tiles().getTileK()),
          threads = e.tile(e.tiles().getThreads());
  SymDim rows = e.rowsOf(x);
  auto store = [](StringRef out, StringRef ld) {
    return llvm::formatv("[=](int64_t m, int64_t col, float acc) {{ {0}[m * "
                         "{1} + col] = acc; }",
                         out, ld)
        .str();
  };
  // The weight's sizes are kernel arguments (see kOwnSlot).

  if (e.escapes(grad.getDx())) {
    // dx[t, kin] = sum_n dy[t, n] W(kin, n).
    e.beginKernel("dx");
    CodeWriter b;
    b.indent();
    e.declareScalar(b, "M", rows);
    e.declareScalar(b, "N", SymDim(kin), kOwnSlot);
    e.declareScalar(b, "K", SymDim(nout), kOwnSlot);
    std::string dyp = e.declared(b, dy, false, "dy");
    std::string wp = e.declared(b, w, false, "w");
    std::string dxp = e.declared(b, grad.getDx(), true, "dx");
    std::string loadB = transposed ? loader("RowMajor", wp, w, "N")
                                   : loader("ColMajor", wp, w, "K");
    b.line("const auto store = " + store(dxp, "N") + ";");
    e.setGemmPath(withOperands(choosePath(dy, w, grad.getDx(), Value(), "",
                                          rows, SymDim(kin), SymDim(nout)),
                               e, dy, false, nout, w, !transposed,
                               transposed ? kin : nout, grad.getDx(), Value()));
    gemmCall(b, dy, w, tm, tn, tk, threads, "M", "N", "K",
             loader("RowMajor", dyp, dy, "K"), loadB, "store");
    e.finishKernel(b.str(), GridDim{SymDim(kin), tn}, GridDim{rows, tm},
                   GridDim(), threads);
  }
  if (e.escapes(grad.getDweight())) {
    // dW = x^T dy ([kin, nout]), or dy^T x when W is stored transposed.
    e.beginKernel("dw");
    CodeWriter b;
    b.indent();
    e.declareScalar(b, "T", rows);
    int64_t m = transposed ? nout : kin, n = transposed ? kin : nout;
    e.declareScalar(b, "M", SymDim(m), kOwnSlot);
    e.declareScalar(b, "N", SymDim(n), kOwnSlot);
    std::string xp = e.declared(b, x, false, "x");
    std::string dyp = e.declared(b, dy, false, "dy");
    std::string dwp = e.declared(b, grad.getDweight(), true, "dw");
    // A is dy or x transposed ([m, T], ld m), B the other ([T, n], ld n).
    std::string loadA = transposed ? loader("ColMajor", dyp, dy, "M")
                                   : loader("ColMajor", xp, x, "M");
    std::string loadB = transposed ? loader("RowMajor", xp, x, "N")
                                   : loader("RowMajor", dyp, dy, "N");
    b.line("const auto store = " + store(dwp, "N") + ";");
    Value a = transposed ? dy : x, bv = transposed ? x : dy;
    e.setGemmPath(withOperands(choosePath(a, bv, grad.getDweight(), Value(), "",
                                          SymDim(m), SymDim(n), rows),
                               e, a, true, transposed ? nout : kin, bv, false,
                               transposed ? kin : nout, grad.getDweight(),
                               Value()));
    gemmCall(b, x, dy, tm, tn, tk, threads, "M", "N", "T", loadA, loadB,
             "store");
    e.finishKernel(b.str(), GridDim{SymDim(n), tn}, GridDim{SymDim(m), tm},
                   GridDim(), threads);
  }
  if (grad.getDbias() && e.escapes(grad.getDbias())) {
    e.beginKernel("db");
    CodeWriter b;
    b.indent();
    e.declareScalar(b, "T", rows);
    e.declareScalar(b, "N", SymDim(nout), kOwnSlot);
    std::string dyp = e.declared(b, dy, false, "dy");
    std::string dbp = e.declared(b, grad.getDbias(), true, "db");
    b.line(llvm::formatv("moec::columnSums(T, N, [=](int64_t r, int64_t c) "
                         "{{ return {0}[r * N + c]; }, [=](int64_t c, float "
                         "s) {{ {1}[c] = s; });",
                         dyp, dbp));
    e.finishKernel(b.str(), GridDim{SymDim(nout), 32}, GridDim(), GridDim(),
                   256);
  }
  return success();
}
