//===- prelude.cuh - what every generated kernel starts with ---*- CUDA -*-===//
//
// Part of the device library: CUDA C++ that NVRTC compiles for sm_80/sm_90
// and that the emu device compiles for the host (with MOEC_EMU defined and
// emu/prelude.h included first). NVRTC has no system headers, so the library
// defines its own fixed-width types. See compiler/CODEGEN.md for the rules.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_PRELUDE_CUH
#define MOEC_DEVICE_PRELUDE_CUH

#ifdef __CUDACC_RTC__
// NVRTC has no system headers.
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
#include <cstdint>
#endif

#define MOEC_DEVICE __device__ __forceinline__
/// A device function compiled once and called: for library loops that a
/// generated kernel runs once per tensor, where inlining would copy the
/// loop into the kernel for every tensor (ptxas time grows with code size).
#define MOEC_DEVICE_CALLED __device__ inline __noinline__

#ifndef MOEC_EMU
/// A static shared-memory array of `count` elements, 16-byte aligned so
/// that loadShared4 can read any array of floats.
#define MOEC_SHARED(type, name, count)                                         \
  __shared__ __align__(16) type name[count]
/// The launch's dynamic shared memory, viewed as `type`.
#define MOEC_DYNAMIC_SHARED(type, name)                                        \
  extern __shared__ __align__(16) unsigned char moec_dynamic_smem[];           \
  type *name = reinterpret_cast<type *>(moec_dynamic_smem)
#endif

namespace moec {

/// The single argument of every generated kernel (see CODEGEN.md).
struct KernelParams {
  void *buffers[kMaxKernelBuffers];
  int64_t scalars[kMaxKernelScalars];
  /// Where a kernel reports data it cannot compute on (reportBadItem);
  /// null when the host does not listen.
  unsigned *status;
  /// The launch's position in its program, from 1: who reported.
  int64_t launchTag;
};

/// What a kernel can report (the host's KernelStatus.h names them).
enum KernelStatusCode : unsigned {
  /// A router token's logits hold NaN or +inf, or are all -inf.
  kStatusRouterLogits = 1,
};

/// A launch's handle on the status words [launch, code, item, unused].
struct KernelReport {
  unsigned *status;
  unsigned launch;
};

MOEC_DEVICE KernelReport kernelReport(const KernelParams &p) {
  return {p.status, static_cast<unsigned>(p.launchTag)};
}

#ifndef MOEC_EMU
/// A pointer to global memory; bounds-checked in emu's checking mode.
template <typename T> using gptr = T *;
/// A pointer to shared memory; emu's checking mode tracks what it reads.
template <typename T> using sptr = T *;

/// Buffer `i` of the launch as a typed pointer.
template <typename T>
MOEC_DEVICE gptr<T> bufferArg(const KernelParams &p, int i) {
  return static_cast<T *>(p.buffers[i]);
}
#endif

/// bfloat16 storage (bf16 models keep activations in it). It has no
/// arithmetic of its own: reading one gives a float, so every expression
/// computes in float; storing a float rounds to nearest even. (A
/// conditional between a bf16 and a float is ambiguous: use toFloat.)
struct bf16 {
  uint16_t bits;
  bf16() = default;
  MOEC_DEVICE bf16(float f) : bits(fromFloat(f)) {}
  MOEC_DEVICE operator float() const {
    return __uint_as_float(static_cast<uint32_t>(bits) << 16);
  }
  MOEC_DEVICE static uint16_t fromFloat(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) // NaN stays a quiet NaN
      return static_cast<uint16_t>((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
};

/// A stored value as float, whatever its storage type.
MOEC_DEVICE float toFloat(float v) { return v; }
MOEC_DEVICE float toFloat(bf16 v) { return static_cast<float>(v); }

MOEC_DEVICE int64_t scalarArg(const KernelParams &p, int i) {
  return p.scalars[i];
}

/// Reports item `item` (a token, a row) of this launch as bad data: the
/// first launch in stream order to report claims the words, and of its
/// reports the lowest item stays, so the host names the same item whatever
/// order the blocks ran in. The kernel goes on with a safe stand-in value;
/// the host stops the program with an error once it has run.
MOEC_DEVICE void reportBadItem(const KernelReport &r, KernelStatusCode code,
                               int64_t item) {
  if (!r.status)
    return;
  const unsigned owner = atomicCAS(&r.status[0], 0u, r.launch);
  if (owner != 0u && owner != r.launch)
    return;
  atomicExch(&r.status[1], static_cast<unsigned>(code));
  atomicMin(&r.status[2], item < 0xffffffffll ? static_cast<unsigned>(item)
                                              : 0xfffffffeu);
}

/// Whether an earlier launch of the program reported bad data: the
/// optimizer then leaves the parameters and moments as they were, as the
/// cpu device, which stops at the report, does.
MOEC_DEVICE bool badDataReported(const KernelReport &r) {
  return r.status && r.status[0] != 0u;
}

/// ceil(a / b) for positive b.
MOEC_DEVICE int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

constexpr unsigned kFullMask = 0xffffffffu;

} // namespace moec

#endif // MOEC_DEVICE_PRELUDE_CUH
