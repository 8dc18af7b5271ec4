//===- KernelRegistry.cpp - the table of cpu kernels ----------------------===//

#include "KernelRegistry.h"
#include "kernels/Kernels.h"
#include "moec/support/MoeDefs.h"

namespace moec::cpu {

const std::vector<KernelEntry> &kernelTable() {
  namespace ops = defs::ops;
  static const std::vector<KernelEntry> table = {
      {ops::embedding::kName, embeddingKernel},
      {ops::embedding_grad::kName, embeddingGradKernel},
      {ops::add_positions::kName, addPositionsKernel},
      {ops::add_positions_grad::kName, addPositionsGradKernel},
      {ops::rope::kName, ropeKernel},
      {ops::linear::kName, linearKernel},
      {ops::linear_grad::kName, linearGradKernel},
      {ops::layer_norm::kName, layerNormKernel},
      {ops::layer_norm_grad::kName, layerNormGradKernel},
      {ops::rms_norm::kName, rmsNormKernel},
      {ops::rms_norm_grad::kName, rmsNormGradKernel},
      {ops::activation::kName, activationKernel},
      {ops::activation_grad::kName, activationGradKernel},
      {ops::cast::kName, castKernel},
      {ops::dropout::kName, dropoutKernel},
      {ops::dropout_grad::kName, dropoutGradKernel},
      {ops::attention::kName, attentionKernel},
      {ops::attention_grad::kName, attentionGradKernel},
      {ops::kv_cache_write::kName, kvCacheWriteKernel},
      {ops::topk_router::kName, topkRouterKernel},
      {ops::topk_router_grad::kName, topkRouterGradKernel},
      {ops::expert_load::kName, expertLoadKernel},
      {ops::routing_stats::kName, routingStatsKernel},
      {ops::expert_ffn::kName, expertFfnKernel},
      {ops::expert_ffn_grad::kName, expertFfnGradKernel},
      {ops::expert_map::kName, expertMapKernel},
      {ops::expert_map_grad::kName, expertMapGradKernel},
      {ops::expert_reduce::kName, expertReduceKernel},
      {ops::expert_reduce_grad::kName, expertReduceGradKernel},
      {ops::cv_loss::kName, cvLossKernel},
      {ops::cv_loss_grad::kName, cvLossGradKernel},
      {ops::switch_loss::kName, switchLossKernel},
      {ops::switch_loss_grad::kName, switchLossGradKernel},
      {ops::z_loss::kName, zLossKernel},
      {ops::z_loss_grad::kName, zLossGradKernel},
      {ops::cross_entropy::kName, crossEntropyKernel},
      {ops::cross_entropy_grad::kName, crossEntropyGradKernel},
      {ops::normalize_rows::kName, normalizeRowsKernel},
      {ops::normalize_rows_grad::kName, normalizeRowsGradKernel},
      {ops::finite_or_min::kName, finiteOrMinKernel},
      {ops::finite_or_min_grad::kName, finiteOrMinGradKernel},
      {ops::rescale_rows::kName, rescaleRowsKernel},
      {ops::batch_norm::kName, batchNormKernel},
      {ops::batch_norm_grad::kName, batchNormGradKernel},
      {ops::window_mean::kName, windowMeanKernel},
      {ops::window_mean_grad::kName, windowMeanGradKernel},
      {ops::head_mixture::kName, headMixtureKernel},
      {ops::head_mixture_grad::kName, headMixtureGradKernel},
      {ops::sample_expert::kName, sampleExpertKernel},
      {ops::gate_stats::kName, gateStatsKernel},
      {ops::lr_schedule::kName, lrScheduleKernel},
      {ops::global_norm::kName, globalNormKernel},
      {ops::adam_update::kName, adamUpdateKernel},
      {ops::sgd_update::kName, sgdUpdateKernel},
      {ops::arith::kAddf, addfKernel},
      {ops::arith::kSubf, subfKernel},
      {ops::arith::kMulf, mulfKernel},
      {ops::arith::kDivf, divfKernel},
      {ops::arith::kNegf, negfKernel},
      {ops::arith::kMaximumf, maximumfKernel},
      {ops::arith::kMinimumf, minimumfKernel},
  };
  return table;
}

} // namespace moec::cpu
