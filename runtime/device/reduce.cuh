//===- reduce.cuh - deterministic reductions --------------------*- CUDA -*-===//
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

#ifndef MOEC_DEVICE_COLSUM_CUH
#define MOEC_DEVICE_COLSUM_CUH
namespace moec {

/// dst[c] = sum over r of src(r, c) for a 32-column strip per block
/// (blockIdx.x), 256 threads: 8 row lanes each sum every 8th row in order,
/// then lane results are added in lane order. The order never depends on the
/// grid, so the sums are deterministic. `load(r, c)` reads the source.
template <typename Load, typename Store>
MOEC_DEVICE void columnSums(int64_t rows, int64_t cols, const Load &load,
                            const Store &store) {
  constexpr int kLanes = 8;
  MOEC_SHARED(float, partial, kLanes * 32);
  int col = threadIdx.x % 32, lane = threadIdx.x / 32;
  int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + col;
  float sum = 0.0f;
  if (c < cols)
    for (int64_t r = lane; r < rows; r += kLanes)
      sum += load(r, c);
  partial[lane * 32 + col] = sum;
  __syncthreads();
  if (lane == 0 && c < cols) {
    float total = 0.0f;
    for (int l = 0; l < kLanes; ++l)
      total += partial[l * 32 + col];
    store(c, total);
  }
}

} // namespace moec
#endif // MOEC_DEVICE_COLSUM_CUH

#ifndef MOEC_DEVICE_SCAN_CUH
#define MOEC_DEVICE_SCAN_CUH
namespace moec {

/// Exclusive prefix sum of one int per thread over a block of Threads
/// threads (a multiple of 32), in thread order; `total` gets the sum.
/// `scratch` holds at least Threads / 32 ints.
template <int Threads>
MOEC_DEVICE int blockExclusiveScan(int v, sptr<int> scratch, int &total) {
  constexpr int kWarps = Threads / 32;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int inclusive = v;
  for (int offset = 1; offset < 32; offset <<= 1) {
    int up = __shfl_up_sync(kFullMask, inclusive, offset);
    if (lane >= offset)
      inclusive += up;
  }
  __syncthreads();
  if (lane == 31)
    scratch[warp] = inclusive;
  __syncthreads();
  int before = 0;
  total = 0;
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp)
      before += scratch[w];
    total += scratch[w];
  }
  return before + inclusive - v;
}

} // namespace moec
#endif // MOEC_DEVICE_SCAN_CUH
