//===- AttentionPath.h - which kernel runs an attention ---------*- C++ -*-===//
//
// The attention kernels of a bf16 model (forward, dq and dk/dv) run on the
// tensor cores (attention_mma.cuh) for head dims that are multiples of 16
// up to 128 or of 32 up to 256; anything else runs the CUDA-core kernels
// (attention.cuh). Past 128 dims (for dk/dv past 112) a head takes several
// blocks, each computing some of its output columns (and all of its
// scores): the forward and dq two of half the columns (dq four of 64 at
// 256), dk/dv blocks of 64 columns (80 at 160, 32 at 224).
// moe-tile-kernels sizes the tiles for the kernel this picks and the CUDA
// emitter calls it, so both ask here.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_ANALYSIS_ATTENTIONPATH_H
#define MOEC_ANALYSIS_ATTENTIONPATH_H

#include "moe/IR/MoeOps.h"

namespace mlir::moe {

/// The head dim of an attention whose queries are `q`: its last dimension
/// over `heads`.
int64_t attentionHeadDim(Value q, uint32_t heads);
int64_t attentionHeadDim(AttentionOp op);
int64_t attentionHeadDim(AttentionGradOp op);

/// Whether `op` runs moec::attentionForwardMma: q, k and v are bf16 and
/// the head dim is a multiple of 16 up to 128, or of 32 up to 256 (half of
/// it a block, in whole 16-column blocks).
bool attentionOnTensorCores(AttentionOp op);

/// The output columns one block of attentionForwardMma computes: the head
/// dim up to 128, half of it beyond (the O accumulators of a whole head
/// would spill).
int64_t attentionMmaOutputColumns(AttentionOp op);

/// Whether the dq kernel of `op` runs moec::attentionGradQMma: q, k, v and
/// dout are bf16 and the head dim is a multiple of 16 up to 128, or of 32
/// up to 256 (some of it a block).
bool attentionGradQOnTensorCores(AttentionGradOp op);

/// The dq columns one block of attentionGradQMma computes: the head dim up
/// to 128, half of it up to 224, a quarter at 256 (its Q and dO fragments
/// take HD / 2 registers a lane, its dq accumulators half as many as its
/// columns).
int64_t attentionGradQMmaOutputColumns(AttentionGradOp op);

/// The key tile of attentionGradQMma: 32 keys, 16 past 128 dims (its S and
/// dP fragments take as many registers a lane as the tile has keys, and
/// two stages of K and V tiles of 256 dims 33 KiB of shared memory).
int64_t attentionGradQMmaKeys(AttentionGradOp op);

/// Whether the dk/dv kernel of `op` runs moec::attentionGradKVMma: q, k, v
/// and dout are bf16 and the head dim is a multiple of 16 up to 128, or of
/// 32 up to 256 (some of it a block past 112).
bool attentionGradKVOnTensorCores(AttentionGradOp op);

/// The dk and dv columns one block of attentionGradKVMma computes: the
/// head dim up to 112; beyond, the widest multiple of 16 up to 80 that
/// divides it: 64 at 128, 192 and 256, 80 at 160, 32 at 224 (its K and V
/// fragments take HD / 2 registers a lane, its dk and dv accumulators as
/// many as its columns).
int64_t attentionGradKVMmaOutputColumns(AttentionGradOp op);

/// The query tile of attentionGradKVMma: 32 queries, 16 past 128 dims
/// (its S^T and dP^T fragments take as many registers a lane as the tile
/// has queries).
int64_t attentionGradKVMmaQueries(AttentionGradOp op);

} // namespace mlir::moe

#endif // MOEC_ANALYSIS_ATTENTIONPATH_H
