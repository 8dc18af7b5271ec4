//===- vector.cuh - 16-byte memory accesses --------------------*- CUDA -*-===//
//
// Memory-bound kernels move four floats or eight bf16 per instruction
// (ld/st.global.v4) where every pointer they touch is 16-byte aligned;
// callers test that once with aligned16 and fall back to scalar accesses
// otherwise. Pairs of bf16 (an mma fragment's two columns) move as one
// 4-byte word. The emu device reads and writes the elements one by one, so
// its checking mode still bounds-checks each of them. Shared-memory rows
// that a whole warp reads (broadcasts) are read four floats at a time
// (ld.shared.v4) by loadShared4.
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

/// Elements 0 .. 3 of shared-memory floats at `p`, which must be 16-byte
/// aligned (MOEC_SHARED arrays are). Emu's tracking mode reads them as one
/// float4, so that it checks the alignment and that all four were written.
MOEC_DEVICE float4 loadShared4(sptr<const float> p) {
#if defined(MOEC_EMU_TRACK_SHARED)
  return *p.template reinterpretAs<const float4>();
#elif defined(MOEC_EMU)
  return make_float4(p[0], p[1], p[2], p[3]);
#else
  return *reinterpret_cast<const float4 *>(p);
#endif
}

/// Two floats stored at `p` (8-byte aligned) in one access. Emu's tracking
/// mode stores them as one float2, so that it checks the alignment.
MOEC_DEVICE void storeShared2(sptr<float> p, float x, float y) {
#if defined(MOEC_EMU_TRACK_SHARED)
  *p.template reinterpretAs<float2>() = make_float2(x, y);
#elif defined(MOEC_EMU)
  p[0] = x;
  p[1] = y;
#else
  *reinterpret_cast<float2 *>(p) = make_float2(x, y);
#endif
}

/// Shared memory at `p` viewed as U's: a buffer reused for another purpose
/// once what it held is dead.
template <typename U, typename T> MOEC_DEVICE sptr<U> sharedAs(sptr<T> p) {
#if defined(MOEC_EMU_TRACK_SHARED)
  return p.template reinterpretAs<U>();
#else
  return reinterpret_cast<U *>(p);
#endif
}

/// Two bf16 in one register, `lo` in the low half: an mma operand pair.
MOEC_DEVICE uint32_t packBf16(float lo, float hi) {
  return static_cast<uint32_t>(bf16(lo).bits) |
         static_cast<uint32_t>(bf16(hi).bits) << 16;
}

/// p[0] and p[1] as one register, p[0] in the low half, in one 4-byte
/// access: p must be 4-byte aligned, as every buffer is and as an even
/// element of a row of even length is. The emu device checks that, then
/// reads the two one by one (bounds-checked in check mode).
MOEC_DEVICE uint32_t loadBf16x2(gptr<const bf16> p) {
#ifdef MOEC_EMU
  ::moec_emu::checkGlobalAligned(static_cast<const bf16 *>(p), 4,
                                 "ld.global.b32");
  return static_cast<uint32_t>(p[0].bits) | static_cast<uint32_t>(p[1].bits)
                                                << 16;
#else
  return *reinterpret_cast<const uint32_t *>(static_cast<const bf16 *>(p));
#endif
}

/// Stores `lo` and `hi`, rounded to bf16, into p[0] and p[1] in one 4-byte
/// access (p as for loadBf16x2).
MOEC_DEVICE void storeBf16x2(gptr<bf16> p, float lo, float hi) {
#ifdef MOEC_EMU
  ::moec_emu::checkGlobalAligned(static_cast<bf16 *>(p), 4, "st.global.b32");
  p[0] = lo;
  p[1] = hi;
#else
  *reinterpret_cast<uint32_t *>(static_cast<bf16 *>(p)) = packBf16(lo, hi);
#endif
}

/// Eight floats: what one 16-byte access of bf16 carries.
struct float8 {
  float4 lo, hi;
};

/// Elements 8q .. 8q + 7 of `x` as floats (x must be 16-byte aligned).
MOEC_DEVICE float8 load8(gptr<const bf16> x, int64_t q) {
#ifdef MOEC_EMU
  gptr<const bf16> at = x + 8 * q;
  return {make_float4(toFloat(at[0]), toFloat(at[1]), toFloat(at[2]),
                      toFloat(at[3])),
          make_float4(toFloat(at[4]), toFloat(at[5]), toFloat(at[6]),
                      toFloat(at[7]))};
#else
  const uint4 raw = reinterpret_cast<const uint4 *>(
      static_cast<const bf16 *>(x))[q];
  // Little endian: the low half of each word is the lower column.
  auto low = [](unsigned w) { return __uint_as_float(w << 16); };
  auto high = [](unsigned w) { return __uint_as_float(w & 0xffff0000u); };
  return {make_float4(low(raw.x), high(raw.x), low(raw.y), high(raw.y)),
          make_float4(low(raw.z), high(raw.z), low(raw.w), high(raw.w))};
#endif
}

/// Stores `v`, rounded to bf16, into elements 8q .. 8q + 7 of `x` (x must
/// be 16-byte aligned).
MOEC_DEVICE void store8(gptr<bf16> x, int64_t q, const float8 &v) {
#ifdef MOEC_EMU
  gptr<bf16> at = x + 8 * q;
  at[0] = v.lo.x;
  at[1] = v.lo.y;
  at[2] = v.lo.z;
  at[3] = v.lo.w;
  at[4] = v.hi.x;
  at[5] = v.hi.y;
  at[6] = v.hi.z;
  at[7] = v.hi.w;
#else
  auto pack = [](float lo, float hi) {
    return static_cast<unsigned>(bf16::fromFloat(lo)) |
           static_cast<unsigned>(bf16::fromFloat(hi)) << 16;
  };
  reinterpret_cast<uint4 *>(static_cast<bf16 *>(x))[q] =
      make_uint4(pack(v.lo.x, v.lo.y), pack(v.lo.z, v.lo.w),
                 pack(v.hi.x, v.hi.y), pack(v.hi.z, v.hi.w));
#endif
}

/// Elements 8q .. 8q + 7 of `x` into v[0 .. 7] (x 16-byte aligned): two
/// 16-byte accesses of floats, one of bf16. Elementwise kernels move
/// their values this way.
MOEC_DEVICE void loadFloats8(gptr<const float> x, int64_t q, float (&v)[8]) {
  const float4 lo = load4(x, 2 * q), hi = load4(x, 2 * q + 1);
  v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w;
  v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
}

MOEC_DEVICE void loadFloats8(gptr<const bf16> x, int64_t q, float (&v)[8]) {
  const float8 f = load8(x, q);
  v[0] = f.lo.x, v[1] = f.lo.y, v[2] = f.lo.z, v[3] = f.lo.w;
  v[4] = f.hi.x, v[5] = f.hi.y, v[6] = f.hi.z, v[7] = f.hi.w;
}

/// Stores v[0 .. 7] into elements 8q .. 8q + 7 of `x` (x 16-byte aligned),
/// rounded to bf16 as a scalar store would round them.
MOEC_DEVICE void storeFloats8(gptr<float> x, int64_t q, const float (&v)[8]) {
  store4(x, 2 * q, make_float4(v[0], v[1], v[2], v[3]));
  store4(x, 2 * q + 1, make_float4(v[4], v[5], v[6], v[7]));
}

MOEC_DEVICE void storeFloats8(gptr<bf16> x, int64_t q, const float (&v)[8]) {
  store8(x, q, {make_float4(v[0], v[1], v[2], v[3]),
                make_float4(v[4], v[5], v[6], v[7])});
}

} // namespace moec

#endif // MOEC_DEVICE_VECTOR_CUH
