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

/// Sum over the 32 lanes of a warp (xor butterfly: every lane gets it).
template <typename T> MOEC_DEVICE T warpSum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

template <typename T> MOEC_DEVICE T warpMax(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    T other = __shfl_xor_sync(kFullMask, v, offset);
    v = other > v ? other : v;
  }
  return v;
}

/// Sum over a block of `Threads` threads (a multiple of 32); every thread
/// gets the result. `scratch` holds at least Threads / 32 values.
template <int Threads, typename T>
MOEC_DEVICE T blockSum(T v, sptr<T> scratch) {
  constexpr int kWarps = Threads / 32;
  v = warpSum(v);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads(); // scratch may still be read by a previous call
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  T total = T(0);
  for (int w = 0; w < kWarps; ++w)
    total += scratch[w];
  return total;
}

template <int Threads, typename T>
MOEC_DEVICE T blockMax(T v, sptr<T> scratch) {
  constexpr int kWarps = Threads / 32;
  v = warpMax(v);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  T best = scratch[0];
  for (int w = 1; w < kWarps; ++w)
    best = scratch[w] > best ? scratch[w] : best;
  return best;
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
