//===- GroupEmitter.cpp - emitting the kernels of one group ---------------===//

#include "GroupEmitter.h"
#include "moe/IR/MoeOps.h"
#include "moec/support/MoeDefs.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cuda;

GroupEmitter::GroupEmitter(ProgramContext &program, const KernelGroup &group)
    : program(program), grp(group) {}

GroupEmitter::~GroupEmitter() = default;

int64_t GroupEmitter::tile(std::optional<int64_t> field) const {
  if (!field)
    llvm::report_fatal_error("internal error: a verified moe.kernel lacks a "
                             "tile its kind uses");
  return *field;
}

bool GroupEmitter::inGroup(Value v) const {
  Operation *def = v.getDefiningOp();
  return def && def->getParentOp() == static_cast<Operation *>(grp.op);
}

bool GroupEmitter::escapes(Value v) const {
  // Everything read after the kernel leaves it through moe.yield.
  return llvm::any_of(v.getUsers(),
                      [](Operation *user) { return isa<YieldOp>(user); });
}

bool GroupEmitter::sameBuffer(Value a, Value b) const {
  auto ia = program.buffers.find(a), ib = program.buffers.find(b);
  return ia != program.buffers.end() && ib != program.buffers.end() &&
         ia->second >= 0 && ia->second == ib->second;
}

const SymShape &GroupEmitter::shapeOf(Value v) const {
  auto it = program.shapes.find(v);
  assert(it != program.shapes.end() && "value without a shape");
  return it->second;
}

SymDim GroupEmitter::numElements(Value v) const {
  return symProduct(shapeOf(v));
}

SymDim GroupEmitter::rowsOf(Value v) const {
  const SymShape &s = shapeOf(v);
  return s.empty() ? SymDim(1) : symProduct(ArrayRef<SymDim>(s).drop_back());
}

void GroupEmitter::beginKernel(StringRef phase) {
  phaseName = phase.str();
  name = "moek_" + program.program + "_g" + std::to_string(grp.id);
  if (!phase.empty())
    name += "_" + phase.str();
  args.clear();
  scalars.clear();
  argOf.clear();
  pendingGemm.reset();
  pendingRegisters.reset();
  pendingTiles.reset();
}

int GroupEmitter::argument(int64_t id) {
  auto [pos, inserted] = argOf.try_emplace(id, static_cast<int>(args.size()));
  if (inserted)
    args.push_back(id);
  return pos->second;
}

int GroupEmitter::nullArgument() {
  args.push_back(-1);
  return static_cast<int>(args.size()) - 1;
}

int GroupEmitter::buffer(Value v) {
  auto it = program.buffers.find(v);
  assert(it != program.buffers.end() && "value without a plan buffer");
  if (it->second >= 0)
    return argument(it->second);
  // A result nobody reads has no plan buffer; a kernel that writes it
  // anyway (it reads it back itself) gets a scratch buffer.
  auto type = cast<TensorType>(v.getType());
  return argument(scratch(type.getElementType(), shapeOf(v), "unread"));
}

int64_t GroupEmitter::scratch(Type elementType, const SymShape &shape,
                              StringRef purpose) {
  std::string key;
  llvm::raw_string_ostream os(key);
  os << purpose << ":" << elementType << ":" << shapeStr(shape);
  int64_t nth = llvm::count_if(taken, [&](auto &t) { return t.first == key; });
  llvm::SmallVector<int64_t> &pool = program.scratchPool[key];
  if (nth >= static_cast<int64_t>(pool.size())) {
    pool.push_back(program.planBuffers +
                   static_cast<int64_t>(program.code.scratch.size()));
    program.code.scratch.push_back({elementType, shape});
  }
  int64_t id = pool[nth];
  taken.push_back({key, id});
  return id;
}

int GroupEmitter::scalar(const SymDim &value) {
  for (auto [i, s] : llvm::enumerate(scalars))
    if (s == value)
      return static_cast<int>(i);
  scalars.push_back(value);
  return static_cast<int>(scalars.size()) - 1;
}

int GroupEmitter::ownScalar(const SymDim &value) {
  scalars.push_back(value);
  return static_cast<int>(scalars.size()) - 1;
}

void GroupEmitter::declareScalar(CodeWriter &w, StringRef name,
                                 const SymDim &value, bool ownSlot) {
  w.line(llvm::formatv("const int64_t {0} = moec::scalarArg(p, {1});", name,
                       ownSlot ? ownScalar(value) : scalar(value)));
}

std::string GroupEmitter::bufferExpr(int arg, Type elementType,
                                     bool writable) const {
  return llvm::formatv("moec::bufferArg<{0}{1}>(p, {2})",
                       writable ? "" : "const ", cudaType(elementType), arg)
      .str();
}

void GroupEmitter::declareArgument(CodeWriter &w, StringRef local, int arg,
                                   Type elementType, bool writable) {
  w.line(llvm::formatv("const moec::gptr<{0}{1}> {2} = {3};",
                       writable ? "" : "const ", cudaType(elementType), local,
                       bufferExpr(arg, elementType, writable)));
}

void GroupEmitter::declare(CodeWriter &w, StringRef local, Value v,
                           bool writable) {
  declareArgument(w, local, buffer(v), elementTypeOf(v), writable);
}

std::string GroupEmitter::declared(CodeWriter &w, Value v, bool writable,
                                  StringRef prefix) {
  std::string local = fresh(prefix);
  declare(w, local, v, writable);
  return local;
}

std::string GroupEmitter::declaredNull(CodeWriter &w, Type elementType,
                                       bool writable, StringRef prefix) {
  std::string local = fresh(prefix);
  declareArgument(w, local, nullArgument(), elementType, writable);
  return local;
}

void GroupEmitter::finishKernel(const std::string &body, GridDim x, GridDim y,
                                GridDim z, int64_t threads,
                                int64_t sharedBytes) {
  if (args.size() > size_t(moec::defs::kMaxKernelBuffers) ||
      scalars.size() > size_t(moec::defs::kMaxKernelScalars)) {
    error("needs a kernel '")
        << name << "' of " << args.size() << " buffers and "
        << scalars.size() << " scalars, more than the kernel ABI's "
        << moec::defs::kMaxKernelBuffers << " and "
        << moec::defs::kMaxKernelScalars;
    abiExceeded = true;
    return;
  }
  std::string header;
  llvm::raw_string_ostream os(header);
  os << "// group " << grp.id << " (" << stringifyKernelKind(grp.kind)
     << "):";
  for (Operation *op : grp.ops)
    os << " " << op->getName().getStringRef();
  os << "\n";
  if (pendingTiles) {
    os << "// tiles: " << *pendingTiles << "\n";
  } else if (grp.tiles) {
    os << "// tiles:";
    for (auto [field, value] : grp.tiles.fields())
      os << " " << field << "=" << value;
    os << "\n";
  }
  pendingTiles.reset();
  if (pendingGemm)
    os << "// gemm: " << (pendingGemm->library ? "cublaslt" : "generated")
       << " (" << pendingGemm->why << ")\n";
  const char *self = KernelTable::kNamePlaceholder;
  // At least 512 resident threads per SM, i.e. at most 128 registers a
  // thread: with a block size alone ptxas may squeeze a kernel into 32
  // registers and spill.
  int64_t minBlocks =
      pendingRegisters
          ? std::clamp<int64_t>(65536 / (threads * *pendingRegisters), 1, 32)
          : std::clamp<int64_t>(512 / threads, 1, 32);
  pendingRegisters.reset();
  std::string code = (llvm::Twine("extern \"C\" __global__ void "
                                  "__launch_bounds__(") +
                      llvm::Twine(threads) + ", " + llvm::Twine(minBlocks) +
                      ") " + self +
                      "(const moec::KernelParams p) {\n" + body + "}\n" +
                      "#ifdef MOEC_EMU\nMOEC_EMU_EXPORT_KERNEL(" + self +
                      ")\n#endif\n")
                         .str();
  std::string kernel = program.kernels->add(name, header, code);

  Launch launch;
  launch.kernel = kernel;
  launch.grid[0] = x;
  launch.grid[1] = y;
  launch.grid[2] = z;
  launch.block[0] = threads;
  launch.sharedBytes = sharedBytes;
  launch.buffers.assign(args.begin(), args.end());
  launch.scalars.assign(scalars.begin(), scalars.end());
  launch.gemm = std::move(pendingGemm);
  pendingGemm.reset();
  program.code.groups.back().launches.push_back(launch);
}

std::string GroupEmitter::fresh(StringRef prefix) {
  return (prefix + std::to_string(counter++)).str();
}

InFlightDiagnostic GroupEmitter::error(const Twine &message) const {
  return first()->emitOpError() << message;
}

FailureOr<std::string>
GroupEmitter::elementwise(CodeWriter &w, Operation *op,
                          ArrayRef<std::string> in, StringRef index) {
  std::string v = fresh();
  auto def = [&](const Twine &expr) {
    w.line("const float " + v + " = " + expr + ";");
  };
  auto dropout = [&](StringRef x, double rate, int64_t stream,
                     StringRef seed) {
    double keep = 1.0 - rate;
    def(llvm::formatv("moec::philoxUniform(static_cast<uint64_t>({0}), "
                      "{1}ull, static_cast<uint64_t>({2})) < {3} ? {4} / {5} : "
                      "0.0f",
                      seed, static_cast<uint64_t>(stream), index,
                      doubleLiteral(keep), x, floatLiteral(keep)));
  };
  if (isa<arith::AddFOp>(op))
    def("(" + in[0] + " + " + in[1] + ")");
  else if (isa<arith::SubFOp>(op))
    def("(" + in[0] + " - " + in[1] + ")");
  else if (isa<arith::MulFOp>(op))
    def("(" + in[0] + " * " + in[1] + ")");
  else if (isa<arith::DivFOp>(op))
    def("(" + in[0] + " / " + in[1] + ")");
  else if (isa<arith::NegFOp>(op))
    def("(-" + in[0] + ")");
  else if (isa<arith::MaximumFOp>(op))
    def("fmaxf(" + in[0] + ", " + in[1] + ")");
  else if (isa<arith::MinimumFOp>(op))
    def("fminf(" + in[0] + ", " + in[1] + ")");
  else if (auto act = dyn_cast<ActivationOp>(op))
    def("moec::activate<" + deviceEnum(act.getKind()) + ">(" + in[0] + ")");
  else if (auto grad = dyn_cast<ActivationGradOp>(op))
    def("moec::activateGrad<" + deviceEnum(grad.getKind()) + ">(" + in[0] +
        ") * " + in[1]);
  else if (isa<CastOp>(op))
    def(in[0]); // computed in float; the store rounds to the buffer's type
  else if (auto drop = dyn_cast<DropoutOp>(op))
    dropout(in[0], drop.getRate().convertToDouble(),
            static_cast<int64_t>(drop.getStream()), in[1]);
  else if (auto drop = dyn_cast<DropoutGradOp>(op))
    dropout(in[0], drop.getRate().convertToDouble(),
            static_cast<int64_t>(drop.getStream()), in[1]);
  else
    return failure();
  return v;
}

namespace {
template <typename DefsEnum, typename DialectEnum>
std::string deviceEnumName(std::string_view type, DialectEnum value) {
  return "moec::" + std::string(type) + "::" +
         std::string(moec::defs::enumerator(static_cast<DefsEnum>(value)));
}
} // namespace

std::string mlir::moe::cuda::deviceEnum(Activation value) {
  return deviceEnumName<moec::defs::Activation>("Activation", value);
}
std::string mlir::moe::cuda::deviceEnum(GateWeighting value) {
  return deviceEnumName<moec::defs::GateWeighting>("GateWeighting", value);
}
std::string mlir::moe::cuda::deviceEnum(Capacity value) {
  return deviceEnumName<moec::defs::Capacity>("Capacity", value);
}
std::string mlir::moe::cuda::deviceEnum(BalanceLoss value) {
  return deviceEnumName<moec::defs::BalanceLoss>("BalanceLoss", value);
}
std::string mlir::moe::cuda::deviceEnum(LrSchedule value) {
  return deviceEnumName<moec::defs::LrSchedule>("LrSchedule", value);
}
std::string mlir::moe::cuda::deviceEnum(PoolWindow value) {
  return deviceEnumName<moec::defs::PoolWindow>("PoolWindow", value);
}

Type mlir::moe::cuda::elementTypeOf(Value v) {
  return cast<TensorType>(v.getType()).getElementType();
}

std::string mlir::moe::cuda::storageTypeOf(Value v) {
  return cudaType(elementTypeOf(v));
}

StringRef mlir::moe::cuda::f32MatmulOf(Value v) {
  Operation *op = v.getParentRegion()->getParentOp();
  auto module = isa<ModuleOp>(op) ? cast<ModuleOp>(op)
                                  : op->getParentOfType<ModuleOp>();
  auto model =
      module ? module->getAttrOfType<DictionaryAttr>(attrs::kModel) : nullptr;
  auto setting = model ? model.getAs<StringAttr>("f32_matmul") : nullptr;
  return setting ? setting.getValue() : StringRef("fp32");
}

CountingSort mlir::moe::cuda::countingSortScratch(GroupEmitter &e,
                                                  const SymDim &n,
                                                  int64_t numKeys,
                                                  bool scatter) {
  Type i32 = IntegerType::get(e.first()->getContext(), 32);
  int64_t keyBlocks = (numKeys + kSortThreads - 1) / kSortThreads;
  CountingSort s;
  s.counts = e.scratch(i32, {SymDim(kSortTiles * numKeys)});
  s.rank = e.scratch(i32, {n});
  s.totals = e.scratch(i32, {SymDim(std::max<int64_t>(1, keyBlocks))});
  s.offsets = e.scratch(i32, {SymDim(numKeys + 1)});
  s.order = scatter ? e.scratch(i32, {n}) : -1;
  return s;
}

void mlir::moe::cuda::emitCountingSortPhases(
    GroupEmitter &e, const CountingSort &s, StringRef prefix, const SymDim &n,
    int64_t numKeys, llvm::function_ref<std::string(CodeWriter &)> keys,
    bool scatter) {
  Type i32 = IntegerType::get(e.first()->getContext(), 32);
  auto buffer = [&](int64_t id, bool writable) {
    return e.bufferExpr(e.argument(id), i32, writable);
  };
  std::string params = llvm::formatv("<{0}, {1}>", kSortTiles, kSortThreads);
  // One phase: `body` writes the device library call.
  auto phase = [&](StringRef name, GridDim grid,
                   llvm::function_ref<void(CodeWriter &)> body) {
    e.beginKernel((prefix + name).str());
    CodeWriter w;
    w.indent();
    body(w);
    e.finishKernel(w.str(), grid, GridDim(), GridDim(), kSortThreads);
  };
  // The key count is a kernel argument of its own slot, so that sorts that
  // differ only in it (a vocabulary, an expert count) share their kernels.
  auto declareKeyCount = [&](CodeWriter &w) {
    e.declareScalar(w, "numKeys", SymDim(numKeys), /*ownSlot=*/true);
  };
  phase("rank", GridDim{SymDim(kSortTiles), 1}, [&](CodeWriter &w) {
    e.declareScalar(w, "n", n);
    declareKeyCount(w);
    std::string k = keys(w);
    w.line(fill("moec::sortRank${params}(n, numKeys, ${keys}, ${counts}, "
                "${rank});",
                {{"params", params},
                 {"keys", k},
                 {"counts", buffer(s.counts, true)},
                 {"rank", buffer(s.rank, true)}}));
  });
  phase("count", GridDim{SymDim(numKeys), kSortThreads}, [&](CodeWriter &w) {
    declareKeyCount(w);
    w.line(fill("moec::sortCount${params}(numKeys, ${counts}, ${offsets}, "
                "${totals});",
                {{"params", params},
                 {"counts", buffer(s.counts, true)},
                 {"offsets", buffer(s.offsets, true)},
                 {"totals", buffer(s.totals, true)}}));
  });
  if (!scatter)
    return;
  phase("offsets", GridDim{SymDim(numKeys), kSortThreads}, [&](CodeWriter &w) {
    declareKeyCount(w);
    w.line(fill("moec::sortOffsets<${threads}>(numKeys, ${totals}, "
                "${offsets});",
                {{"threads", kSortThreads},
                 {"totals", buffer(s.totals, false)},
                 {"offsets", buffer(s.offsets, true)}}));
  });
  phase("scatter", GridDim{n, kSortThreads}, [&](CodeWriter &w) {
    e.declareScalar(w, "n", n);
    declareKeyCount(w);
    std::string k = keys(w);
    w.line(fill("moec::sortScatter${params}(n, numKeys, ${keys}, ${counts}, "
                "${rank}, ${offsets}, ${order});",
                {{"params", params},
                 {"keys", k},
                 {"counts", buffer(s.counts, false)},
                 {"rank", buffer(s.rank, false)},
                 {"offsets", buffer(s.offsets, false)},
                 {"order", buffer(s.order, true)}}));
  });
}

CountingSort mlir::moe::cuda::emitCountingSort(GroupEmitter &e, Value keys,
                                               int64_t numKeys) {
  SymDim n = e.numElements(keys);
  CountingSort s = countingSortScratch(e, n, numKeys, /*scatter=*/true);
  emitCountingSortPhases(
      e, s, "sort_", n, numKeys,
      [&](CodeWriter &w) { return e.declared(w, keys, false, "keys"); },
      /*scatter=*/true);
  return s;
}
