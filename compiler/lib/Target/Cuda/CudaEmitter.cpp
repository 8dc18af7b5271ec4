//===- CudaEmitter.cpp - fused groups -> CUDA kernels ---------------------===//

#include "GroupEmitter.h"
#include "moec/Transforms/PlanAttrs.h"
#include "moec/Transforms/ShapeAnalysis.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cuda;

LogicalResult mlir::moe::cuda::emitGroup(GroupEmitter &e) {
  using Fn = LogicalResult (*)(GroupEmitter &);
  Fn fn = llvm::StringSwitch<Fn>(e.group().kind)
              .Cases("elementwise", "scalar", emitElementwiseGroup)
              .Case("gemm", emitGemmGroup)
              .Case("gemm_grad", emitGemmGradGroup)
              .Case("norm", emitNormGroup)
              .Case("norm_grad", emitNormGradGroup)
              .Case("embedding", emitEmbeddingGroup)
              .Case("embedding_grad", emitEmbeddingGradGroup)
              .Case("positions_grad", emitPositionsGradGroup)
              .Case("kv_write", emitKvWriteGroup)
              .Case("attention", emitAttentionGroup)
              .Case("attention_grad", emitAttentionGradGroup)
              .Case("router", emitRouterGroup)
              .Case("router_grad", emitRouterGradGroup)
              .Case("z_loss_grad", emitZLossGradGroup)
              .Case("switch_loss_grad", emitSwitchLossGradGroup)
              .Case("experts", emitExpertsGroup)
              .Case("experts_grad", emitExpertsGradGroup)
              .Case("cross_entropy", emitCrossEntropyGroup)
              .Case("cross_entropy_grad", emitCrossEntropyGradGroup)
              .Case("global_norm", emitGlobalNormGroup)
              .Case("optimizer", emitOptimizerGroup)
              .Default(nullptr);
  if (!fn)
    return e.error("is in a '")
           << e.group().kind << "' kernel group, which this moec cannot "
           << "generate CUDA for yet";
  return fn(e);
}

FailureOr<ProgramCode> mlir::moe::cuda::emitProgram(
    func::FuncOp func, StringRef program, KernelTable &kernels) {
  ProgramContext ctx;
  ctx.program = program.str();
  ctx.kernels = &kernels;
  if (failed(computeSymbolicShapes(func, ctx.shapes)))
    return failure();
  ctx.buffers = plan::bufferIds(func);
  if (auto table = func->getAttrOfType<ArrayAttr>(plan::kBuffers))
    ctx.planBuffers = table.size();
  for (const KernelGroup &group : collectGroups(func)) {
    GroupCode code;
    code.group = group.id;
    code.kind = group.kind.str();
    for (Operation *op : group.ops)
      if (auto step = op->getAttrOfType<IntegerAttr>(plan::kStep))
        code.steps.push_back(step.getInt());
    ctx.code.groups.push_back(code);
    GroupEmitter emitter(ctx, group);
    if (failed(emitGroup(emitter)) || emitter.exceededAbi())
      return failure();
  }
  return std::move(ctx.code);
}

std::string mlir::moe::cuda::KernelTable::add(const std::string &name,
                                              const std::string &header,
                                              const std::string &code) {
  auto [it, inserted] = nameByCode.try_emplace(code, name);
  if (!inserted)
    return it->second;
  // Spell the kernel's name wherever the code names itself.
  std::string source = header + code;
  const std::string placeholder = kNamePlaceholder;
  for (size_t at = source.find(placeholder); at != std::string::npos;
       at = source.find(placeholder, at + name.size()))
    source.replace(at, placeholder.size(), name);
  list.push_back({name, std::move(source)});
  return name;
}
