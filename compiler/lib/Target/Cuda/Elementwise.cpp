//===- Elementwise.cpp - elementwise and scalar groups --------------------===//
//
// A run of elementwise ops over N elements becomes one grid-stride loop:
// every input is read once, every op is an expression on registers, and
// only the values other groups read are stored; f32 and bf16 values move
// 8 elements at a time in 16-byte accesses where the pointers allow.
// Scalar (0-d) operands are broadcast. A scalar group is the same loop
// over one element, plus the learning-rate schedule. moe.rope joins a run
// as a load of its x at the element and at its partner, the position from
// the element's row; moe.head_mixture as a load of its g at the element's
// row group and head.
//
//===----------------------------------------------------------------------===//

#include "GroupEmitter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "moe/IR/MoeOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include <map>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cuda;

LogicalResult mlir::moe::cuda::emitElementwiseGroup(GroupEmitter &e) {
  const KernelGroup &g = e.group();
  bool scalar = g.kind == KernelKind::Scalar;
  // The loop runs over the elements of the first non-scalar result.
  Value reference = g.ops.front()->getResult(0);
  e.beginKernel("");
  int64_t threads = scalar ? 1 : e.tile(e.tiles().getThreads());
  int64_t items = scalar ? 1 : e.tile(e.tiles().getItems());
  SymDim n = scalar ? SymDim(1) : e.numElements(reference);

  CodeWriter w;
  w.indent();
  e.declareScalar(w, "n", n);
  // Inputs: declared once; scalars loaded before the loop, and elements in
  // it unless only moe.rope reads the value (it loads what it needs).
  auto readAtElement = [&](Value v) {
    return llvm::any_of(v.getUses(), [&](OpOperand &use) {
      return llvm::is_contained(g.ops, use.getOwner()) &&
             !(isa<RopeOp>(use.getOwner()) && use.getOperandNumber() == 0) &&
             !(isa<HeadMixtureOp>(use.getOwner()) &&
               use.getOperandNumber() == 1);
    });
  };
  llvm::DenseMap<Value, std::string> names, pointers;
  llvm::SmallVector<std::pair<Value, std::string>> perElement;
  for (Operation *op : g.ops)
    for (Value v : op->getOperands()) {
      if (e.inGroup(v) || names.count(v))
        continue;
      std::string ptr = e.fresh("in");
      e.declare(w, ptr, v, /*writable=*/false);
      pointers[v] = ptr;
      Type element = elementTypeOf(v);
      if (isScalarTensor(v)) {
        std::string local = e.fresh("s");
        w.line(llvm::formatv("const {0} {1} = {2}[0];", cudaType(element),
                             local, ptr));
        names[v] = local;
      } else {
        if (readAtElement(v))
          perElement.push_back({v, ptr});
        names[v] = "";
      }
    }
  // moe.rope: the sequence length of its x, for the position of a row (one
  // local per distinct length).
  llvm::DenseMap<Operation *, std::string> seqLens;
  std::map<std::string, std::string> seqLenNames;
  for (Operation *op : g.ops)
    if (auto rope = dyn_cast<RopeOp>(op)) {
      const SymDim &seq = e.shapeOf(rope.getX())[1];
      auto [it, inserted] = seqLenNames.try_emplace(seq.str(), "");
      if (inserted) {
        it->second = e.fresh("S");
        e.declareScalar(w, it->second, seq);
      }
      seqLens[op] = it->second;
    }
  // moe.head_mixture: the context rows that share a row of g (S for one
  // gate per sequence, 1 for one per position).
  llvm::DenseMap<Operation *, std::string> gateRows;
  for (Operation *op : g.ops)
    if (auto mixture = dyn_cast<HeadMixtureOp>(op)) {
      const SymDim &groups = e.shapeOf(mixture.getG())[1];
      if (groups == SymDim(1)) {
        std::string rows = e.fresh("R");
        e.declareScalar(w, rows, e.shapeOf(mixture.getContext())[1]);
        gateRows[op] = rows;
      } else {
        gateRows[op] = "1";
      }
    }
  llvm::SmallVector<std::pair<Value, std::string>> outputs;
  for (Operation *op : g.ops)
    for (Value r : op->getResults())
      if (e.escapes(r)) {
        std::string ptr = e.fresh("out");
        e.declare(w, ptr, r, /*writable=*/true);
        outputs.push_back({r, ptr});
      }

  // The ops on one element: `load(v, ptr)` gives an input's value at i,
  // `store(ptr, value)` writes an output's; the element's index is `i`.
  using Load = llvm::function_ref<std::string(Value, StringRef)>;
  using Store = llvm::function_ref<void(StringRef, StringRef)>;
  auto body = [&](Load load, Store store) -> LogicalResult {
    llvm::DenseMap<Value, std::string> at = names;
    for (auto &[v, ptr] : perElement) {
      std::string local = e.fresh("x");
      w.line(llvm::formatv("const float {0} = {1};", local, load(v, ptr)));
      at[v] = local;
    }
    for (Operation *op : g.ops) {
      llvm::SmallVector<std::string> in;
      for (Value v : op->getOperands())
        in.push_back(at.lookup(v));
      if (auto lr = dyn_cast<LrScheduleOp>(op)) {
        std::string v = e.fresh();
        w.line(llvm::formatv(
            "const float {0} = static_cast<float>(moec::learningRate<{1}>({2}, "
            "{3}, {4}LL, {5}LL, {6}, {7}));",
            v, deviceEnum(lr.getKind()), in[0],
            doubleLiteral(lr.getBaseLr().convertToDouble()),
            static_cast<int64_t>(lr.getWarmup()),
            static_cast<int64_t>(lr.getTotalSteps()),
            doubleLiteral(lr.getFinalLr().convertToDouble()),
            doubleLiteral(lr.getPower().convertToDouble())));
        at[op->getResult(0)] = v;
        continue;
      }
      if (auto rope = dyn_cast<RopeOp>(op)) {
        // The fuser keeps x in memory: the partner element is a load.
        int64_t headDim = static_cast<int64_t>(rope.getHeadDim());
        int64_t width = headDim * static_cast<int64_t>(rope.getNumHeads());
        std::string v = e.fresh();
        w.line(
            fill("const float ${v} = moec::rope<${hd}, ${rd}, ${inv}>("
                 "${x}, i, ${start} + i / ${width} % ${S}, ${base});",
                 {{"v", v},
                  {"hd", headDim},
                  {"rd", static_cast<int64_t>(rope.getRotaryDim())},
                  {"inv", rope.getInverse()},
                  {"x", pointers.lookup(rope.getX())},
                  {"start", in[1]},
                  {"width", width},
                  {"S", seqLens.lookup(op)},
                  {"base", doubleLiteral(rope.getBase().convertToDouble())}}));
        at[op->getResult(0)] = v;
        continue;
      }
      if (auto mixture = dyn_cast<HeadMixtureOp>(op)) {
        // g comes from before the kernel: a load at the element's row
        // group and head.
        int64_t heads = static_cast<int64_t>(mixture.getNumHeads());
        int64_t width = cast<RankedTensorType>(mixture.getContext().getType())
                            .getShape()
                            .back();
        if (ShapedType::isDynamic(width))
          return op->emitOpError("needs a static context width");
        std::string v = e.fresh();
        w.line(fill("const float ${v} = ${x} * moec::headMixtureScale<${H}, "
                    "${DH}>(${g}, i, ${rows});",
                    {{"v", v},
                     {"x", in[0]},
                     {"H", heads},
                     {"DH", width / heads},
                     {"g", pointers.lookup(mixture.getG())},
                     {"rows", gateRows.lookup(op)}}));
        at[op->getResult(0)] = v;
        continue;
      }
      FailureOr<std::string> v = e.elementwise(w, op, in, "i");
      if (failed(v))
        return op->emitOpError("has no CUDA code generation in an ")
               << stringifyKernelKind(g.kind) << " kernel";
      at[op->getResult(0)] = *v;
    }
    for (auto &[v, ptr] : outputs)
      store(ptr, at.lookup(v));
    return success();
  };
  auto scalarLoad = [](Value, StringRef ptr) { return (ptr + "[i]").str(); };
  auto scalarStore = [&](StringRef ptr, StringRef value) {
    w.line(llvm::formatv("{0}[i] = {1};", ptr, value));
  };

  // Where every value read or stored at the element is a float or bf16 and
  // nothing is read at another index (rope, head_mixture), the elements
  // move 8 at a time in 16-byte accesses (vector.cuh) when every pointer is
  // aligned; the last n % 8, or all of them otherwise, one by one.
  auto vectorType = [](Value v) {
    Type t = elementTypeOf(v);
    return t.isF32() || t.isBF16();
  };
  bool vector =
      !scalar && !(perElement.empty() && outputs.empty()) &&
      llvm::none_of(g.ops,
                    [](Operation *op) {
                      return isa<RopeOp, HeadMixtureOp, LrScheduleOp>(op);
                    }) &&
      llvm::all_of(perElement,
                   [&](auto &in) { return vectorType(in.first); }) &&
      llvm::all_of(outputs, [&](auto &out) { return vectorType(out.first); });
  w.line("const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) "
         "+ threadIdx.x;");
  w.line("const int64_t stride = static_cast<int64_t>(gridDim.x) * "
         "blockDim.x;");
  std::string start = "first";
  if (vector) {
    llvm::SmallVector<StringRef> all;
    for (auto &[v, ptr] : perElement)
      all.push_back(ptr);
    for (auto &[v, ptr] : outputs)
      all.push_back(ptr);
    w.line("const int64_t vectors = moec::aligned16(" + llvm::join(all, ", ") +
           ") ? n / 8 : 0;");
    CodeWriter::Scope loop(w,
                           "for (int64_t q = first; q < vectors; q += stride)");
    llvm::DenseMap<Value, std::string> lanes;
    for (auto &[v, ptr] : perElement) {
      std::string lane = e.fresh("a");
      w.line(llvm::formatv("float {0}[8];", lane));
      w.line(llvm::formatv("moec::loadFloats8({0}, q, {1});", ptr, lane));
      lanes[v] = lane;
    }
    llvm::DenseMap<StringRef, std::string> results;
    for (auto &[v, ptr] : outputs) {
      std::string lane = e.fresh("r");
      w.line(llvm::formatv("float {0}[8];", lane));
      results[ptr] = lane;
    }
    {
      w.line("#pragma unroll");
      CodeWriter::Scope lanesLoop(w, "for (int c = 0; c < 8; ++c)");
      // Only index-dependent ops read `i` (rope, the head mixture, dropout).
      w.line("[[maybe_unused]] const int64_t i = q * 8 + c;");
      if (failed(
              body([&](Value v, StringRef) { return lanes.lookup(v) + "[c]"; },
                   [&](StringRef ptr, StringRef value) {
                     w.line(llvm::formatv("{0}[c] = {1};", results.lookup(ptr),
                                          value));
                   })))
        return failure();
    }
    for (auto &[v, ptr] : outputs)
      w.line(llvm::formatv("moec::storeFloats8({0}, q, {1});", ptr,
                           results.lookup(ptr)));
    start = "vectors * 8 + first";
  }
  {
    CodeWriter::Scope loop(w, "for (int64_t i = " + start +
                                  "; i < n; i += stride)");
    if (failed(body(scalarLoad, scalarStore)))
      return failure();
  }
  // A vectorised group's thread takes 8 elements an iteration.
  GridDim x{n, threads * (vector ? std::max<int64_t>(items, 8) : items)};
  e.finishKernel(w.str(), x, GridDim(), GridDim(), threads);
  return success();
}
