//===- colsum.cuh - deterministic column sums ------------------*- CUDA -*-===//
//
// Column sums over many rows in a fixed order, for bias and norm-parameter
// gradients: no atomics, the same result whatever the grid.
//
//===----------------------------------------------------------------------===//

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
