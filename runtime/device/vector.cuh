//===- vector.cuh - 16-byte global-memory accesses --------------*- CUDA -*-===//
//
// Memory-bound kernels move four floats per instruction (ld/st.global.v4)
// where every pointer they touch is 16-byte aligned; callers test that once
// with aligned16 and fall back to scalar accesses otherwise. The emu device
// reads and writes the four elements one by one, so its checking mode still
// bounds-checks each of them.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_VECTOR_CUH
#define MOEC_DEVICE_VECTOR_CUH

namespace moec {

/// Whether every pointer is 16-byte aligned.
template <typename... T> MOEC_DEVICE bool aligned16(gptr<T>... pointers) {
  return ((reinterpret_cast<uint64_t>(static_cast<T *>(pointers)) % 16 ==
           0) &&
          ...);
}

/// Elements 4q .. 4q + 3 of `x` (x must be 16-byte aligned).
MOEC_DEVICE float4 load4(gptr<const float> x, int64_t q) {
#ifdef MOEC_EMU
  return make_float4(x[4 * q], x[4 * q + 1], x[4 * q + 2], x[4 * q + 3]);
#else
  return reinterpret_cast<const float4 *>(x)[q];
#endif
}

/// Stores `v` into elements 4q .. 4q + 3 of `x` (x must be 16-byte aligned).
MOEC_DEVICE void store4(gptr<float> x, int64_t q, float4 v) {
#ifdef MOEC_EMU
  x[4 * q] = v.x;
  x[4 * q + 1] = v.y;
  x[4 * q + 2] = v.z;
  x[4 * q + 3] = v.w;
#else
  reinterpret_cast<float4 *>(x)[q] = v;
#endif
}

} // namespace moec

#endif // MOEC_DEVICE_VECTOR_CUH
