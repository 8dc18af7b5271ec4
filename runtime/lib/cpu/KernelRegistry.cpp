//===- KernelRegistry.cpp - the table of cpu kernels ----------------------===//

#include "KernelRegistry.h"
#include "kernels/Kernels.h"

namespace moec::cpu {

const std::vector<KernelEntry> &kernelTable() {
  static const std::vector<KernelEntry> table = {
      {"moe.embedding", embeddingKernel},
      {"moe.embedding_grad", embeddingGradKernel},
      {"moe.add_positions", addPositionsKernel},
      {"moe.add_positions_grad", addPositionsGradKernel},
      {"moe.linear", linearKernel},
      {"moe.linear_grad", linearGradKernel},
      {"moe.layer_norm", layerNormKernel},
      {"moe.layer_norm_grad", layerNormGradKernel},
      {"moe.rms_norm", rmsNormKernel},
      {"moe.rms_norm_grad", rmsNormGradKernel},
      {"moe.activation", activationKernel},
      {"moe.activation_grad", activationGradKernel},
      {"moe.cast", castKernel},
      {"moe.dropout", dropoutKernel},
      {"moe.dropout_grad", dropoutGradKernel},
      {"moe.attention", attentionKernel},
      {"moe.attention_grad", attentionGradKernel},
      {"moe.kv_cache_write", kvCacheWriteKernel},
      {"moe.topk_router", topkRouterKernel},
      {"moe.topk_router_grad", topkRouterGradKernel},
      {"moe.expert_load", expertLoadKernel},
      {"moe.expert_ffn", expertFfnKernel},
      {"moe.expert_ffn_grad", expertFfnGradKernel},
      {"moe.switch_loss", switchLossKernel},
      {"moe.switch_loss_grad", switchLossGradKernel},
      {"moe.z_loss", zLossKernel},
      {"moe.z_loss_grad", zLossGradKernel},
      {"moe.cross_entropy", crossEntropyKernel},
      {"moe.cross_entropy_grad", crossEntropyGradKernel},
      {"moe.lr_schedule", lrScheduleKernel},
      {"moe.global_norm", globalNormKernel},
      {"moe.adam_update", adamUpdateKernel},
      {"moe.sgd_update", sgdUpdateKernel},
      {"arith.addf", addfKernel},
      {"arith.subf", subfKernel},
      {"arith.mulf", mulfKernel},
      {"arith.divf", divfKernel},
      {"arith.negf", negfKernel},
      {"arith.maximumf", maximumfKernel},
      {"arith.minimumf", minimumfKernel},
  };
  return table;
}

} // namespace moec::cpu
