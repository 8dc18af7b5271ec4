//===- scan.cuh - block prefix sums ----------------------------*- CUDA -*-===//
//
// Exclusive prefix sums over a block in thread order (capacity slots,
// dispatch offsets).
//
//===----------------------------------------------------------------------===//

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
