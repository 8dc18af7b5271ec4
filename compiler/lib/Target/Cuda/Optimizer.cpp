//===- Optimizer.cpp - the gradient norm and the optimizer updates --------===//
//
// global_norm: a fixed grid of blocks each adds the squares of its share of
// every gradient (in double), the last block adds the block sums in order,
// takes the root and evaluates the group's clipping arithmetic. optimizer:
// every parameter update of the program in multi-tensor launches of equal
// share, each tensor's size a kernel argument, so that the launches of a
// large model run one kernel (NVRTC compiles it once).
//
//===----------------------------------------------------------------------===//

#include "GroupEmitter.h"
#include "moe/IR/MoeOps.h"
#include "moec/support/MoeDefs.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <functional>
#include <map>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cuda;

namespace {

constexpr int64_t kNormBlocks = 64;

/// The accessor expression of a value's buffer, for a call argument: the
/// loops over a tensor's elements live in the device library (optim.cuh),
/// so a kernel holds a call per tensor, not a loop.
std::string pointer(GroupEmitter &e, Value v, bool writable) {
  return e.bufferExpr(e.buffer(v), elementTypeOf(v), writable);
}

/// Adds the sums of squares of `grads` to `s`, the tensors of one size
/// together, so that their calls roll into one loop (emitRolledCalls): a
/// model's hundred gradients have a handful of sizes. The sum runs over the
/// tensors in that order, a fixed order like any other.
void sumSquaresBySize(GroupEmitter &e, CodeWriter &w,
                      llvm::SmallVector<Value> grads) {
  auto size = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getNumElements();
  };
  llvm::stable_sort(grads, [&](Value a, Value b) { return size(a) < size(b); });
  llvm::SmallVector<std::string> calls;
  for (Value g : grads)
    calls.push_back(llvm::formatv("s += moec::sumOfSquares({0}, {1});",
                                  pointer(e, g, false), size(g)));
  emitRolledCalls(w, calls);
}

} // namespace

LogicalResult mlir::moe::cuda::emitGlobalNormGroup(GroupEmitter &e) {
  auto norm = cast<GlobalNormOp>(e.first());
  MLIRContext *ctx = norm->getContext();
  Type f64 = Float64Type::get(ctx), i32 = IntegerType::get(ctx, 32);
  for (Value g : norm.getInputs()) {
    auto type = cast<RankedTensorType>(g.getType());
    if (!type.getElementType().isF32() || !type.hasStaticShape())
      return norm.emitOpError(
          "the CUDA gradient norm takes static f32 tensors");
  }
  // Large models have more gradients than one kernel's parameter block
  // holds: each launch sums its share into partials of its own, in stream
  // order, and the last one adds them all up in a fixed order.
  constexpr size_t kPerLaunch = 160;
  static_assert(kPerLaunch + 16 <= size_t(moec::defs::kMaxKernelBuffers),
                "a gradient-norm launch must fit the kernel ABI");
  auto inputs = norm.getInputs();
  const size_t launches = (inputs.size() + kPerLaunch - 1) / kPerLaunch;
  int64_t partials =
      e.scratch(f64, {SymDim(kNormBlocks * static_cast<int64_t>(launches))});
  int64_t ticket = e.scratch(i32, {SymDim(1)}, "ticket");
  const int64_t threads = 256;
  CodeWriter w;
  for (size_t launch = 0; launch < launches; ++launch) {
    bool last = launch + 1 == launches;
    e.beginKernel(launches > 1 ? "part" + std::to_string(launch) : "");
    w = CodeWriter();
    w.indent();
    w.line("MOEC_SHARED(double, warpSums, 8);");
    w.line("double s = 0.0;");
    size_t end = std::min(inputs.size(), (launch + 1) * kPerLaunch);
    sumSquaresBySize(e, w,
                     llvm::to_vector(inputs.slice(launch * kPerLaunch,
                                                  end - launch * kPerLaunch)));
    w.line(llvm::formatv("const moec::gptr<double> partials = {0};",
                         e.bufferExpr(e.argument(partials), f64, true)));
    w.line(llvm::formatv("s = moec::blockSum<{0}>(s, warpSums);", threads));
    w.line(llvm::formatv("if (threadIdx.x == 0) partials[{0} + blockIdx.x] = "
                         "s;",
                         static_cast<int64_t>(launch) * kNormBlocks));
    if (!last)
      e.finishKernel(w.str(), GridDim{SymDim(kNormBlocks), 1}, GridDim(),
                     GridDim(), threads);
  }
  w.line(llvm::formatv("if (!moec::isLastBlock(moec::bufferArg<unsigned>(p, "
                       "{0})) || threadIdx.x != 0) return;",
                       e.argument(ticket)));
  w.line("double total = 0.0;");
  w.line(llvm::formatv("for (int b = 0; b < {0}; ++b) total += partials[b];",
                       kNormBlocks * static_cast<int64_t>(launches)));
  // The norm, then the clipping arithmetic fused after it, on one thread.
  llvm::DenseMap<Value, std::string> names;
  std::string root = e.fresh();
  w.line("const float " + root + " = static_cast<float>(sqrt(total));");
  names[norm.getNorm()] = root;
  auto store = [&](Value v) {
    if (e.escapes(v)) {
      std::string out = e.declared(w, v, true, "out");
      w.line(out + "[0] = " + names[v] + ";");
    }
  };
  store(norm.getNorm());
  for (Operation *op : llvm::drop_begin(e.group().ops)) {
    llvm::SmallVector<std::string> in;
    for (Value v : op->getOperands()) {
      if (!names.count(v)) {
        std::string p = e.declared(w, v, false, "in");
        names[v] = p + "[0]";
      }
      in.push_back(names[v]);
    }
    FailureOr<std::string> v = e.elementwise(w, op, in, "0");
    if (failed(v))
      return op->emitOpError("cannot follow the gradient norm in its kernel");
    names[op->getResult(0)] = *v;
    store(op->getResult(0));
  }
  e.finishKernel(w.str(), GridDim{SymDim(kNormBlocks), 1}, GridDim(), GridDim(),
                 threads);
  return success();
}

namespace {

/// The per-launch values every update of a multi-tensor launch shares (the
/// step, the learning rate, the gradient scale, Adam's bias corrections),
/// each read or computed once at the top of the kernel.
class SharedScalars {
public:
  SharedScalars(GroupEmitter &e, CodeWriter &w) : e(e), w(w) {}

  /// `v[0]` as a float local.
  std::string value(Value v) {
    auto [it, inserted] = loaded.try_emplace(v);
    if (inserted) {
      std::string buffer = e.declared(w, v, false, "in");
      it->second = e.fresh("s");
      w.line(llvm::formatv("const float {0} = static_cast<float>({1}[0]);",
                           it->second, buffer));
    }
    return it->second;
  }

  /// 1 / (1 - beta^step) as a float local.
  std::string inverseCorrection(Value step, double beta) {
    auto [it, inserted] =
        corrections.try_emplace({step.getAsOpaquePointer(), beta});
    if (inserted) {
      auto [s, stepInserted] = steps.try_emplace(step);
      if (stepInserted) {
        std::string buffer = e.declared(w, step, false, "step");
        s->second = e.fresh("t");
        w.line(llvm::formatv("const double {0} = static_cast<double>({1}[0]);",
                             s->second, buffer));
      }
      it->second = e.fresh("rbc");
      w.line(llvm::formatv("const float {0} = static_cast<float>(1.0 / (1.0 - "
                           "pow({1}, {2})));",
                           it->second, doubleLiteral(beta), s->second));
    }
    return it->second;
  }

private:
  GroupEmitter &e;
  CodeWriter &w;
  llvm::DenseMap<Value, std::string> loaded, steps;
  std::map<std::pair<void *, double>, std::string> corrections;
};

} // namespace

LogicalResult mlir::moe::cuda::emitOptimizerGroup(GroupEmitter &e) {
  const auto &ops = e.group().ops;
  // Each update takes a size and up to 4 pointers of its own, and a few
  // pointers are shared (learning rate, step, gradient scale). The updates
  // are dealt out evenly, so the launches hold as many updates each (give
  // or take one) and, with the sizes in arguments, usually the same text.
  constexpr size_t kPerLaunch = moec::defs::kMaxKernelScalars;
  static_assert(kPerLaunch * 4 + 8 <= size_t(moec::defs::kMaxKernelBuffers),
                "an optimizer launch must fit the kernel ABI");
  if (ops.empty())
    return success();
  const size_t launches = (ops.size() + kPerLaunch - 1) / kPerLaunch;
  const size_t slots = (ops.size() + launches - 1) / launches;
  for (size_t launch = 0; launch < launches; ++launch) {
    size_t begin = launch * ops.size() / launches;
    size_t end = (launch + 1) * ops.size() / launches;
    e.beginKernel(launches > 1 ? "part" + std::to_string(launch) : "");
    e.restartNames();
    CodeWriter w;
    w.indent();
    w.line("if (moec::badDataReported(moec::kernelReport(p)))");
    w.line("  return;");
    SharedScalars shared(e, w);
    // Updates with the same hyperparameters share one moec::AdamConfig.
    std::map<std::string, std::string> configs;
    auto size = [&](int64_t n) {
      return llvm::formatv("moec::scalarArg(p, {0})", e.ownScalar(SymDim(n)))
          .str();
    };
    // The calls, written after the shared values and configurations they
    // use, rolled into loops where they differ only in argument slots.
    llvm::SmallVector<std::string> calls;
    // The call of the launch's last update, given its pointers and size.
    std::function<void(llvm::ArrayRef<std::string>, const std::string &)> call;
    bool lastIsAdam = false;
    int64_t largest = 0;
    for (size_t i = begin; i < end; ++i) {
      Operation *op = ops[i];
      auto type = cast<RankedTensorType>(op->getOperand(0).getType());
      if (!type.getElementType().isF32())
        return op->emitOpError("the CUDA optimizer updates f32 parameters");
      int64_t n = type.getNumElements();
      largest = std::max(largest, n);
      llvm::SmallVector<std::string, 7> pointers;
      if (auto adam = dyn_cast<AdamUpdateOp>(op)) {
        double b1 = adam.getBeta1().convertToDouble(),
               b2 = adam.getBeta2().convertToDouble();
        std::string lr = shared.value(adam.getLr());
        std::string scale = shared.value(adam.getGradScale());
        std::string rbc1 = shared.inverseCorrection(adam.getStep(), b1);
        std::string rbc2 = shared.inverseCorrection(adam.getStep(), b2);
        std::string fields =
            fill("${lr}, ${scale}, ${beta1}, ${beta2}, ${eps}, ${weightDecay}, "
                 "${rbc1}, ${rbc2}, ${decoupled}",
                 {{"lr", lr},
                  {"scale", scale},
                  {"beta1", floatLiteral(b1)},
                  {"beta2", floatLiteral(b2)},
                  {"eps", floatLiteral(adam.getEps().convertToDouble())},
                  {"weightDecay",
                   floatLiteral(adam.getWeightDecay().convertToDouble())},
                  {"rbc1", rbc1},
                  {"rbc2", rbc2},
                  {"decoupled", static_cast<bool>(adam.getDecoupled())}});
        auto [config, inserted] = configs.try_emplace(fields);
        if (inserted) {
          config->second = e.fresh("adam");
          w.line(llvm::formatv("const moec::AdamConfig {0}{{{1}};",
                               config->second, fields));
        }
        // Arguments numbered in operand order, whatever the order in which
        // the host compiler evaluates a call's arguments.
        pointers = {pointer(e, adam.getParam(), false),
                    pointer(e, adam.getGrad(), false),
                    pointer(e, adam.getM(), false),
                    pointer(e, adam.getV(), false),
                    pointer(e, adam.getNewParam(), true),
                    pointer(e, adam.getNewM(), true),
                    pointer(e, adam.getNewV(), true)};
        call = [&calls, config = config->second](
                   llvm::ArrayRef<std::string> ptrs, const std::string &size) {
          calls.push_back(llvm::formatv("moec::adamUpdate({0}, {1}, {2});",
                                        llvm::join(ptrs, ", "), size, config));
        };
        lastIsAdam = true;
      } else {
        auto sgd = cast<SgdUpdateOp>(op);
        std::string lr = shared.value(sgd.getLr());
        std::string scale = shared.value(sgd.getGradScale());
        pointers = {
            pointer(e, sgd.getParam(), false), pointer(e, sgd.getGrad(), false),
            pointer(e, sgd.getM(), false), pointer(e, sgd.getNewParam(), true),
            pointer(e, sgd.getNewM(), true)};
        std::string rest =
            llvm::formatv("{0}, {1}, {2}, {3}", lr, scale,
                          floatLiteral(sgd.getMomentum().convertToDouble()),
                          floatLiteral(sgd.getWeightDecay().convertToDouble()));
        call = [&calls, rest](llvm::ArrayRef<std::string> ptrs,
                              const std::string &size) {
          calls.push_back(llvm::formatv("moec::sgdUpdate({0}, {1}, {2});",
                                        llvm::join(ptrs, ", "), size, rest));
        };
        lastIsAdam = false;
      }
      call(pointers, size(n));
    }
    // Launches short of an update repeat their last call on null pointers
    // and size 0 (which touches no memory), so that every launch of alike
    // updates has the same text.
    Type f32 = Float32Type::get(e.first()->getContext());
    auto at = [&](int arg, bool writable) {
      return e.bufferExpr(arg, f32, writable);
    };
    for (size_t slot = end - begin; slot < slots; ++slot) {
      int param = e.nullArgument(), grad = e.nullArgument(),
          m = e.nullArgument(), v = lastIsAdam ? e.nullArgument() : -1;
      if (lastIsAdam)
        call({at(param, false), at(grad, false), at(m, false), at(v, false),
              at(param, true), at(m, true), at(v, true)},
             size(0));
      else
        call({at(param, false), at(grad, false), at(m, false), at(param, true),
              at(m, true)},
             size(0));
    }
    emitRolledCalls(w, calls);
    // Enough blocks for the largest tensor of the launch, four elements a
    // thread.
    e.finishKernel(w.str(), GridDim{SymDim(largest), 256 * 4}, GridDim(),
                   GridDim(), 256);
  }
  return success();
}
