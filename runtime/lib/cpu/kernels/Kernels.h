//===- Kernels.h - entry points of the cpu reference kernels ---*- C++ -*-===//
//
// One function per op, named after the op; KernelRegistry.cpp maps the full
// MLIR op names to them.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CPU_KERNELS_KERNELS_H
#define MOEC_RUNTIME_CPU_KERNELS_KERNELS_H

#include "cpu/Kernel.h"

namespace moec::cpu {

// Embedding.cpp
void embeddingKernel(KernelContext &ctx);
void embeddingGradKernel(KernelContext &ctx);
void addPositionsKernel(KernelContext &ctx);
void addPositionsGradKernel(KernelContext &ctx);

// Rope.cpp
void ropeKernel(KernelContext &ctx);

// Linear.cpp
void linearKernel(KernelContext &ctx);
void linearGradKernel(KernelContext &ctx);

// Norms.cpp
void layerNormKernel(KernelContext &ctx);
void layerNormGradKernel(KernelContext &ctx);
void rmsNormKernel(KernelContext &ctx);
void rmsNormGradKernel(KernelContext &ctx);

// BatchNorm.cpp
void batchNormKernel(KernelContext &ctx);
void batchNormGradKernel(KernelContext &ctx);

// Activations.cpp
void activationKernel(KernelContext &ctx);
void activationGradKernel(KernelContext &ctx);
void castKernel(KernelContext &ctx);
/// A cast between f32 and bf16 (or bf16 to bf16), converted directly
/// rather than through the device's f32 staging (which would convert
/// twice); false, doing nothing, for any other cast.
bool castWithBf16(KernelContext &ctx);
void dropoutKernel(KernelContext &ctx);
void dropoutGradKernel(KernelContext &ctx);

// Attention.cpp
void attentionKernel(KernelContext &ctx);
void attentionGradKernel(KernelContext &ctx);
void kvCacheWriteKernel(KernelContext &ctx);

// Router.cpp
void topkRouterKernel(KernelContext &ctx);
void topkRouterGradKernel(KernelContext &ctx);
void expertLoadKernel(KernelContext &ctx);
void routingStatsKernel(KernelContext &ctx);

// ExpertFfn.cpp
void expertFfnKernel(KernelContext &ctx);
void expertFfnGradKernel(KernelContext &ctx);

// ExpertProjections.cpp
void expertMapKernel(KernelContext &ctx);
void expertMapGradKernel(KernelContext &ctx);
void expertReduceKernel(KernelContext &ctx);
void expertReduceGradKernel(KernelContext &ctx);

// Losses.cpp
void switchLossKernel(KernelContext &ctx);
void switchLossGradKernel(KernelContext &ctx);
void cvLossKernel(KernelContext &ctx);
void cvLossGradKernel(KernelContext &ctx);
void zLossKernel(KernelContext &ctx);
void zLossGradKernel(KernelContext &ctx);
void crossEntropyKernel(KernelContext &ctx);
void crossEntropyGradKernel(KernelContext &ctx);

// Gate.cpp
void normalizeRowsKernel(KernelContext &ctx);
void normalizeRowsGradKernel(KernelContext &ctx);
void rescaleRowsKernel(KernelContext &ctx);
void finiteOrMinKernel(KernelContext &ctx);
void finiteOrMinGradKernel(KernelContext &ctx);

// Mae.cpp
void windowMeanKernel(KernelContext &ctx);
void windowMeanGradKernel(KernelContext &ctx);
void headMixtureKernel(KernelContext &ctx);
void headMixtureGradKernel(KernelContext &ctx);
void sampleExpertKernel(KernelContext &ctx);
void gateStatsKernel(KernelContext &ctx);

// Optimizers.cpp
void lrScheduleKernel(KernelContext &ctx);
void globalNormKernel(KernelContext &ctx);
void adamUpdateKernel(KernelContext &ctx);
void sgdUpdateKernel(KernelContext &ctx);

// Elementwise.cpp
void addfKernel(KernelContext &ctx);
void subfKernel(KernelContext &ctx);
void mulfKernel(KernelContext &ctx);
void divfKernel(KernelContext &ctx);
void negfKernel(KernelContext &ctx);
void maximumfKernel(KernelContext &ctx);
void minimumfKernel(KernelContext &ctx);

} // namespace moec::cpu

#endif // MOEC_RUNTIME_CPU_KERNELS_KERNELS_H
