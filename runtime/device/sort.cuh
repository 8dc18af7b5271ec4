//===- sort.cuh - stable counting sort of small integer keys ---*- CUDA -*-===//
//
// A deterministic, stable sort of n int32 keys in [0, numKeys) without a
// cap on numKeys: the result is `order`, the element indices grouped by key
// in ascending key order and, within a key, in index order, and
// `offsets[numKeys + 1]`, where each key's run starts. Keys outside
// [0, numKeys) are left out (offsets[numKeys] counts only the others).
//
// The elements are split into TILES contiguous tiles of ceil(n / TILES)
// (a fixed number of tiles rather than of elements, so that the scratch
// buffers have sizes the compiler can state: TILES * numKeys counts). Four
// launches, in order:
//   sortRank     grid TILES            each element's rank among the equal
//                                      keys before it in its tile, and each
//                                      tile's count of every key;
//   sortCount    grid ceil(K / THREADS) the counts become, per key, the
//                                      number in the tiles before; key
//                                      totals go to offsets, block totals
//                                      to blockTotals;
//   sortOffsets  grid ceil(K / THREADS) offsets = exclusive scan of totals;
//   sortScatter  grid ceil(n / THREADS) order[offset + before + rank] = i.
// Only integer counts are combined, so nothing depends on timing.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DEVICE_SORT_CUH
#define MOEC_DEVICE_SORT_CUH

namespace moec {

/// The tile of element range [begin, end) that block `tile` of TILES owns.
template <int TILES>
MOEC_DEVICE void sortTileRange(int64_t n, int64_t tile, int64_t &begin,
                               int64_t &end) {
  const int64_t length = (n + TILES - 1) / TILES;
  begin = tile * length < n ? tile * length : n;
  end = begin + length < n ? begin + length : n;
}

/// Phase 1, grid = TILES blocks of THREADS threads. counts[TILES][numKeys]
/// (tile-major) gets each tile's key counts; rank[i] the number of elements
/// before i in its tile with the same key (-1 for a key out of range).
/// The tile is walked in chunks of THREADS elements; within a chunk an
/// element's rank is a count over the chunk's keys in shared memory, and
/// the counts row carries the running totals from chunk to chunk.
template <int TILES, int THREADS>
MOEC_DEVICE void sortRank(int64_t n, int64_t numKeys, gptr<const int32_t> keys,
                          gptr<int32_t> counts, gptr<int32_t> rank) {
  MOEC_SHARED(int32_t, chunk, THREADS);
  const gptr<int32_t> row = counts + blockIdx.x * numKeys;
  for (int64_t k = threadIdx.x; k < numKeys; k += THREADS)
    row[k] = 0;
  int64_t begin, end;
  sortTileRange<TILES>(n, blockIdx.x, begin, end);
  for (int64_t base = begin; base < end; base += THREADS) {
    const int64_t i = base + threadIdx.x;
    const int count =
        end - base < THREADS ? static_cast<int>(end - base) : THREADS;
    int32_t key = i < end ? keys[i] : -1;
    if (key >= numKeys)
      key = -1;
    __syncthreads(); // the row's zeros and the last chunk's updates
    chunk[threadIdx.x] = key;
    __syncthreads();
    int before = 0;
    bool last = true;
    for (int j = 0; j < count; ++j) {
      const bool same = chunk[j] == key;
      before += same && j < static_cast<int>(threadIdx.x);
      last = last && !(same && j > static_cast<int>(threadIdx.x));
    }
    const int32_t running = key >= 0 ? row[key] : 0;
    if (i < end)
      rank[i] = key >= 0 ? running + before : -1;
    __syncthreads(); // every equal key has read the running total
    if (key >= 0 && last)
      row[key] = running + before + 1;
  }
}

/// Phase 2, grid = ceil(numKeys / THREADS). Per key, counts[t][key] becomes
/// the number of that key in tiles before t; offsets[key] gets its total
/// and blockTotals[block] the block's sum of totals.
template <int TILES, int THREADS>
MOEC_DEVICE void sortCount(int64_t numKeys, gptr<int32_t> counts,
                           gptr<int32_t> offsets, gptr<int32_t> blockTotals) {
  MOEC_SHARED(int, scratch, THREADS / 32);
  const int64_t key = blockIdx.x * static_cast<int64_t>(THREADS) + threadIdx.x;
  int total = 0;
  if (key < numKeys) {
    for (int t = 0; t < TILES; ++t) {
      const int64_t at = t * numKeys + key;
      const int32_t c = counts[at];
      counts[at] = total;
      total += c;
    }
    offsets[key] = total;
  }
  int blockTotal;
  blockExclusiveScan<THREADS>(total, scratch, blockTotal);
  if (threadIdx.x == 0)
    blockTotals[blockIdx.x] = blockTotal;
}

/// Phase 3, grid = ceil(numKeys / THREADS): offsets[0..numKeys] becomes the
/// exclusive scan of the totals; the last block writes offsets[numKeys].
template <int THREADS>
MOEC_DEVICE void sortOffsets(int64_t numKeys, gptr<const int32_t> blockTotals,
                             gptr<int32_t> offsets) {
  MOEC_SHARED(int, scratch, THREADS / 32);
  // The blocks before this one: few (numKeys / THREADS in all), so each
  // block adds them up itself rather than in another launch.
  int partial = 0;
  for (int64_t b = threadIdx.x; b < blockIdx.x; b += THREADS)
    partial += blockTotals[b];
  int base;
  blockExclusiveScan<THREADS>(partial, scratch, base);
  const int64_t key = blockIdx.x * static_cast<int64_t>(THREADS) + threadIdx.x;
  const int32_t total = key < numKeys ? offsets[key] : 0;
  int blockTotal;
  const int before = blockExclusiveScan<THREADS>(total, scratch, blockTotal);
  if (key < numKeys)
    offsets[key] = base + before;
  if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0)
    offsets[numKeys] = base + blockTotal;
}

/// Phase 4, grid = ceil(n / THREADS): each element with a key in range
/// goes to its place in `order`.
template <int TILES, int THREADS>
MOEC_DEVICE void sortScatter(int64_t n, int64_t numKeys,
                             gptr<const int32_t> keys,
                             gptr<const int32_t> counts,
                             gptr<const int32_t> rank,
                             gptr<const int32_t> offsets,
                             gptr<int32_t> order) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(THREADS) + threadIdx.x;
  if (i >= n || rank[i] < 0)
    return;
  const int64_t length = (n + TILES - 1) / TILES;
  const int32_t key = keys[i];
  order[offsets[key] + counts[i / length * numKeys + key] + rank[i]] =
      static_cast<int32_t>(i);
}

} // namespace moec

#endif // MOEC_DEVICE_SORT_CUH
