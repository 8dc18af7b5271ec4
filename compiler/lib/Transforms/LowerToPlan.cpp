//===- LowerToPlan.cpp - moe-lower-to-plan --------------------------------===//
//
// Turns each entry function into an execution plan: a table of buffers with
// symbolic sizes and, per op, the buffers it reads and writes. Temporaries
// share storage when their lifetimes do not overlap; parameter and state
// updates write in place when the updating op is the last reader. Views
// (moe.split_tokens, moe.merge_tokens) are buffers of kind "view" over the
// storage of another buffer: they run no step, and the buffer they view
// lives until the last reader of any view of it.
//
//===----------------------------------------------------------------------===//

#include "moec/Transforms/EntryPoints.h"
#include "moec/Analysis/KernelGroups.h"
#include "moec/Transforms/Passes.h"
#include "moec/Transforms/PlanAttrs.h"
#include "moec/Analysis/ShapeAnalysis.h"
#include "mlir/IR/Builders.h"

#include <map>

namespace mlir::moe {
#define GEN_PASS_DEF_MOELOWERTOPLAN
#include "moec/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

struct Buffer {
  Type elementType;
  SymShape shape;
  StringRef kind; // param, state, input, const, temp, view
  Attribute binding;
  Attribute value;  // for const
  int64_t of = -1;  // for view: the temp buffer whose storage it shares
};

bool isView(Operation *op) { return isa<SplitTokensOp, MergeTokensOp>(op); }

/// The value whose buffer a view of `v` shares (v itself if not a view).
Value viewedValue(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isView(def))
      break;
    v = def->getOperand(0);
  }
  return v;
}

/// For ops that may update an operand in place: the operand result `index`
/// may overwrite.
std::optional<unsigned> inPlaceOperand(Operation *op, unsigned index) {
  if (isa<AdamUpdateOp>(op))
    return std::array<unsigned, 3>{0, 2, 3}[index];
  if (isa<SgdUpdateOp>(op))
    return std::array<unsigned, 2>{0, 2}[index];
  if (isa<KvCacheWriteOp>(op))
    return 0u;
  return std::nullopt;
}

/// Ops whose single optional operand (or result) group is their last one
/// carry no segment sizes; their full operand and result counts.
std::pair<unsigned, unsigned> trailingOptionalCounts(Operation *op) {
  if (isa<LinearOp>(op))
    return {3, 1};
  if (isa<LinearGradOp>(op))
    return {3, 3};
  if (isa<AttentionGradOp>(op))
    return {7, 3};
  if (isa<BatchNormOp>(op))
    return {6, 3};
  if (isa<BatchNormGradOp>(op))
    return {6, 3};
  if (isa<WindowMeanGradOp>(op))
    return {3, 1};
  return {op->getNumOperands(), op->getNumResults()};
}

/// Operands of `op` in ODS order with absent optional operands as null
/// values, so that every operand keeps a fixed position per op kind.
SmallVector<Value> odsOperands(Operation *op) {
  auto props = dyn_cast_or_null<DictionaryAttr>(op->getPropertiesAsAttribute());
  auto segments =
      props ? dyn_cast_or_null<DenseI32ArrayAttr>(props.get("operandSegmentSizes"))
            : DenseI32ArrayAttr();
  if (!segments) {
    SmallVector<Value> operands(op->getOperands());
    operands.resize(std::max<size_t>(operands.size(),
                                     trailingOptionalCounts(op).first));
    return operands;
  }
  SmallVector<Value> operands;
  unsigned next = 0;
  for (int32_t size : segments.asArrayRef()) {
    if (size == 0)
      operands.push_back(Value());
    for (int32_t i = 0; i < size; ++i)
      operands.push_back(op->getOperand(next++));
  }
  return operands;
}

} // namespace

/// Results in ODS order, absent optional results as null values.
SmallVector<Value> mlir::moe::plan::odsResults(Operation *op) {
  if (auto grad = dyn_cast<ExpertFfnGradOp>(op)) {
    // dx, dgates, dw1, db1?, dw2, db2?, dw3? at fixed positions.
    SmallVector<Value> results{grad.getDx(), grad.getDgates()};
    auto dweights = grad.getDweights();
    unsigned next = 0;
    for (Value w : {grad.getW1(), grad.getB1(), grad.getW2(), grad.getB2(),
                    grad.getW3()})
      results.push_back(w ? dweights[next++] : Value());
    return results;
  }
  SmallVector<Value> results(op->getResults());
  results.resize(std::max<size_t>(results.size(),
                                  trailingOptionalCounts(op).second));
  return results;
}

llvm::DenseMap<Value, int64_t> mlir::moe::plan::bufferIds(func::FuncOp func) {
  llvm::DenseMap<Value, int64_t> ids;
  for (BlockArgument arg : func.getArguments())
    ids[arg] = arg.getArgNumber();
  func.walk([&](Operation *op) {
    auto out = op->getAttrOfType<DenseI64ArrayAttr>(kOut);
    if (!out)
      return;
    for (auto [value, id] : llvm::zip(odsResults(op), out.asArrayRef()))
      if (value) {
        ids[value] = id;
        // The kernel result that yields it lives in the same buffer.
        ids[outerValue(value)] = id;
      }
  });
  return ids;
}

namespace {

class Planner {
public:
  explicit Planner(func::FuncOp func) : func(func), ctx(func.getContext()) {}

  LogicalResult run() {
    if (failed(computeSymbolicShapes(func, shapes)))
      return failure();
    Block &body = func.getBody().front();
    Operation *terminator = body.getTerminator();
    llvm::SmallVector<Operation *> order = executionOrder(func);
    for (auto [i, op] : llvm::enumerate(order))
      position[op] = i;
    position[terminator] = order.size();
    computeGroupSpans(order);

    if (failed(bindArguments()) || failed(checkUpdateTargets()))
      return failure();
    llvm::DenseMap<Value, Attribute> updates = returnedUpdates(terminator);

    int64_t stepIndex = 0;
    for (Operation *op : order) {
      if (auto cst = dyn_cast<arith::ConstantOp>(op)) {
        int64_t id = add({cast<TensorType>(cst.getType()).getElementType(),
                          shapes[cst.getResult()], "const", Attribute(),
                          cst.getValue()});
        setId(cst.getResult(), id);
        // Constants are buffers, not steps; record which one.
        op->setAttr(plan::kOut, DenseI64ArrayAttr::get(ctx, {id}));
        continue;
      }
      if (isView(op)) {
        if (failed(placeView(op)))
          return failure();
        continue;
      }
      SmallVector<int64_t> outs;
      for (auto [index, result] : llvm::enumerate(plan::odsResults(op))) {
        if (!result) {
          outs.push_back(-1);
          continue;
        }
        int64_t id = -1;
        if (!readersOf(result).empty())
          id = placeResult(op, result, index, updates);
        setId(result, id);
        outs.push_back(id);
      }
      SmallVector<int64_t> ins;
      for (Value operand : odsOperands(op))
        ins.push_back(operand ? ids.lookup(operand) : -1);
      op->setAttr(plan::kStep, IntegerAttr::get(IntegerType::get(ctx, 64),
                                                stepIndex++));
      op->setAttr(plan::kIn, DenseI64ArrayAttr::get(ctx, ins));
      op->setAttr(plan::kOut, DenseI64ArrayAttr::get(ctx, outs));
      releaseDeadOperands(op);
      releasePending(position[op]);
    }
    SmallVector<int64_t> returned;
    for (Value v : terminator->getOperands())
      returned.push_back(ids.lookup(v));
    terminator->setAttr(plan::kIn, DenseI64ArrayAttr::get(ctx, returned));
    func->setAttr(plan::kBuffers, bufferTable());
    return success();
  }

private:
  /// Records the buffer of `v`, and of the kernel result that yields it.
  void setId(Value v, int64_t id) {
    ids[v] = id;
    ids[outerValue(v)] = id;
  }

  /// A view gets its own buffer entry (its shape) over the storage of the
  /// temporary it views; like a constant it is a buffer, not a step.
  LogicalResult placeView(Operation *op) {
    Value result = op->getResult(0);
    int64_t of = ids.lookup(viewedValue(op->getOperand(0)));
    if (of < 0 || buffers[of].kind != "temp")
      return op->emitOpError("views only the storage of a temporary; this "
                             "operand is a ")
             << (of < 0 ? StringRef("value without storage")
                        : buffers[of].kind);
    Buffer view{cast<TensorType>(result.getType()).getElementType(),
                shapes[result], "view", Attribute(), Attribute()};
    view.of = of;
    int64_t id = add(view);
    setId(result, id);
    op->setAttr(plan::kOut, DenseI64ArrayAttr::get(ctx, {id}));
    return success();
  }

  int64_t add(Buffer buffer) {
    buffers.push_back(std::move(buffer));
    return static_cast<int64_t>(buffers.size()) - 1;
  }

  LogicalResult bindArguments() {
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
      BlockArgument arg = func.getArgument(i);
      Type elementType = cast<TensorType>(arg.getType()).getElementType();
      StringRef kind;
      Attribute binding;
      if ((binding = func.getArgAttr(i, attrs::kParam)))
        kind = "param";
      else if ((binding = func.getArgAttr(i, attrs::kState)))
        kind = "state";
      else if ((binding = func.getArgAttr(i, attrs::kInput)))
        kind = "input";
      else
        return func.emitOpError("argument #")
               << i << " is bound to nothing: it needs moe.param, moe.state "
               << "or moe.input";
      ids[arg] = add({elementType, shapes[arg], kind, binding, Attribute()});
      if (kind == "param" || kind == "state")
        argumentOf.try_emplace(binding, arg);
    }
    return success();
  }

  /// Each parameter or state takes at most one update per program: the
  /// runtime writes updates back in turn, so a second would silently win.
  LogicalResult checkUpdateTargets() {
    llvm::DenseMap<Attribute, unsigned> first;
    for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
      Attribute target = func.getResultAttr(i, attrs::kUpdate);
      if (!target)
        continue;
      auto [it, inserted] = first.try_emplace(target, i);
      if (!inserted)
        return func.emitOpError("results #")
               << it->second << " and #" << i << " both update " << target
               << "; a program updates each target at most once";
    }
    return success();
  }

  /// Values returned as updates of parameters or state, with the symbol.
  llvm::DenseMap<Value, Attribute> returnedUpdates(Operation *terminator) {
    llvm::DenseMap<Value, Attribute> updates;
    for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
      if (Attribute target = func.getResultAttr(i, attrs::kUpdate))
        updates[terminator->getOperand(i)] = target;
    return updates;
  }

  /// The argument bound to `target` (a symbol ref), if any.
  Value argumentFor(Attribute target) { return argumentOf.lookup(target); }

  /// Fused groups run as one kernel (or a few), so a buffer lives from the
  /// start of the kernel that writes it to the end of the last kernel that
  /// reads it: no op of a kernel may take a buffer another op of the same
  /// kernel reads. Ops outside any kernel span themselves.
  void computeGroupSpans(ArrayRef<Operation *> order) {
    llvm::DenseMap<Operation *, std::pair<size_t, size_t>> spanOfKernel;
    for (Operation *op : order)
      if (auto kernel = dyn_cast<KernelOp>(op->getParentOp())) {
        auto [it, inserted] = spanOfKernel.try_emplace(
            kernel, position[op], position[op]);
        it->second.second = position[op];
      }
    for (Operation *op : order) {
      auto kernel = dyn_cast<KernelOp>(op->getParentOp());
      span[op] = kernel ? spanOfKernel[kernel]
                        : std::make_pair(position[op], position[op]);
    }
  }

  /// Whether `op` may write over `v`: every other reader of `v` runs in an
  /// earlier group, and `v` is not returned.
  bool isLastUser(Value v, Operation *op) {
    return llvm::all_of(readersOf(v), [&](Operation *user) {
      if (isa<func::ReturnOp>(user))
        return false;
      return user == op || span[user].second < span[op].first;
    });
  }

  /// Whether `v` is `arg`, or `arg` rescaled by moe.rescale_rows.
  static bool readsArgument(Value v, Value arg) {
    if (v == arg)
      return true;
    if (auto kernel = v.getDefiningOp<KernelOp>())
      v = kernel.getYielded(cast<OpResult>(v).getResultNumber());
    auto rescale = v.getDefiningOp<RescaleRowsOp>();
    return rescale && rescale.getX() == arg;
  }

  int64_t placeResult(Operation *op, Value result, unsigned index,
                      const llvm::DenseMap<Value, Attribute> &updates) {
    // An update written over its own argument (or over the argument a
    // row_norm rescale read, which nothing reads after that).
    if (auto target = updates.lookup(outerValue(result))) {
      std::optional<unsigned> operand = inPlaceOperand(op, index);
      Value arg = argumentFor(target);
      if (operand && arg && readsArgument(op->getOperand(*operand), arg) &&
          isLastUser(arg, op))
        return ids.lookup(arg);
    }
    Type elementType = cast<TensorType>(result.getType()).getElementType();
    const SymShape &shape = shapes[result];
    std::string key = sizeKey(elementType, shape);
    auto &pool = freeBuffers[key];
    if (!pool.empty()) {
      int64_t id = pool.back();
      pool.pop_back();
      return id;
    }
    return add({elementType, shape, "temp", Attribute(), Attribute()});
  }

  /// Buffers are shared between values of the same dtype and shape: the
  /// plan gives each buffer one shape, which every step sees.
  std::string sizeKey(Type elementType, const SymShape &shape) {
    std::string key;
    llvm::raw_string_ostream os(key);
    os << elementType << ":" << shapeStr(shape);
    return key;
  }

  /// Schedules the temporaries whose last reader is `op` for the free pool
  /// at the end of the last group that reads them.
  void releaseDeadOperands(Operation *op) {
    llvm::SmallPtrSet<Value, 8> seen;
    for (Value operand : op->getOperands()) {
      // Reading a view reads the storage of the value it views.
      Value v = viewedValue(operand);
      if (!seen.insert(v).second)
        continue;
      int64_t id = ids.lookup(v);
      if (id < 0 || buffers[id].kind != "temp")
        continue;
      if (lastReadAt(v) <= position[op])
        pending.emplace(span[op].second, id);
    }
  }

  /// The position of the last op that reads `v` or a view of it (the
  /// terminator's when it is returned). Cached: a value read by every layer
  /// (the learning rate) would otherwise cost N^2.
  size_t lastReadAt(Value v) {
    auto found = lastRead.find(v);
    if (found != lastRead.end())
      return found->second;
    size_t last = 0;
    for (Operation *user : readersOf(v))
      last = std::max(last, isView(user) ? lastReadAt(user->getResult(0))
                                         : position.lookup(user));
    lastRead[v] = last;
    return last;
  }

  /// Frees what was scheduled for the end of a group ending by `at`.
  void releasePending(size_t at) {
    while (!pending.empty() && pending.begin()->first <= at) {
      int64_t id = pending.begin()->second;
      pending.erase(pending.begin());
      freeBuffers[sizeKey(buffers[id].elementType, buffers[id].shape)]
          .push_back(id);
    }
  }

  ArrayAttr bufferTable() {
    SmallVector<Attribute> table;
    for (auto [id, buffer] : llvm::enumerate(buffers)) {
      SmallVector<NamedAttribute> fields;
      auto set = [&](StringRef name, Attribute value) {
        fields.emplace_back(StringAttr::get(ctx, name), value);
      };
      set("id", IntegerAttr::get(IntegerType::get(ctx, 64), id));
      set("kind", StringAttr::get(ctx, buffer.kind));
      set("type", TypeAttr::get(buffer.elementType));
      set("dims", toDimsAttr(ctx, buffer.shape));
      if (buffer.binding)
        set("bind", buffer.binding);
      if (buffer.value)
        set("value", buffer.value);
      if (buffer.of >= 0)
        set("of", IntegerAttr::get(IntegerType::get(ctx, 64), buffer.of));
      table.push_back(DictionaryAttr::get(ctx, fields));
    }
    return ArrayAttr::get(ctx, table);
  }

  func::FuncOp func;
  MLIRContext *ctx;
  llvm::DenseMap<Value, SymShape> shapes;
  llvm::DenseMap<Operation *, size_t> position;
  llvm::DenseMap<Value, size_t> lastRead;
  llvm::DenseMap<Value, int64_t> ids;
  /// The argument bound to each parameter or state symbol.
  llvm::DenseMap<Attribute, Value> argumentOf;
  std::vector<Buffer> buffers;
  std::map<std::string, SmallVector<int64_t>> freeBuffers;
  /// First and last position of the group of each op.
  llvm::DenseMap<Operation *, std::pair<size_t, size_t>> span;
  /// (position, buffer): temporaries to free once that position is done.
  std::multimap<size_t, int64_t> pending;
};

struct MoeLowerToPlanPass
    : public mlir::moe::impl::MoeLowerToPlanBase<MoeLowerToPlanPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!func->hasAttr(attrs::kEntry) || func->hasAttr(plan::kBuffers))
        continue;
      if (failed(Planner(func).run()))
        return signalPassFailure();
    }
  }
};

} // namespace
