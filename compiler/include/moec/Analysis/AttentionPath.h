//===- AttentionPath.h - which kernel runs an attention ---------*- C++ -*-===//
//
// The attention forward of a bf16 model runs on the tensor cores
// (attention_mma.cuh) when its head dim is a multiple of 16 up to 128 or of
// 32 up to 256, and so does the dq kernel of its backward when the head
// dim is a multiple of 16 up to 128;
// anything else runs the CUDA-core kernels (attention.cuh). moe-tile-kernels
// sizes the tiles for the kernel this picks and the CUDA emitter calls it,
// so both ask here.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_ANALYSIS_ATTENTIONPATH_H
#define MOEC_ANALYSIS_ATTENTIONPATH_H

#include "moe/IR/MoeOps.h"

namespace mlir::moe {

/// The head dim of `op`: q's last dimension over its heads.
int64_t attentionHeadDim(AttentionOp op);

/// Whether `op` runs moec::attentionForwardMma: q, k and v are bf16 and
/// the head dim is a multiple of 16 up to 128, or of 32 up to 256 (half of
/// it a block, in whole 16-column blocks).
bool attentionOnTensorCores(AttentionOp op);

/// The output columns one block of attentionForwardMma computes: the head
/// dim up to 128, half of it beyond (the O accumulators of a whole head
/// would spill).
int64_t attentionMmaOutputColumns(AttentionOp op);

/// Whether the dq kernel of `op` runs moec::attentionGradQMma: q, k, v and
/// dout are bf16 and the head dim is a multiple of 16 up to 128 (its Q, dO
/// and dq fragments take HD registers a lane).
bool attentionGradQOnTensorCores(AttentionGradOp op);

/// The key tile of attentionGradQMma: 32 keys, whose S and dP fragments
/// take 32 registers a lane.
constexpr int64_t kAttentionGradQMmaKeys = 32;

} // namespace mlir::moe

#endif // MOEC_ANALYSIS_ATTENTIONPATH_H
