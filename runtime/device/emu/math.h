//===- math.h - emu prelude: math -------------------------------*- C++ -*-===//
//
// One part of the emu prelude (see prelude.h): runtime/CMakeLists.txt
// joins the parts, in the order it lists them, into the one header that
// kernels are built with.
//
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Math (CUDA names on <cmath>)
//===----------------------------------------------------------------------===//

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline double __drcp_rn(double x) { return 1.0 / x; }
inline float __fdividef(float a, float b) { return a / b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / std::sqrt(x); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __fma_rn(double a, double b, double c) {
  return std::fma(a, b, c);
}
inline double __dsqrt_rn(double x) { return std::sqrt(x); }
inline float __saturatef(float x) {
  return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; // NaN -> 0
}
inline int __float2int_rn(float x) {
  return static_cast<int>(std::nearbyint(x));
}
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }

inline unsigned __float_as_uint(float x) {
  return ::moec_emu::detail::floatToBits(x);
}
inline float __uint_as_float(unsigned x) {
  return ::moec_emu::detail::bitsToFloat(x);
}
inline int __float_as_int(float x) {
  return static_cast<int>(::moec_emu::detail::floatToBits(x));
}
inline float __int_as_float(int x) {
  return ::moec_emu::detail::bitsToFloat(static_cast<uint32_t>(x));
}
inline long long __double_as_longlong(double x) {
  long long bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}
inline double __longlong_as_double(long long x) {
  double d;
  std::memcpy(&d, &x, sizeof d);
  return d;
}

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) {
  return x ? __builtin_clz(static_cast<unsigned>(x)) : 32;
}
inline int __clzll(long long x) {
  return x ? __builtin_clzll(static_cast<unsigned long long>(x)) : 64;
}
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  x = ((x >> 8) & 0x00ff00ffu) | ((x & 0x00ff00ffu) << 8);
  return (x >> 16) | (x << 16);
}

// CUDA's min/max overloads for equal argument types.
#define MOEC_EMU_MINMAX(T)                                                     \
  inline T min(T a, T b) { return b < a ? b : a; }                             \
  inline T max(T a, T b) { return a < b ? b : a; }
MOEC_EMU_MINMAX(int)
MOEC_EMU_MINMAX(unsigned)
MOEC_EMU_MINMAX(long)
MOEC_EMU_MINMAX(unsigned long)
MOEC_EMU_MINMAX(long long)
MOEC_EMU_MINMAX(unsigned long long)
#undef MOEC_EMU_MINMAX
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

// glibc declares __expf and friends as libm-internal names it does not
// export, so the fast CUDA intrinsics are macros onto the exact functions.
#define __expf(x) ::expf(x)
#define __exp10f(x) ::exp10f(x)
#define __logf(x) ::logf(x)
#define __log2f(x) ::log2f(x)
#define __log10f(x) ::log10f(x)
#define __powf(x, y) ::powf((x), (y))
#define __sinf(x) ::sinf(x)
#define __cosf(x) ::cosf(x)
#define __tanf(x) ::tanf(x)
