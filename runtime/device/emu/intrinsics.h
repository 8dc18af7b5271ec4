//===- intrinsics.h - emu prelude: sync and warp intrinsics -----*- C++ -*-===//
//
// One part of the emu prelude (see prelude.h): runtime/CMakeLists.txt
// joins the parts, in the order it lists them, into the one header that
// kernels are built with.
//
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// CUDA synchronization and warp intrinsics
//===----------------------------------------------------------------------===//

#define __syncthreads()                                                        \
  ::moec_emu::detail::syncThreads(__FILE__, __LINE__, 0, 0)
#define __syncthreads_count(p)                                                 \
  ::moec_emu::detail::syncThreads(__FILE__, __LINE__, 1, (p))
#define __syncthreads_and(p)                                                   \
  ::moec_emu::detail::syncThreads(__FILE__, __LINE__, 2, (p))
#define __syncthreads_or(p)                                                    \
  ::moec_emu::detail::syncThreads(__FILE__, __LINE__, 3, (p))

inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::moec_emu::detail::collective(mask, ::moec_emu::detail::OpSync,
                                 "__syncwarp");
}
inline unsigned __activemask() { return ::moec_emu::detail::activeMask(); }
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return ::moec_emu::detail::vote(mask, predicate, ::moec_emu::detail::OpBallot,
                                  "__ballot_sync");
}
inline int __any_sync(unsigned mask, int predicate) {
  return static_cast<int>(::moec_emu::detail::vote(
      mask, predicate, ::moec_emu::detail::OpAny, "__any_sync"));
}
inline int __all_sync(unsigned mask, int predicate) {
  return static_cast<int>(::moec_emu::detail::vote(
      mask, predicate, ::moec_emu::detail::OpAll, "__all_sync"));
}

#define MOEC_EMU_REDUCE_SYNC(name, op)                                         \
  inline unsigned name(unsigned mask, unsigned value) {                        \
    return ::moec_emu::detail::reduce(mask, value, ::moec_emu::detail::op,     \
                                      false, #name);                           \
  }                                                                            \
  inline int name(unsigned mask, int value) {                                  \
    return static_cast<int>(                                                   \
        ::moec_emu::detail::reduce(mask, static_cast<uint32_t>(value),         \
                                   ::moec_emu::detail::op, true, #name));      \
  }
MOEC_EMU_REDUCE_SYNC(__reduce_add_sync, OpReduceAdd)
MOEC_EMU_REDUCE_SYNC(__reduce_min_sync, OpReduceMin)
MOEC_EMU_REDUCE_SYNC(__reduce_max_sync, OpReduceMax)
#undef MOEC_EMU_REDUCE_SYNC
inline unsigned __reduce_and_sync(unsigned mask, unsigned value) {
  return ::moec_emu::detail::reduce(
      mask, value, ::moec_emu::detail::OpReduceAnd, false, "__reduce_and_sync");
}
inline unsigned __reduce_or_sync(unsigned mask, unsigned value) {
  return ::moec_emu::detail::reduce(mask, value, ::moec_emu::detail::OpReduceOr,
                                    false, "__reduce_or_sync");
}
inline unsigned __reduce_xor_sync(unsigned mask, unsigned value) {
  return ::moec_emu::detail::reduce(
      mask, value, ::moec_emu::detail::OpReduceXor, false, "__reduce_xor_sync");
}

// The shuffles, for every type CUDA has them for (long and unsigned long
// too: they are int64_t and uint64_t on the host).
#define MOEC_EMU_SHUFFLES(T)                                                   \
  inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32) {    \
    return ::moec_emu::detail::shuffle<T>(mask, var,                           \
                                          ::moec_emu::detail::ShflIdx,         \
                                          srcLane, width, "__shfl_sync");      \
  }                                                                            \
  inline T __shfl_up_sync(unsigned mask, T var, unsigned delta,                \
                          int width = 32) {                                    \
    return ::moec_emu::detail::shuffle<T>(                                     \
        mask, var, ::moec_emu::detail::ShflUp, static_cast<int>(delta), width, \
        "__shfl_up_sync");                                                     \
  }                                                                            \
  inline T __shfl_down_sync(unsigned mask, T var, unsigned delta,              \
                            int width = 32) {                                  \
    return ::moec_emu::detail::shuffle<T>(                                     \
        mask, var, ::moec_emu::detail::ShflDown, static_cast<int>(delta),      \
        width, "__shfl_down_sync");                                            \
  }                                                                            \
  inline T __shfl_xor_sync(unsigned mask, T var, int laneMask,                 \
                           int width = 32) {                                   \
    return ::moec_emu::detail::shuffle<T>(mask, var,                           \
                                          ::moec_emu::detail::ShflXor,         \
                                          laneMask, width, "__shfl_xor_sync"); \
  }
MOEC_EMU_SHUFFLES(int)
MOEC_EMU_SHUFFLES(unsigned)
MOEC_EMU_SHUFFLES(long)
MOEC_EMU_SHUFFLES(unsigned long)
MOEC_EMU_SHUFFLES(long long)
MOEC_EMU_SHUFFLES(unsigned long long)
MOEC_EMU_SHUFFLES(float)
MOEC_EMU_SHUFFLES(double)
#undef MOEC_EMU_SHUFFLES

/// Memory fences: blocks on other host threads see earlier writes first.
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/// A device-side trap stops the launch with an error.
#define __trap()                                                               \
  ::moec_emu::detail::fail("__trap() called at %s:%d", __FILE__, __LINE__)
