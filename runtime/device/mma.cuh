//===- mma.cuh - tensor-core tiles -----------------------------*- CUDA -*-===//
//
// Warp-wide matrix multiply-accumulate on 16x8 output tiles with the PTX
// fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16" and
// "...m16n8k8"). groupID = lane / 4, tig = lane % 4:
//
//   m16n8k16 .bf16: a[0..3] hold A[g][2t..2t+1], A[g+8][2t..], A[g][2t+8..],
//     A[g+8][2t+8..] (two bf16 per register, lower column in the low half);
//     b[0..1] hold B[2t..2t+1][g], B[2t+8..2t+9][g];
//   m16n8k8 .tf32: a[0..3] hold A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4];
//     b[0..1] hold B[t][g], B[t+4][g];
//   both: c/d[0..3] hold C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1].
//
// All 32 lanes of the warp must call together. Accumulation is fp32.
//
// cvtRnaTf32 rounds a float to tf32 (to nearest, ties away from zero) in a
// word whose low 13 bits are zero: an operand of mma.m16n8k8.tf32 whose
// value does not depend on how the mma treats those bits (emu truncates).
//
// ldmatrixX4 loads four 8x8 b16 matrices from shared memory into fragment
// registers: lane L gives the address of row L % 8 of matrix L / 8 (16
// contiguous, 16-byte aligned bytes) and receives, for matrix i, the word
// of row L / 4 holding columns 2 (L % 4) and 2 (L % 4) + 1: the A and B
// fragments above when rows run along m (A) or n (B) and k is contiguous.
// ldmatrixX4Trans hands out the transposed matrices (columns L / 4 of rows
// 2 (L % 4) and 2 (L % 4) + 1), for tiles whose rows run along k.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_MMA_CUH
#define MOEC_DEVICE_MMA_CUH

namespace moec {

#ifndef MOEC_EMU
MOEC_DEVICE void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4],
                                   const uint32_t (&b)[2],
                                   const float (&c)[4]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

MOEC_DEVICE void mma_m16n8k8_tf32(float (&d)[4], const uint32_t (&a)[4],
                                  const uint32_t (&b)[2],
                                  const float (&c)[4]) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

MOEC_DEVICE uint32_t cvtRnaTf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

/// The shared-state-space address of a generic pointer to shared memory.
MOEC_DEVICE uint32_t sharedAddress(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

MOEC_DEVICE void ldmatrixX4(uint32_t (&d)[4], sptr<const uint4> row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(sharedAddress(row)));
}

MOEC_DEVICE void ldmatrixX4Trans(uint32_t (&d)[4], sptr<const uint4> row) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(sharedAddress(row)));
}
#else
// emu/prelude.h provides these with the same fragment layouts.
MOEC_DEVICE void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4],
                                   const uint32_t (&b)[2],
                                   const float (&c)[4]) {
  ::moec_emu::mmaM16N8K16Bf16(d, a, b, c);
}
MOEC_DEVICE void mma_m16n8k8_tf32(float (&d)[4], const uint32_t (&a)[4],
                                  const uint32_t (&b)[2],
                                  const float (&c)[4]) {
  ::moec_emu::mmaM16N8K8Tf32(d, a, b, c);
}
MOEC_DEVICE uint32_t cvtRnaTf32(float x) { return ::moec_emu::cvtRnaTf32(x); }
MOEC_DEVICE void ldmatrixX4(uint32_t (&d)[4], sptr<const uint4> row) {
  ::moec_emu::ldmatrix(d, row, false);
}
MOEC_DEVICE void ldmatrixX4Trans(uint32_t (&d)[4], sptr<const uint4> row) {
  ::moec_emu::ldmatrix(d, row, true);
}
#endif

} // namespace moec

#endif // MOEC_DEVICE_MMA_CUH
