//===- CudaEmitter.cpp - fused groups -> CUDA kernels ---------------------===//

#include "GroupEmitter.h"
#include "moec/Transforms/PlanAttrs.h"
#include "moec/Analysis/ShapeAnalysis.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cuda;

LogicalResult mlir::moe::cuda::emitGroup(GroupEmitter &e) {
  using K = KernelKind;
  switch (e.group().kind) {
  case K::Elementwise:
  case K::Scalar:
    return emitElementwiseGroup(e);
  case K::Gemm:
    return emitGemmGroup(e);
  case K::GemmGrad:
    return emitGemmGradGroup(e);
  case K::Norm:
    return emitNormGroup(e);
  case K::NormGrad:
    return emitNormGradGroup(e);
  case K::Embedding:
    return emitEmbeddingGroup(e);
  case K::EmbeddingGrad:
    return emitEmbeddingGradGroup(e);
  case K::PositionsGrad:
    return emitPositionsGradGroup(e);
  case K::KvWrite:
    return emitKvWriteGroup(e);
  case K::Attention:
    return emitAttentionGroup(e);
  case K::AttentionGrad:
    return emitAttentionGradGroup(e);
  case K::Router:
    return emitRouterGroup(e);
  case K::RouterGrad:
    return emitRouterGradGroup(e);
  case K::ZLossGrad:
    return emitZLossGradGroup(e);
  case K::SwitchLossGrad:
    return emitSwitchLossGradGroup(e);
  case K::Experts:
    return emitExpertsGroup(e);
  case K::ExpertsGrad:
    return emitExpertsGradGroup(e);
  case K::ExpertMap:
    return emitExpertMapGroup(e);
  case K::ExpertMapGrad:
    return emitExpertMapGradGroup(e);
  case K::ExpertReduce:
    return emitExpertReduceGroup(e);
  case K::ExpertReduceGrad:
    return emitExpertReduceGradGroup(e);
  case K::CvLoss:
    return emitCvLossGroup(e);
  case K::CvLossGrad:
    return emitCvLossGradGroup(e);
  case K::RoutingStats:
    return emitRoutingStatsGroup(e);
  case K::CrossEntropy:
    return emitCrossEntropyGroup(e);
  case K::CrossEntropyGrad:
    return emitCrossEntropyGradGroup(e);
  case K::GlobalNorm:
    return emitGlobalNormGroup(e);
  case K::Optimizer:
    return emitOptimizerGroup(e);
  case K::RowScale:
    return emitRowScaleGroup(e);
  case K::RowScaleGrad:
    return emitRowScaleGradGroup(e);
  case K::FiniteOrMin:
    return emitFiniteOrMinGroup(e);
  case K::FiniteOrMinGrad:
    return emitFiniteOrMinGradGroup(e);
  case K::BatchNorm:
    return emitBatchNormGroup(e);
  case K::BatchNormGrad:
    return emitBatchNormGradGroup(e);
  case K::WindowMean:
    return emitWindowMeanGroup(e);
  case K::WindowMeanGrad:
    return emitWindowMeanGradGroup(e);
  case K::HeadMixtureGrad:
    return emitHeadMixtureGradGroup(e);
  case K::SampleExpert:
    return emitSampleExpertGroup(e);
  case K::GateStats:
    return emitGateStatsGroup(e);
  }
  return e.error("is in a '")
         << stringifyKernelKind(e.group().kind)
         << "' kernel group, which this moec cannot generate CUDA for";
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
    if (!group.tiles)
      return group.op->emitOpError("has no tiles: run moe-tile-kernels first");
    GroupCode code;
    code.group = group.id;
    code.kind = stringifyKernelKind(group.kind).str();
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
