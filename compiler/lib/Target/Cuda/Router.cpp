//===- Router.cpp - the fused router and the router gradients -------------===//

#include "GroupEmitter.h"
#include "mlir/IR/Builders.h"
#include "moe/IR/MoeOps.h"
#include "llvm/Support/FormatVariadic.h"
#include <functional>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cuda;

LogicalResult mlir::moe::cuda::emitRouterGroup(GroupEmitter &e) {
  LinearOp linear;
  TopKRouterOp router;
  SwitchLossOp balance;
  ZLossOp zloss;
  ExpertLoadOp load;
  for (Operation *op : e.group().ops) {
    if (auto l = dyn_cast<LinearOp>(op))
      linear = l;
    else if (auto r = dyn_cast<TopKRouterOp>(op))
      router = r;
    else if (auto b = dyn_cast<SwitchLossOp>(op))
      balance = b;
    else if (auto z = dyn_cast<ZLossOp>(op))
      zloss = z;
    else if (auto l = dyn_cast<ExpertLoadOp>(op))
      load = l;
  }
  if (!router)
    return e.error("a router group needs its moe.topk_router");
  if (linear && linear.getTransposeWeight())
    return linear.emitOpError("router logits with a transposed weight are not "
                              "supported by the CUDA router");
  Value logits = router.getLogits();
  int64_t experts = cast<RankedTensorType>(logits.getType()).getShape().back();
  int64_t k = static_cast<int64_t>(router.getK());
  // One warp holds a token's probabilities, at most 32 per lane
  // (moec::kRouterMaxExperts).
  if (experts > 1024)
    return router.emitOpError("the CUDA router handles at most 1024 experts, "
                              "got ")
           << experts;
  int64_t d =
      linear ? cast<RankedTensorType>(linear.getX().getType()).getShape().back()
             : 0;
  int64_t threads = e.tile(e.tiles().getThreads()), warps = threads / 32;
  SymDim tokens = e.rowsOf(logits);
  SymDim assignments = tokens * SymDim(k);
  const bool bpr = router.getPriority() == Priority::Bpr;
  MLIRContext *ctx = e.first()->getContext();
  Type f32 = Float32Type::get(ctx), i32 = IntegerType::get(ctx, 32);
  int64_t zPart = e.scratch(f32, {tokens});
  int64_t pPart = e.scratch(f32, {tokens * SymDim(experts)});
  int64_t top1 = e.scratch(f32, {tokens});
  int64_t live = e.scratch(i32, {assignments});
  int64_t ticket = e.scratch(i32, {SymDim(1)}, "ticket");
  auto scratch = [&](int64_t id, Type type, bool writable) {
    return e.bufferExpr(e.argument(id), type, writable);
  };

  // RouterParams fields: a value's buffer. The logits and probabilities
  // are stored even where only the backward program reads them, so that the
  // loss and backward programs share one kernel (NVRTC compiles it once);
  // other results only when read after the group.
  auto set = [&](CodeWriter &w, StringRef field, Value v, bool writable,
                 bool always = false) {
    if (!v || (writable && !always && !e.escapes(v)))
      return;
    w.line(
        llvm::formatv("r.{0} = {1};", field,
                      e.bufferExpr(e.buffer(v), elementTypeOf(v), writable)));
  };
  auto begin = [&](CodeWriter &w) {
    w.line("moec::RouterParams r{};");
    w.line(
        llvm::formatv("r.tokens = moec::scalarArg(p, {0});", e.scalar(tokens)));
  };
  // What the router kernel and the slots kernel both write.
  auto routing = [&](CodeWriter &w) {
    set(w, "gates", router.getGates(), true);
    // expert is also read back by the tail: always stored.
    w.line(
        llvm::formatv("r.expert = {0};",
                      e.bufferExpr(e.buffer(router.getExpert()), i32, true)));
  };

  e.beginKernel("");
  CodeWriter w;
  w.indent();
  begin(w);
  if (linear) {
    set(w, "h", linear.getX(), false);
    set(w, "w", linear.getWeight(), false);
    set(w, "bias", linear.getBias(), false);
    set(w, "logits", linear.getResult(), true, /*always=*/true);
  } else {
    set(w, "logitsIn", logits, false);
  }
  set(w, "mask", router.getMask(), false);
  set(w, "seed", router.getSeed(), false);
  w.line(llvm::formatv("r.stream = {0}ull;",
                       static_cast<uint64_t>(router.getStream())));
  set(w, "probs", router.getProbs(), true, /*always=*/true);
  routing(w);
  // The auxiliary losses' outputs, a null argument where the program
  // computes none (forward, decode), so that those programs' router is the
  // loss program's kernel (NVRTC compiles it once); it skips null outputs.
  auto lossOutput = [&](StringRef field, Value loss) {
    if (loss)
      return set(w, field, loss, true);
    w.line(llvm::formatv("r.{0} = {1};", field,
                         e.bufferExpr(e.nullArgument(), f32, true)));
  };
  lossOutput("balance", balance ? balance.getLoss() : Value());
  lossOutput("zloss", zloss ? zloss.getLoss() : Value());
  w.line(llvm::formatv("r.zPart = {0};", scratch(zPart, f32, true)));
  w.line(llvm::formatv("r.pPart = {0};", scratch(pPart, f32, true)));
  w.line(llvm::formatv("r.top1 = {0};", scratch(top1, f32, true)));
  w.line(llvm::formatv("r.live = {0};", scratch(live, i32, true)));
  w.line(llvm::formatv("r.ticket = moec::bufferArg<unsigned>(p, {0});",
                       e.argument(ticket)));
  w.line("r.report = moec::kernelReport(p);");
  BalanceLoss variant = balance ? balance.getVariant() : BalanceLoss::AllSlots;
  w.line(fill("moec::routerKernel<${D}, ${E}, ${K}, ${S}, ${threads}, "
              "${linear}, ${gate}, ${bpr}, ${balance}>(r);",
              {{"D", std::max<int64_t>(d, 1)},
               {"E", experts},
               {"K", k},
               {"S", static_cast<int64_t>(router.getSample())},
               {"threads", threads},
               {"linear", static_cast<bool>(linear)},
               {"gate", deviceEnum(router.getGate())},
               {"bpr", bpr},
               {"balance", deviceEnum(variant)}}));
  e.finishKernel(w.str(), GridDim{tokens, warps}, GridDim(), GridDim(),
                 threads);

  // Batch priority: three radix passes over the tokens' top-1 keys
  // (router_tail.cuh), each a stable counting sort of 11-bit digits.
  std::function<std::string()> order = [] {
    return std::string("moec::PriorityOrder{}");
  };
  if (bpr) {
    constexpr int64_t kDigits = 2048, kPasses = 3;
    CountingSort sort =
        countingSortScratch(e, tokens, kDigits, /*scatter=*/true);
    int64_t digits = e.scratch(i32, {tokens});
    int64_t cur[2] = {e.scratch(i32, {tokens}), e.scratch(i32, {tokens})};
    for (int64_t pass = 0; pass < kPasses; ++pass) {
      e.beginKernel(llvm::formatv("bpr{0}_digits", pass).str());
      CodeWriter dw;
      dw.indent();
      e.declareScalar(dw, "n", tokens);
      std::string none = "moec::gptr<const int32_t>()";
      dw.line(
          fill("moec::priorityDigits<${threads}>(n, ${pass}, ${top1}, ${prev}, "
               "${perm}, ${cur}, ${digits});",
               {{"threads", kSortThreads},
                {"pass", pass},
                {"top1", scratch(top1, f32, false)},
                {"prev", pass == 2 ? scratch(cur[0], i32, false) : none},
                {"perm", pass > 0 ? scratch(sort.order, i32, false) : none},
                {"cur", pass > 0 ? scratch(cur[pass - 1], i32, true)
                                 : std::string("moec::gptr<int32_t>()")},
                {"digits", scratch(digits, i32, true)}}));
      e.finishKernel(dw.str(), GridDim{tokens, kSortThreads}, GridDim(),
                     GridDim(), kSortThreads);
      emitCountingSortPhases(
          e, sort, llvm::formatv("bpr{0}_sort_", pass).str(), tokens, kDigits,
          [&](CodeWriter &) { return scratch(digits, i32, false); },
          /*scatter=*/true);
    }
    order = [&, sort, cur] {
      return llvm::formatv("moec::PriorityOrder{{{0}, {1}}",
                           scratch(cur[1], i32, false),
                           scratch(sort.order, i32, false))
          .str();
    };
  }

  // Capacity slots: a counting sort of the choice-major priority positions
  // by expert; a position's rank among its expert's is its slot.
  CountingSort slots =
      countingSortScratch(e, assignments, experts, /*scatter=*/false);
  int64_t keys = e.scratch(i32, {assignments});
  e.beginKernel("slot_keys");
  {
    CodeWriter kw;
    kw.indent();
    e.declareScalar(kw, "tokens", tokens);
    kw.line(fill(
        "moec::slotKeys<${K}, ${threads}>(tokens, ${order}, "
        "${expert}, ${live}, ${keys});",
        {{"K", k},
         {"threads", kSortThreads},
         {"order", order()},
         {"expert", e.bufferExpr(e.buffer(router.getExpert()), i32, false)},
         {"live", scratch(live, i32, false)},
         {"keys", scratch(keys, i32, true)}}));
    e.finishKernel(kw.str(), GridDim{assignments, kSortThreads}, GridDim(),
                   GridDim(), kSortThreads);
  }
  emitCountingSortPhases(
      e, slots, "slot_sort_", assignments, experts,
      [&](CodeWriter &) { return scratch(keys, i32, false); },
      /*scatter=*/false);
  e.beginKernel("slots");
  CodeWriter sw;
  sw.indent();
  begin(sw);
  routing(sw);
  set(sw, "slot", router.getSlot(), true);
  if (load)
    set(sw, "load", load.getLoad(), true);
  sw.line(llvm::formatv(
      "r.capacityFactor = {0};",
      doubleLiteral(router.getCapacityFactor().convertToDouble())));
  sw.line(llvm::formatv("r.minCapacity = {0};",
                        static_cast<int64_t>(router.getMinCapacity())));
  sw.line(fill("moec::applySlots<${E}, ${K}, ${tiles}, ${threads}, "
               "${capacity}>(r, ${order}, ${keys}, ${counts}, ${rank}, "
               "${totals});",
               {{"E", experts},
                {"K", k},
                {"tiles", kSortTiles},
                {"threads", kSortThreads},
                {"capacity", deviceEnum(router.getCapacity())},
                {"order", order()},
                {"keys", scratch(keys, i32, false)},
                {"counts", scratch(slots.counts, i32, false)},
                {"rank", scratch(slots.rank, i32, false)},
                {"totals", scratch(slots.offsets, i32, false)}}));
  e.finishKernel(sw.str(), GridDim{assignments, kSortThreads}, GridDim(),
                 GridDim(), kSortThreads);
  return success();
}

LogicalResult mlir::moe::cuda::emitRoutingStatsGroup(GroupEmitter &e) {
  auto op = cast<RoutingStatsOp>(e.first());
  int64_t threads = e.tile(e.tiles().getThreads());
  int64_t k =
      cast<RankedTensorType>(op.getExpert().getType()).getShape().back();
  e.beginKernel("");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "rows", e.rowsOf(op.getExpert()));
  std::string expert = e.declared(w, op.getExpert(), false, "expert");
  std::string slot = e.declared(w, op.getSlot(), false, "slot");
  std::string stats = e.declared(w, op.getStats(), true, "stats");
  w.line(fill("moec::routingStats<${K}, ${parts}, ${E}, ${threads}>(rows, "
              "${expert}, ${slot}, ${stats});",
              {{"K", k},
               {"parts", static_cast<int64_t>(op.getParts())},
               {"E", static_cast<int64_t>(op.getNumExperts())},
               {"threads", threads},
               {"expert", expert},
               {"slot", slot},
               {"stats", stats}}));
  e.finishKernel(w.str(), GridDim(), GridDim(), GridDim(), threads);
  return success();
}

LogicalResult mlir::moe::cuda::emitRouterGradGroup(GroupEmitter &e) {
  auto op = cast<TopKRouterGradOp>(e.first());
  int64_t experts =
      cast<RankedTensorType>(op.getProbs().getType()).getShape().back();
  int64_t k =
      cast<RankedTensorType>(op.getExpert().getType()).getShape().back();
  SymDim tokens = e.rowsOf(op.getProbs());
  int64_t threads = e.tile(e.tiles().getThreads());
  e.beginKernel("");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "tokens", tokens);
  std::string probs = e.declared(w, op.getProbs(), false, "probs");
  std::string expert = e.declared(w, op.getExpert(), false, "expert");
  std::string slot = e.declared(w, op.getSlot(), false, "slot");
  std::string dgates = op.getDgates()
                           ? e.declared(w, op.getDgates(), false, "dgates")
                           : "moec::gptr<const float>()";
  std::string dprobs = op.getDprobs()
                           ? e.declared(w, op.getDprobs(), false, "dprobs")
                           : "moec::gptr<const float>()";
  std::string out = e.declared(w, op.getDlogits(), true, "dlogits");
  w.line(fill("moec::routerGradRows<${E}, ${K}, ${threads}, ${gate}>(tokens, "
              "${probs}, ${expert}, ${slot}, ${dgates}, ${dprobs}, "
              "${dlogits});",
              {{"E", experts},
               {"K", k},
               {"threads", threads},
               {"gate", deviceEnum(op.getGate())},
               {"probs", probs},
               {"expert", expert},
               {"slot", slot},
               {"dgates", dgates},
               {"dprobs", dprobs},
               {"dlogits", out}}));
  e.finishKernel(w.str(), GridDim{tokens, threads / 32}, GridDim(), GridDim(),
                 threads);
  return success();
}

LogicalResult mlir::moe::cuda::emitZLossGradGroup(GroupEmitter &e) {
  auto op = cast<ZLossGradOp>(e.first());
  int64_t experts =
      cast<RankedTensorType>(op.getLogits().getType()).getShape().back();
  SymDim tokens = e.rowsOf(op.getLogits());
  int64_t threads = e.tile(e.tiles().getThreads());
  e.beginKernel("");
  CodeWriter w;
  w.indent();
  e.declareScalar(w, "tokens", tokens);
  std::string logits = e.declared(w, op.getLogits(), false, "logits");
  std::string dloss = e.declared(w, op.getDloss(), false, "dloss");
  std::string out = e.declared(w, op.getDlogits(), true, "dlogits");
  w.line(llvm::formatv("moec::zLossGradRows<{0}, {1}>(tokens, {2}, {3}, {4});",
                       experts, threads, logits, dloss, out));
  e.finishKernel(w.str(), GridDim{tokens, threads / 32}, GridDim(), GridDim(),
                 threads);
  return success();
}

LogicalResult mlir::moe::cuda::emitSwitchLossGradGroup(GroupEmitter &e) {
  auto op = cast<SwitchLossGradOp>(e.first());
  int64_t experts =
      cast<RankedTensorType>(op.getProbs().getType()).getShape().back();
  int64_t k =
      cast<RankedTensorType>(op.getExpert().getType()).getShape().back();
  SymDim tokens = e.rowsOf(op.getProbs());
  Type f32 = Float32Type::get(e.first()->getContext());
  int64_t fractions = e.scratch(f32, {SymDim(experts + 1)});
  e.beginKernel("fractions");
  {
    CodeWriter w;
    w.indent();
    e.declareScalar(w, "tokens", tokens);
    std::string probs = e.declared(w, op.getProbs(), false, "probs");
    std::string expert = e.declared(w, op.getExpert(), false, "expert");
    w.line(fill("moec::switchLossFractions<${E}, ${K}, 256, ${variant}>("
                "tokens, ${probs}, ${expert}, ${f});",
                {{"E", experts},
                 {"K", k},
                 {"variant", deviceEnum(op.getVariant())},
                 {"probs", probs},
                 {"expert", expert},
                 {"f", e.bufferExpr(e.argument(fractions), f32, true)}}));
    e.finishKernel(w.str(), GridDim(), GridDim(), GridDim(), 256);
  }
  e.beginKernel("rows");
  CodeWriter w;
  w.indent();
  SymDim n = e.numElements(op.getProbs());
  e.declareScalar(w, "n", n);
  std::string dloss = e.declared(w, op.getDloss(), false, "dloss");
  std::string out = e.declared(w, op.getDprobs(), true, "dprobs");
  w.line(llvm::formatv("const moec::gptr<const float> f = {0};",
                       e.bufferExpr(e.argument(fractions), f32, false)));
  // f[E] holds N', the live tokens.
  w.line(fill("const float live = f[${E}] > 1.0f ? f[${E}] : 1.0f;",
              {{"E", experts}}));
  w.line(llvm::formatv(
      "for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + "
      "threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) "
      "{0}[i] = {1}[0] * {2}.0f * f[i % {2}] / live;",
      out, dloss, experts));
  e.finishKernel(w.str(), GridDim{n, 1024}, GridDim(), GridDim(), 256);
  return success();
}
