//===- reduce.cuh - deterministic reductions -------------------*- CUDA -*-===//
//
// Warp and block reductions with a fixed combination tree, and the "last
// block" ticket: each block stores its partial result, and the block that
// finishes last (an integer ticket, the only atomic the library uses) sums
// the partials in block order. Results never depend on timing.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_REDUCE_CUH
#define MOEC_DEVICE_REDUCE_CUH

namespace moec {

/// Combines v over the 32 lanes of a warp with `op` (xor butterfly: every
/// lane gets the result).
template <typename T, typename Op> MOEC_DEVICE T warpReduce(T v, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = op(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

/// Combines v over a block of `Threads` threads (a multiple of 32) with
/// `op`, the warps' results in warp order; every thread gets the result.
/// `scratch` holds at least Threads / 32 values.
template <int Threads, typename T, typename Op>
MOEC_DEVICE T blockReduce(T v, sptr<T> scratch, Op op) {
  constexpr int kWarps = Threads / 32;
  v = warpReduce(v, op);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads(); // scratch may still be read by a previous call
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  T result = scratch[0];
  for (int w = 1; w < kWarps; ++w)
    result = op(result, scratch[w]);
  return result;
}

template <typename T> MOEC_DEVICE T warpSum(T v) {
  return warpReduce(v, [](T a, T b) { return a + b; });
}
template <typename T> MOEC_DEVICE T warpMax(T v) {
  return warpReduce(v, [](T a, T b) { return b > a ? b : a; });
}

template <int Threads, typename T>
MOEC_DEVICE T blockSum(T v, sptr<T> scratch) {
  return blockReduce<Threads>(v, scratch, [](T a, T b) { return a + b; });
}
template <int Threads, typename T>
MOEC_DEVICE T blockMax(T v, sptr<T> scratch) {
  return blockReduce<Threads>(v, scratch,
                              [](T a, T b) { return b > a ? b : a; });
}
template <int Threads, typename T>
MOEC_DEVICE T blockMin(T v, sptr<T> scratch) {
  return blockReduce<Threads>(v, scratch,
                              [](T a, T b) { return b < a ? b : a; });
}

/// True in every thread of the block that finishes last among the grid's
/// blocks. Call once per block, after the block's partial results are
/// stored; `ticket` is a zeroed counter, reset here for the next launch.
MOEC_DEVICE bool isLastBlock(gptr<unsigned> ticket) {
  MOEC_SHARED(int, last, 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence(); // make this block's partials visible first
    unsigned total = gridDim.x * gridDim.y * gridDim.z;
    unsigned done = atomicAdd(&ticket[0], 1u);
    last[0] = done == total - 1;
    if (last[0])
      ticket[0] = 0;
  }
  __syncthreads();
  if (last[0])
    __threadfence(); // and see every other block's
  return last[0] != 0;
}

/// The flat index of this block in its grid.
MOEC_DEVICE int64_t blockLinear() {
  return blockIdx.x + static_cast<int64_t>(gridDim.x) *
                          (blockIdx.y + static_cast<int64_t>(gridDim.y) * blockIdx.z);
}

} // namespace moec

#endif // MOEC_DEVICE_REDUCE_CUH
