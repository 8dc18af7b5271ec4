//===- async_copy.cuh - asynchronous global-to-shared copies ---*- CUDA -*-===//
//
// cp.async (sm_80+): a thread starts 16-byte copies from global to shared
// memory that bypass its registers, groups the copies started so far with
// cpAsyncCommit, and cpAsyncWait<N> waits until at most N of its groups are
// still in flight. Another thread's copies are visible after that thread's
// wait and a __syncthreads(). Used to overlap the loads of the next k tiles
// of a GEMM with the tensor-core work on the current one.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_ASYNC_COPY_CUH
#define MOEC_DEVICE_ASYNC_COPY_CUH

namespace moec {

#ifndef MOEC_EMU
/// Copies the first `srcBytes` (0 to 16) bytes at `src` to `dst` and
/// zero-fills the rest of its 16 bytes. Both addresses are 16-byte aligned;
/// with srcBytes == 0 nothing is read, but `src` must still be valid.
template <typename T>
MOEC_DEVICE void cpAsync16(sptr<uint4> dst, gptr<const T> src, int srcBytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(
                   sharedAddress(dst)),
               "l"(src), "r"(srcBytes)
               : "memory");
}

MOEC_DEVICE void cpAsyncCommit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int N> MOEC_DEVICE void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
#else
// emu copies at once, which no correct kernel can tell apart (see
// emu/async_copy.h).
template <typename T>
MOEC_DEVICE void cpAsync16(sptr<uint4> dst, gptr<const T> src, int srcBytes) {
  ::moec_emu::cpAsync<T>(dst, src, srcBytes);
}
MOEC_DEVICE void cpAsyncCommit() { ::moec_emu::cpAsyncCommit(); }
template <int N> MOEC_DEVICE void cpAsyncWait() {
  ::moec_emu::cpAsyncWait(N);
}
#endif

} // namespace moec

#endif // MOEC_DEVICE_ASYNC_COPY_CUH
