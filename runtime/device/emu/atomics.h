//===- atomics.h - emu prelude: atomics and __ldg ---------------*- C++ -*-===//
//
// One part of the emu prelude (see prelude.h): runtime/CMakeLists.txt
// joins the parts, in the order it lists them, into the one header that
// kernels are built with.
//
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Atomics and __ldg
//===----------------------------------------------------------------------===//

// Blocks may run on parallel host threads, so these are real atomics.
#define MOEC_EMU_ATOMIC(T, name, builtin)                                      \
  inline T name(T *address, T value) {                                         \
    return builtin(address, value, __ATOMIC_SEQ_CST);                          \
  }
#define MOEC_EMU_ATOMIC_INT(T)                                                 \
  MOEC_EMU_ATOMIC(T, atomicAdd, __atomic_fetch_add)                            \
  MOEC_EMU_ATOMIC(T, atomicSub, __atomic_fetch_sub)                            \
  MOEC_EMU_ATOMIC(T, atomicAnd, __atomic_fetch_and)                            \
  MOEC_EMU_ATOMIC(T, atomicOr, __atomic_fetch_or)                              \
  MOEC_EMU_ATOMIC(T, atomicXor, __atomic_fetch_xor)                            \
  MOEC_EMU_ATOMIC(T, atomicExch, __atomic_exchange_n)                          \
  inline T atomicMax(T *address, T value) {                                    \
    T old = __atomic_load_n(address, __ATOMIC_SEQ_CST);                        \
    while (old < value &&                                                      \
           !__atomic_compare_exchange_n(address, &old, value, false,           \
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) { \
    }                                                                          \
    return old;                                                                \
  }                                                                            \
  inline T atomicMin(T *address, T value) {                                    \
    T old = __atomic_load_n(address, __ATOMIC_SEQ_CST);                        \
    while (old > value &&                                                      \
           !__atomic_compare_exchange_n(address, &old, value, false,           \
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) { \
    }                                                                          \
    return old;                                                                \
  }                                                                            \
  inline T atomicCAS(T *address, T compare, T value) {                         \
    __atomic_compare_exchange_n(address, &compare, value, false,               \
                                __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);           \
    return compare;                                                            \
  }
MOEC_EMU_ATOMIC_INT(int)
MOEC_EMU_ATOMIC_INT(unsigned)
MOEC_EMU_ATOMIC_INT(long)
MOEC_EMU_ATOMIC_INT(unsigned long)
MOEC_EMU_ATOMIC_INT(long long)
MOEC_EMU_ATOMIC_INT(unsigned long long)
#undef MOEC_EMU_ATOMIC_INT
#undef MOEC_EMU_ATOMIC

namespace moec_emu {
namespace detail {
/// Applies `f` to a float or double with a compare-and-swap loop on its bits.
template <typename F, typename Bits, typename Fn>
inline F atomicFloat(F *address, Fn f) {
  static_assert(sizeof(F) == sizeof(Bits), "bits of the same size");
  Bits *bits = reinterpret_cast<Bits *>(address);
  Bits old = __atomic_load_n(bits, __ATOMIC_SEQ_CST);
  for (;;) {
    F oldValue, newValue;
    std::memcpy(&oldValue, &old, sizeof(F));
    newValue = f(oldValue);
    Bits desired;
    std::memcpy(&desired, &newValue, sizeof(F));
    if (__atomic_compare_exchange_n(bits, &old, desired, false,
                                    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
      return oldValue;
  }
}
} // namespace detail
} // namespace moec_emu

inline float atomicAdd(float *address, float value) {
  return ::moec_emu::detail::atomicFloat<float, uint32_t>(
      address, [value](float old) { return old + value; });
}
inline double atomicAdd(double *address, double value) {
  return ::moec_emu::detail::atomicFloat<double, uint64_t>(
      address, [value](double old) { return old + value; });
}
inline float atomicExch(float *address, float value) {
  return ::moec_emu::detail::atomicFloat<float, uint32_t>(
      address, [value](float) { return value; });
}
inline unsigned atomicInc(unsigned *address, unsigned limit) {
  unsigned old = __atomic_load_n(address, __ATOMIC_SEQ_CST);
  while (!__atomic_compare_exchange_n(address, &old,
                                      old >= limit ? 0u : old + 1u, false,
                                      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}
inline unsigned atomicDec(unsigned *address, unsigned limit) {
  unsigned old = __atomic_load_n(address, __ATOMIC_SEQ_CST);
  while (!__atomic_compare_exchange_n(
      address, &old, (old == 0 || old > limit) ? limit : old - 1u, false,
      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}

/// Read-only cached load: a plain load on the host.
template <typename T> inline T __ldg(const T *address) { return *address; }

// Checked forms: the atomics on a checked pointer check the element (an
// atomic reads it, so shared memory must have been written) and then run
// the plain atomic on it.
#define MOEC_EMU_CHECKED_ATOMICS(Ptr, target)                                  \
  MOEC_EMU_CHECKED_ATOMIC(atomicAdd, Ptr, target)                              \
  MOEC_EMU_CHECKED_ATOMIC(atomicSub, Ptr, target)                              \
  MOEC_EMU_CHECKED_ATOMIC(atomicAnd, Ptr, target)                              \
  MOEC_EMU_CHECKED_ATOMIC(atomicOr, Ptr, target)                               \
  MOEC_EMU_CHECKED_ATOMIC(atomicXor, Ptr, target)                              \
  MOEC_EMU_CHECKED_ATOMIC(atomicExch, Ptr, target)                             \
  MOEC_EMU_CHECKED_ATOMIC(atomicMax, Ptr, target)                              \
  MOEC_EMU_CHECKED_ATOMIC(atomicMin, Ptr, target)                              \
  MOEC_EMU_CHECKED_ATOMIC(atomicInc, Ptr, target)                              \
  MOEC_EMU_CHECKED_ATOMIC(atomicDec, Ptr, target)                              \
  template <typename T, typename U, typename W>                                \
  inline auto atomicCAS(Ptr<T> address, U compare, W value)                    \
      ->decltype(atomicCAS(static_cast<T *>(nullptr), compare, value)) {       \
    return atomicCAS(address.target, compare, value);                          \
  }
#define MOEC_EMU_CHECKED_ATOMIC(name, Ptr, target)                             \
  template <typename T, typename U>                                            \
  inline auto name(Ptr<T> address, U value)                                    \
      ->decltype(name(static_cast<T *>(nullptr), value)) {                     \
    return name(address.target, value);                                        \
  }
#ifdef MOEC_EMU_CHECK
MOEC_EMU_CHECKED_ATOMICS(::moec::gptr, check(0))
template <typename T>
inline std::remove_cv_t<T> __ldg(::moec::gptr<T> address) {
  return *address;
}
#endif
#ifdef MOEC_EMU_TRACK_SHARED
MOEC_EMU_CHECKED_ATOMICS(::moec_emu::SharedPtr, atomicTarget())
#endif
#undef MOEC_EMU_CHECKED_ATOMIC
#undef MOEC_EMU_CHECKED_ATOMICS
