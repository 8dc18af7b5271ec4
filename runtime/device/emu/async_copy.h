//===- async_copy.h - emu prelude: cp.async and ldmatrix --------*- C++ -*-===//
//
// One part of the emu prelude (see prelude.h): runtime/CMakeLists.txt
// joins the parts, in the order it lists them, into the one header that
// kernels are built with.
//
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// cp.async and ldmatrix (runtime/device/async_copy.cuh and mma.cuh call
// them; other names than theirs, which argument-dependent lookup would
// find too when the arguments are tracked shared pointers)
//===----------------------------------------------------------------------===//

namespace moec_emu {
namespace detail {

/// PTX wants 16-byte aligned addresses for both. Tracked shared pointers
/// are checked by the 16-byte access itself; raw ones are checked here.
inline void checkAligned16(const void *p, const char *space, const char *what) {
  checkAligned(p, 16, space, what);
}
#ifdef MOEC_EMU_TRACK_SHARED
template <typename T>
inline void checkAligned16(const SharedPtr<T> &, const char *, const char *) {}
#endif

} // namespace detail

/// cp.async.cg.shared.global of 16 bytes, the first `srcBytes` of them read
/// from `src` and the rest zero. The copy is done at once: on a GPU it lands
/// at some point before the cp.async.wait_group that covers it, and a
/// correct kernel reads the destination only after that wait and a
/// __syncthreads() (and does not rewrite the source meanwhile), so it
/// cannot tell the two apart. Commit and wait are therefore no-ops. (A
/// kernel that forgets the wait works here and fails on a GPU.)
template <typename T>
inline void cpAsync(moec::sptr<uint4> dst, moec::gptr<const T> src,
                      int srcBytes) {
  static_assert(16 % sizeof(T) == 0, "cp.async copies whole elements");
  constexpr const char *what = "cp.async.cg.shared.global";
  if (srcBytes < 0 || srcBytes > 16 || srcBytes % sizeof(T))
    detail::fail("%s: source size %d is not a multiple of %zu in [0, 16]",
                 what, srcBytes, sizeof(T));
  detail::checkAligned16(static_cast<const T *>(src), "global", what);
  detail::checkAligned16(dst, "shared", what);
  unsigned char bytes[16] = {};
  for (int i = 0; i < srcBytes / static_cast<int>(sizeof(T)); ++i) {
    T v = src[i]; // bounds-checked in check mode
    std::memcpy(bytes + i * sizeof(T), &v, sizeof(T));
  }
  uint4 chunk;
  std::memcpy(&chunk, bytes, sizeof chunk);
  *dst = chunk;
}

inline void cpAsyncCommit() {}
inline void cpAsyncWait(int) {}

/// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: the calling lane
/// supplies `row`, the address of row (lane % 8) of matrix (lane / 8), and
/// receives its four fragment registers (see detail::completeLdmatrix).
inline void ldmatrix(uint32_t (&frag)[4], moec::sptr<const uint4> row,
                       bool trans) {
  const char *what = trans ? "ldmatrix.x4.trans" : "ldmatrix.x4";
  detail::checkAligned16(row, "shared", what);
  const uint4 v = *row; // a tracked read in check mode
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
  detail::ldmatrix(frag, words, trans, what);
}

} // namespace moec_emu
