//===- Bf16Staging.h - f32 copies of a step's bf16 operands -----*- C++ -*-===//
//
// bf16 storage on the cpu device: a step whose operands include bf16
// tensors runs its f32 kernel on f32 copies, and each bf16 result is rounded
// back (to nearest even) once, as a GPU kernel computing in f32 rounds when
// it stores. The kernels themselves know only f32 and f64.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CPU_BF16STAGING_H
#define MOEC_RUNTIME_CPU_BF16STAGING_H

#include "Kernel.h"
#include "kernels/Common.h"

#include <vector>

namespace moec::cpu {

class Bf16Staging {
public:
  /// Swaps every bf16 view of `ctx` for an f32 copy of its contents, in
  /// blocks from `pool` (which the caller keeps between steps).
  Bf16Staging(KernelContext &ctx, BlockPool &pool);
  Bf16Staging(const Bf16Staging &) = delete;
  Bf16Staging &operator=(const Bf16Staging &) = delete;
  /// Returns the copies' blocks to the pool.
  ~Bf16Staging();

  /// Rounds the f32 results into their bf16 buffers.
  void finish();

private:
  struct Staged {
    TensorView original;
    TensorView copy;
    bool output;
  };

  void stage(TensorView &v, bool output);

  BlockPool &pool;
  std::vector<BlockPool::Block> blocks;
  std::vector<Staged> staged;
};

/// to[i] = the float that bf16 bits from[i] hold (exact), for i < n.
void widenBf16(const uint16_t *from, float *to, int64_t n);
/// to[i] = from[i] rounded to bf16 (nearest even; NaN stays NaN).
void roundToBf16(const float *from, uint16_t *to, int64_t n);

} // namespace moec::cpu

#endif // MOEC_RUNTIME_CPU_BF16STAGING_H
