//===- EmuKernels.cpp - the CUDA kernels the emu tests run ----------------===//
//
// Written to the device library's rules (compiler/CODEGEN.md): the generated
// kernel signature, MOEC_SHARED, moec::gptr and bufferArg. Several kernels
// per translation unit, since building one costs about a second.
//
//===----------------------------------------------------------------------===//

#include "EmuTestUtil.h"

namespace moec::emu::test {

const char *const kCorrectKernels = R"cuda(
using moec::bufferArg;
using moec::gptr;
using moec::scalarArg;

// out[b] = sum of x[256 b .. 256 b + 255] by a shared-memory tree.
extern "C" __global__ void __launch_bounds__(256)
blockReduce(const moec::KernelParams p) {
  gptr<const float> x = bufferArg<const float>(p, 0);
  gptr<float> out = bufferArg<float>(p, 1);
  const int64_t n = scalarArg(p, 0);
  MOEC_SHARED(float, partial, 256);
  const unsigned t = threadIdx.x;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * 256 + t;
  partial[t] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (unsigned s = 128; s > 0; s >>= 1) {
    if (t < s)
      partial[t] += partial[t + s];
    __syncthreads();
  }
  if (t == 0)
    out[blockIdx.x] = partial[0];
}
MOEC_EMU_EXPORT_KERNEL(blockReduce)

// Two phases through shared memory: y[t] = 2 x[n - 1 - (t + 1) % n].
extern "C" __global__ void reverseShared(const moec::KernelParams p) {
  gptr<const int> x = bufferArg<const int>(p, 0);
  gptr<int> y = bufferArg<int>(p, 1);
  MOEC_SHARED(int, s, 256);
  const unsigned t = threadIdx.x, n = blockDim.x;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * n;
  s[t] = x[base + t];
  __syncthreads();
  int v = s[n - 1 - t];
  __syncthreads();
  s[t] = 2 * v;
  __syncthreads();
  y[base + t] = s[(t + 1) % n];
}
MOEC_EMU_EXPORT_KERNEL(reverseShared)

// The same without barriers: wrong on a GPU and here.
extern "C" __global__ void reverseNoBarrier(const moec::KernelParams p) {
  gptr<const int> x = bufferArg<const int>(p, 0);
  gptr<int> y = bufferArg<int>(p, 1);
  MOEC_SHARED(int, s, 256);
  const unsigned t = threadIdx.x, n = blockDim.x;
  s[t] = x[t];
  y[t] = s[n - 1 - t];
}
MOEC_EMU_EXPORT_KERNEL(reverseNoBarrier)

// Vector elements in shared memory, accessed field by field.
extern "C" __global__ void sharedPairs(const moec::KernelParams p) {
  gptr<float> y = bufferArg<float>(p, 0);
  MOEC_SHARED(float2, pairs, 64);
  const unsigned t = threadIdx.x;
  pairs[t].x = static_cast<float>(t);
  pairs[t].y = 2.0f * t;
  __syncthreads();
  float2 v = pairs[63 - t];
  y[t] = v.x + v.y;
}
MOEC_EMU_EXPORT_KERNEL(sharedPairs)

// A device function taking a shared array as moec::sptr, T deduced.
template <typename T> __device__ T sumFirst(moec::sptr<T> s, int n) {
  T total = 0;
  for (int i = 0; i < n; ++i)
    total += s[i];
  return total;
}

// y[t] = 0 + 1 + ... + t through a shared array handed to sumFirst.
extern "C" __global__ void sharedParam(const moec::KernelParams p) {
  gptr<float> y = bufferArg<float>(p, 0);
  MOEC_SHARED(float, vals, 32);
  vals[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();
  y[threadIdx.x] = sumFirst(vals, static_cast<int>(threadIdx.x) + 1);
}
MOEC_EMU_EXPORT_KERNEL(sharedParam)

// y = x[n - 1 - t] + 2 x[n - 1 - (t + 3) % n] through 2 n floats of dynamic
// shared memory.
extern "C" __global__ void dynamicShared(const moec::KernelParams p) {
  gptr<const float> x = bufferArg<const float>(p, 0);
  gptr<float> y = bufferArg<float>(p, 1);
  MOEC_DYNAMIC_SHARED(float, buf);
  const unsigned t = threadIdx.x, n = blockDim.x;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * n;
  buf[t] = x[base + t];
  buf[n + t] = 2.0f * x[base + t];
  __syncthreads();
  y[base + t] = buf[n - 1 - t] + buf[2 * n - 1 - (t + 3) % n];
}
MOEC_EMU_EXPORT_KERNEL(dynamicShared)

// __syncthreads_count / _and / _or.
extern "C" __global__ void barrierVotes(const moec::KernelParams p) {
  gptr<int> out = bufferArg<int>(p, 0);
  const unsigned t = threadIdx.x;
  int count = __syncthreads_count(t % 3 == 0);
  int all = __syncthreads_and(t < 1000);
  int any = __syncthreads_or(t == 77);
  if (t == 0) {
    out[0] = count;
    out[1] = all;
    out[2] = any;
  }
}
MOEC_EMU_EXPORT_KERNEL(barrierVotes)

// Thread 0 leaves; the others wait at a barrier it never reaches.
extern "C" __global__ void earlyExit(const moec::KernelParams p) {
  MOEC_SHARED(int, s, 64);
  if (threadIdx.x == 0)
    return;
  s[threadIdx.x] = 1;
  __syncthreads();
}
MOEC_EMU_EXPORT_KERNEL(earlyExit)

// The two halves of the block wait at different barriers.
extern "C" __global__ void splitBarrier(const moec::KernelParams p) {
  if (threadIdx.x < 32) {
    __syncthreads();
  } else {
    __syncthreads();
  }
}
MOEC_EMU_EXPORT_KERNEL(splitBarrier)

// Every shuffle kind and width; out[k * 64 + t] for 64 threads.
extern "C" __global__ void shuffles(const moec::KernelParams p) {
  gptr<int> out = bufferArg<int>(p, 0);
  gptr<double> outD = bufferArg<double>(p, 1);
  gptr<float> outF = bufferArg<float>(p, 2);
  gptr<unsigned long long> outU = bufferArg<unsigned long long>(p, 3);
  const unsigned t = threadIdx.x;
  const int lane = t % 32, n = 64;
  const int v = 100 * static_cast<int>(t);
  int k = 0;
  out[k++ * n + t] = __shfl_sync(0xffffffffu, v, (lane * 7 + 3) % 32);
  out[k++ * n + t] = __shfl_sync(0xffffffffu, v, lane + 5, 8);
  out[k++ * n + t] = __shfl_sync(0xffffffffu, v, 2, 16);
  out[k++ * n + t] = __shfl_up_sync(0xffffffffu, v, 3);
  out[k++ * n + t] = __shfl_up_sync(0xffffffffu, v, 3, 16);
  out[k++ * n + t] = __shfl_down_sync(0xffffffffu, v, 5);
  out[k++ * n + t] = __shfl_down_sync(0xffffffffu, v, 5, 8);
  out[k++ * n + t] = __shfl_xor_sync(0xffffffffu, v, 9);
  out[k++ * n + t] = __shfl_xor_sync(0xffffffffu, v, 9, 8);
  out[k++ * n + t] = __shfl_xor_sync(0xffffffffu, v, 1, 4);
  // Only the even lanes take part.
  if (lane % 2 == 0)
    out[k * n + t] = __shfl_xor_sync(0x55555555u, v, 2);
  else
    out[k * n + t] = -1;
  ++k;
  outD[t] = __shfl_down_sync(0xffffffffu, 0.5 * t, 1);
  outF[t] = __shfl_up_sync(0xffffffffu, 0.25f * t, 2, 8);
  outU[t] = __shfl_sync(0xffffffffu, (1ull << 40) + t, 31 - lane);
}
MOEC_EMU_EXPORT_KERNEL(shuffles)

// Votes with full and partial masks, two collectives per warp at once.
extern "C" __global__ void votes(const moec::KernelParams p) {
  gptr<unsigned> out = bufferArg<unsigned>(p, 0);
  const unsigned t = threadIdx.x, lane = t % 32, n = 64;
  const int pred = (t * 13) % 5 == 0;
  out[0 * n + t] = __ballot_sync(0xffffffffu, pred);
  out[1 * n + t] = __any_sync(0xffffffffu, lane == 7 && t >= 32);
  out[2 * n + t] = __all_sync(0xffffffffu, lane < 31);
  if (lane < 16) {
    out[3 * n + t] = __ballot_sync(0x0000ffffu, pred);
    out[4 * n + t] = __all_sync(0x0000ffffu, lane < 16);
  } else {
    out[3 * n + t] = __ballot_sync(0xffff0000u, pred);
    out[4 * n + t] = __any_sync(0xffff0000u, lane == 20);
  }
  __syncwarp();
  if (lane % 3 == 0)
    out[5 * n + t] = __ballot_sync(0x49249249u, lane > 10);
  else
    out[5 * n + t] = 0;
  __syncwarp(0xffffffffu);
  if (lane < 10)
    out[6 * n + t] = __activemask();
  else
    out[6 * n + t] = 0;
}
MOEC_EMU_EXPORT_KERNEL(votes)

// Lane 5 waits at a barrier while its warp shuffles with it in the mask.
extern "C" __global__ void missingLane(const moec::KernelParams p) {
  gptr<int> out = bufferArg<int>(p, 0);
  const int lane = threadIdx.x % 32;
  if (lane == 5) {
    __syncthreads();
    return;
  }
  out[threadIdx.x] = __shfl_sync(0xffffffffu, lane, 0);
  __syncthreads();
}
MOEC_EMU_EXPORT_KERNEL(missingLane)

// Lane 5 has exited when the others shuffle with it in the mask.
extern "C" __global__ void exitedLane(const moec::KernelParams p) {
  gptr<int> out = bufferArg<int>(p, 0);
  const int lane = threadIdx.x % 32;
  if (lane == 5)
    return;
  out[threadIdx.x] = __shfl_sync(0xffffffffu, lane, 0);
}
MOEC_EMU_EXPORT_KERNEL(exitedLane)

// Per-warp sum and max by xor butterflies, float and double; every lane
// writes what it got.
extern "C" __global__ void warpReduce(const moec::KernelParams p) {
  gptr<const float> xf = bufferArg<const float>(p, 0);
  gptr<const double> xd = bufferArg<const double>(p, 1);
  gptr<float> outF = bufferArg<float>(p, 2);
  gptr<double> outD = bufferArg<double>(p, 3);
  const unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
  float s = xf[g], m = xf[g];
  double sd = xd[g], md = xd[g];
  for (int o = 16; o > 0; o >>= 1) {
    s += __shfl_xor_sync(0xffffffffu, s, o);
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    sd += __shfl_xor_sync(0xffffffffu, sd, o);
    md = fmax(md, __shfl_xor_sync(0xffffffffu, md, o));
  }
  outF[2 * g] = s;
  outF[2 * g + 1] = m;
  outD[2 * g] = sd;
  outD[2 * g + 1] = md;
}
MOEC_EMU_EXPORT_KERNEL(warpReduce)

// Counters every thread of every block updates.
extern "C" __global__ void atomics(const moec::KernelParams p) {
  gptr<int> ci = bufferArg<int>(p, 0);
  gptr<uint64_t> cu = bufferArg<uint64_t>(p, 1);
  gptr<float> cf = bufferArg<float>(p, 2);
  gptr<int> mm = bufferArg<int>(p, 3);
  gptr<unsigned> cas = bufferArg<unsigned>(p, 4);
  gptr<unsigned long long> cull = bufferArg<unsigned long long>(p, 5);
  gptr<double> cd = bufferArg<double>(p, 6);
  const int g = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  atomicAdd(&ci[0], 1);
  atomicAdd(&ci[1], g);
  atomicAdd(&cu[0], uint64_t(1) << 33);
  atomicAdd(&cull[0], 3ull);
  atomicAdd(&cf[0], 1.0f);
  atomicAdd(&cd[0], 0.5);
  atomicMax(&mm[0], g);
  atomicMin(&mm[1], -g);
  atomicSub(&mm[2], 2);
  atomicExch(&mm[3], 7);
  unsigned old = cas[0], assumed;
  do {
    assumed = old;
    old = atomicCAS(&cas[0], assumed, assumed + 3u);
  } while (old != assumed);
  MOEC_SHARED(unsigned, hits, 1);
  if (threadIdx.x == 0)
    hits[0] = 0;
  __syncthreads();
  atomicAdd(&hits[0], 1u);
  __syncthreads();
  if (threadIdx.x == 0)
    atomicAdd(&cas[1], static_cast<unsigned>(hits[0]));
}
MOEC_EMU_EXPORT_KERNEL(atomics)

// A fixed-order reduction: per-block trees, then the last block (ticket)
// adds the partials in block order.
extern "C" __global__ void __launch_bounds__(128)
lastBlockSum(const moec::KernelParams p) {
  gptr<const float> x = bufferArg<const float>(p, 0);
  gptr<float> partials = bufferArg<float>(p, 1);
  gptr<unsigned> ticket = bufferArg<unsigned>(p, 2);
  gptr<float> out = bufferArg<float>(p, 3);
  const int64_t n = scalarArg(p, 0);
  MOEC_SHARED(float, s, 128);
  MOEC_SHARED(int, amLast, 1);
  const unsigned t = threadIdx.x;
  float acc = 0.0f;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * 128 + t; i < n;
       i += 128 * static_cast<int64_t>(gridDim.x))
    acc += x[i];
  s[t] = acc;
  __syncthreads();
  for (unsigned w = 64; w > 0; w >>= 1) {
    if (t < w)
      s[t] += s[t + w];
    __syncthreads();
  }
  if (t == 0) {
    partials[blockIdx.x] = s[0];
    __threadfence();
    unsigned done = atomicAdd(&ticket[0], 1u);
    amLast[0] = done == gridDim.x - 1;
  }
  __syncthreads();
  if (amLast[0] && t == 0) {
    __threadfence();
    float total = 0.0f;
    for (unsigned b = 0; b < gridDim.x; ++b)
      total += partials[b];
    out[0] = total;
    ticket[0] = 0;
  }
}
MOEC_EMU_EXPORT_KERNEL(lastBlockSum)

// One m16n8k16 bf16 tile per warp, twice: D = C + A B, then D + A B (d
// aliases c). A [tile][16][16] and B [tile][16][8] are bf16 bit patterns.
extern "C" __global__ void mmaBf16(const moec::KernelParams p) {
  gptr<const uint16_t> A = bufferArg<const uint16_t>(p, 0);
  gptr<const uint16_t> B = bufferArg<const uint16_t>(p, 1);
  gptr<const float> C = bufferArg<const float>(p, 2);
  gptr<float> D = bufferArg<float>(p, 3);
  const unsigned lane = threadIdx.x % 32;
  const unsigned tile = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const unsigned g = lane / 4, q = lane % 4;
  auto a = [&](unsigned r, unsigned c) -> uint32_t {
    return A[tile * 256 + r * 16 + c];
  };
  auto b = [&](unsigned k, unsigned c) -> uint32_t {
    return B[tile * 128 + k * 8 + c];
  };
  auto pack = [](uint32_t lo, uint32_t hi) { return lo | hi << 16; };
  const uint32_t fa[4] = {pack(a(g, 2 * q), a(g, 2 * q + 1)),
                          pack(a(g + 8, 2 * q), a(g + 8, 2 * q + 1)),
                          pack(a(g, 2 * q + 8), a(g, 2 * q + 9)),
                          pack(a(g + 8, 2 * q + 8), a(g + 8, 2 * q + 9))};
  const uint32_t fb[2] = {pack(b(2 * q, g), b(2 * q + 1, g)),
                          pack(b(2 * q + 8, g), b(2 * q + 9, g))};
  const unsigned c0 = tile * 128;
  const float fc[4] = {C[c0 + g * 8 + 2 * q], C[c0 + g * 8 + 2 * q + 1],
                       C[c0 + (g + 8) * 8 + 2 * q],
                       C[c0 + (g + 8) * 8 + 2 * q + 1]};
  float d[4];
  moec::mma_m16n8k16_bf16(d, fa, fb, fc);
  moec::mma_m16n8k16_bf16(d, fa, fb, d);
  D[c0 + g * 8 + 2 * q] = d[0];
  D[c0 + g * 8 + 2 * q + 1] = d[1];
  D[c0 + (g + 8) * 8 + 2 * q] = d[2];
  D[c0 + (g + 8) * 8 + 2 * q + 1] = d[3];
}
MOEC_EMU_EXPORT_KERNEL(mmaBf16)

// C = A B through gemmTileBf16, one TM x TN tile per block of a 1-D grid.
// Scalars M, N, K; A [M][K] row-major and B [K][N] row-major, or (the
// transposed variant) A stored [K][M] and B stored [N][K].
template <int TM, int TN, int TK, bool TRANSPOSED>
__device__ void gemmBf16(const moec::KernelParams &p) {
  const int64_t M = scalarArg(p, 0), N = scalarArg(p, 1), K = scalarArg(p, 2);
  gptr<const float> A = bufferArg<const float>(p, 0);
  gptr<const float> B = bufferArg<const float>(p, 1);
  gptr<float> C = bufferArg<float>(p, 2);
  const int64_t tilesN = (N + TN - 1) / TN;
  const int64_t m0 = blockIdx.x / tilesN * TM, n0 = blockIdx.x % tilesN * TN;
  const auto store = [=](int64_t m, int64_t n, float v) { C[m * N + n] = v; };
  if constexpr (TRANSPOSED)
    moec::gemmTileBf16<TM, TN, TK, 256>(m0, n0, M, N, K,
                                        moec::ColMajor<float>{A, M},
                                        moec::ColMajor<float>{B, K}, store);
  else
    moec::gemmTileBf16<TM, TN, TK, 256>(m0, n0, M, N, K,
                                        moec::RowMajor<float>{A, K},
                                        moec::RowMajor<float>{B, N}, store);
}
extern "C" __global__ void gemmBf16Rows(const moec::KernelParams p) {
  gemmBf16<64, 64, 16, false>(p);
}
MOEC_EMU_EXPORT_KERNEL(gemmBf16Rows)
extern "C" __global__ void gemmBf16Transposed(const moec::KernelParams p) {
  gemmBf16<64, 32, 32, true>(p);
}
MOEC_EMU_EXPORT_KERNEL(gemmBf16Transposed)

// ldmatrix.x4 and .x4.trans by one warp. in [4][8][8] holds four 8 x 8
// b16 matrices; row r of matrix i is stored at chunk 7 (8 i + r) % 32 of
// the shared tile, so lanes supply scattered addresses. out[lane][4] and
// outTrans[lane][4] receive the fragment registers.
extern "C" __global__ void ldmatrixX4(const moec::KernelParams p) {
  gptr<const uint32_t> in = bufferArg<const uint32_t>(p, 0);
  gptr<uint32_t> out = bufferArg<uint32_t>(p, 1);
  gptr<uint32_t> outTrans = bufferArg<uint32_t>(p, 2);
  MOEC_SHARED(uint4, tile, 32);
  const unsigned lane = threadIdx.x;
  const unsigned chunk = 7 * lane % 32; // lane = 8 i + r
  tile[chunk] = make_uint4(in[4 * lane], in[4 * lane + 1], in[4 * lane + 2],
                           in[4 * lane + 3]);
  __syncthreads();
  uint32_t d[4], t[4];
  moec::ldmatrixX4(d, tile + chunk);
  moec::ldmatrixX4Trans(t, tile + chunk);
  for (int i = 0; i < 4; ++i) {
    out[4 * lane + i] = d[i];
    outTrans[4 * lane + i] = t[i];
  }
}
MOEC_EMU_EXPORT_KERNEL(ldmatrixX4)

// Calls run(loadA, loadB) with the operand loaders of LAYOUT over A and B
// (elements of type T): 0: A RowMajor, B RowMajor; 1: A ColMajor, B
// ColMajor; 2: A GatherRows (row i is row orderA[3 + i] / 2 of its
// buffer), B GatherCols (column n is row orderB[n] of its buffer); 3: the
// transposes, A GatherCols (column k is row orderA[3 + k] / 2), B
// GatherRows (row k is row orderB[k]).
template <int LAYOUT, typename T, typename Run>
__device__ void withLayout(gptr<const T> A, gptr<const T> B, int64_t lda,
                           int64_t ldb, gptr<const int32_t> orderA,
                           gptr<const int32_t> orderB, const Run &run) {
  if constexpr (LAYOUT == 0)
    run(moec::RowMajor<T>{A, lda}, moec::RowMajor<T>{B, ldb});
  else if constexpr (LAYOUT == 1)
    run(moec::ColMajor<T>{A, lda}, moec::ColMajor<T>{B, ldb});
  else if constexpr (LAYOUT == 2)
    run(moec::GatherRows<T>{A, orderA, 3, 2, lda, gptr<const float>()},
        moec::GatherCols<T>{B, orderB, 0, 1, ldb});
  else
    run(moec::GatherCols<T>{A, orderA, 3, 2, lda},
        moec::GatherRows<T>{B, orderB, 0, 1, ldb, gptr<const float>()});
}

// C = A B through the bf16 tiles, one TM x TN tile per block of a 1-D grid.
// Scalars M, N, K, lda, ldb and `which`: 0 runs gemmTileBf16, 1 the
// pipeline of gemmTileBf16Async directly with cp.async, 2
// gemmTileBf16Async (which picks how the pipeline loads), 3 the pipeline
// reading every element through the loaders. Buffers: A and B as bf16,
// C, the gather orders of A and B, and applies[blockIdx.x] = whether
// gemmTileBf16Async's run-time check passes.
// LAYOUT: see withLayout.
template <int TM, int TN, int LAYOUT>
__device__ void gemmBf16Tiles(const moec::KernelParams &p) {
  using moec::bf16;
  const int64_t M = scalarArg(p, 0), N = scalarArg(p, 1), K = scalarArg(p, 2);
  const int64_t lda = scalarArg(p, 3), ldb = scalarArg(p, 4);
  const int64_t which = scalarArg(p, 5);
  gptr<const bf16> A = bufferArg<const bf16>(p, 0);
  gptr<const bf16> B = bufferArg<const bf16>(p, 1);
  gptr<float> C = bufferArg<float>(p, 2);
  gptr<const int32_t> orderA = bufferArg<const int32_t>(p, 3);
  gptr<const int32_t> orderB = bufferArg<const int32_t>(p, 4);
  gptr<int32_t> applies = bufferArg<int32_t>(p, 5);
  const int64_t tilesN = (N + TN - 1) / TN;
  const int64_t m0 = blockIdx.x / tilesN * TM, n0 = blockIdx.x % tilesN * TN;
  const auto store = [=](int64_t m, int64_t n, float v) { C[m * N + n] = v; };
  const auto run = [&](const auto &loadA, const auto &loadB) {
    if (threadIdx.x == 0)
      applies[blockIdx.x] =
          moec::detail::asyncTileApplies(m0, n0, loadA, loadB);
    if (which == 0)
      moec::gemmTileBf16<TM, TN, 16, 256>(m0, n0, M, N, K, loadA, loadB,
                                          store);
    else if (which == 1 || which == 3)
      moec::detail::gemmTileBf16Pipelined<TM, TN, 256>(
          m0, n0, M, N, K, loadA, loadB, store, which == 1);
    else
      moec::gemmTileBf16Async<TM, TN, 16, 256>(m0, n0, M, N, K, loadA, loadB,
                                               store);
  };
  withLayout<LAYOUT>(A, B, lda, ldb, orderA, orderB, run);
}
extern "C" __global__ void gemmTilesRows64x64(const moec::KernelParams p) {
  gemmBf16Tiles<64, 64, 0>(p);
}
MOEC_EMU_EXPORT_KERNEL(gemmTilesRows64x64)
extern "C" __global__ void gemmTilesRows64x32(const moec::KernelParams p) {
  gemmBf16Tiles<64, 32, 0>(p);
}
MOEC_EMU_EXPORT_KERNEL(gemmTilesRows64x32)
// The epilogue's passes: whole 16-row fragments that divide the tile and
// fit the stages (128 x 64, three stages of 9216 words: all at once;
// 128 x 128 and 160 x 128, two stages of 8192 and 9216: 32 rows).
static_assert(moec::stagedRows(128, 72, 9216) == 128, "one pass");
static_assert(moec::stagedRows(128, 136, 8192) == 32, "four passes");
static_assert(moec::stagedRows(160, 136, 9216) == 32, "five passes");
static_assert(moec::stagedRows(128, 136, 3072) == 16, "eight passes");
static_assert(moec::stagedRows(64, 72, 1000) == 0, "no room");

// Two stages and an epilogue staged 32 rows at a time; gemmTileBf16 (which
// 0) stages 16 rows at a time in its operands' 3072 words.
extern "C" __global__ void gemmTilesRows128x128(const moec::KernelParams p) {
  gemmBf16Tiles<128, 128, 0>(p);
}
MOEC_EMU_EXPORT_KERNEL(gemmTilesRows128x128)
extern "C" __global__ void gemmTilesCols128x64(const moec::KernelParams p) {
  gemmBf16Tiles<128, 64, 1>(p);
}
MOEC_EMU_EXPORT_KERNEL(gemmTilesCols128x64)
extern "C" __global__ void gemmTilesGather64x32(const moec::KernelParams p) {
  gemmBf16Tiles<64, 32, 2>(p);
}
MOEC_EMU_EXPORT_KERNEL(gemmTilesGather64x32)
extern "C" __global__ void gemmTilesGatherT64x64(const moec::KernelParams p) {
  gemmBf16Tiles<64, 64, 3>(p);
}
MOEC_EMU_EXPORT_KERNEL(gemmTilesGatherT64x64)

// C = A B for float operands through the tf32 tiles, one TM x TN tile per
// block of a 1-D grid, with the scalars, buffers (A and B float) and
// layouts of gemmBf16Tiles; `which` 0 runs gemmTileTf32, 1 gemmTile3xTf32,
// 2 gemmTile (fp32 FMA), 3, 4 and 5 gemmRows with the operands rounded to
// fp32, bf16 and tf32 (M at most kGemmRowsMax: blocks of the first tile
// row, n0 = blockIdx.x * TN).
template <int TM, int TN, int LAYOUT>
__device__ void gemmTf32Tiles(const moec::KernelParams &p) {
  const int64_t M = scalarArg(p, 0), N = scalarArg(p, 1), K = scalarArg(p, 2);
  const int64_t lda = scalarArg(p, 3), ldb = scalarArg(p, 4);
  const int64_t which = scalarArg(p, 5);
  gptr<const float> A = bufferArg<const float>(p, 0);
  gptr<const float> B = bufferArg<const float>(p, 1);
  gptr<float> C = bufferArg<float>(p, 2);
  gptr<const int32_t> orderA = bufferArg<const int32_t>(p, 3);
  gptr<const int32_t> orderB = bufferArg<const int32_t>(p, 4);
  const int64_t tilesN = (N + TN - 1) / TN;
  const int64_t m0 = blockIdx.x / tilesN * TM, n0 = blockIdx.x % tilesN * TN;
  const auto store = [=](int64_t m, int64_t n, float v) { C[m * N + n] = v; };
  const auto run = [&](const auto &loadA, const auto &loadB) {
    using R = moec::RowsRounding;
    if (which == 0)
      moec::gemmTileTf32<TM, TN, 16, 256>(m0, n0, M, N, K, loadA, loadB,
                                          store);
    else if (which == 1)
      moec::gemmTile3xTf32<TM, TN, 16, 256>(m0, n0, M, N, K, loadA, loadB,
                                            store);
    else if (which == 2)
      moec::gemmTile<TM, TN, 16, 256>(m0, n0, M, N, K, loadA, loadB, store);
    else if (which == 3)
      moec::gemmRows<TN, 256, R::Fp32>(n0, M, N, K, loadA, loadB, store);
    else if (which == 4)
      moec::gemmRows<TN, 256, R::Bf16>(n0, M, N, K, loadA, loadB, store);
    else
      moec::gemmRows<TN, 256, R::Tf32>(n0, M, N, K, loadA, loadB, store);
  };
  withLayout<LAYOUT>(A, B, lda, ldb, orderA, orderB, run);
}
extern "C" __global__ void gemmTf32Rows64x64(const moec::KernelParams p) {
  gemmTf32Tiles<64, 64, 0>(p);
}
MOEC_EMU_EXPORT_KERNEL(gemmTf32Rows64x64)
extern "C" __global__ void gemmTf32Cols128x32(const moec::KernelParams p) {
  gemmTf32Tiles<128, 32, 1>(p);
}
MOEC_EMU_EXPORT_KERNEL(gemmTf32Cols128x32)
extern "C" __global__ void gemmTf32Gather64x32(const moec::KernelParams p) {
  gemmTf32Tiles<64, 32, 2>(p);
}
MOEC_EMU_EXPORT_KERNEL(gemmTf32Gather64x32)
extern "C" __global__ void gemmTf32GatherT64x64(const moec::KernelParams p) {
  gemmTf32Tiles<64, 64, 3>(p);
}
MOEC_EMU_EXPORT_KERNEL(gemmTf32GatherT64x64)

// cvtRnaTf32 of every input: out[i] is the tf32 word of x[i].
extern "C" __global__ void roundTf32(const moec::KernelParams p) {
  gptr<const float> x = bufferArg<const float>(p, 0);
  gptr<uint32_t> out = bufferArg<uint32_t>(p, 1);
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = moec::cvtRnaTf32(x[i]);
}
MOEC_EMU_EXPORT_KERNEL(roundTf32)

// One m16n8k8 tf32 tile per warp: D = C + A B with A [tile][16][8] and B
// [tile][8][8] full fp32 values (the mma uses their top 19 bits).
extern "C" __global__ void mmaTf32(const moec::KernelParams p) {
  gptr<const float> A = bufferArg<const float>(p, 0);
  gptr<const float> B = bufferArg<const float>(p, 1);
  gptr<const float> C = bufferArg<const float>(p, 2);
  gptr<float> D = bufferArg<float>(p, 3);
  const unsigned lane = threadIdx.x % 32;
  const unsigned tile = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const unsigned g = lane / 4, q = lane % 4;
  const unsigned a0 = tile * 128, b0 = tile * 64, c0 = tile * 128;
  const uint32_t fa[4] = {__float_as_uint(A[a0 + g * 8 + q]),
                          __float_as_uint(A[a0 + (g + 8) * 8 + q]),
                          __float_as_uint(A[a0 + g * 8 + q + 4]),
                          __float_as_uint(A[a0 + (g + 8) * 8 + q + 4])};
  const uint32_t fb[2] = {__float_as_uint(B[b0 + q * 8 + g]),
                          __float_as_uint(B[b0 + (q + 4) * 8 + g])};
  const float fc[4] = {C[c0 + g * 8 + 2 * q], C[c0 + g * 8 + 2 * q + 1],
                       C[c0 + (g + 8) * 8 + 2 * q],
                       C[c0 + (g + 8) * 8 + 2 * q + 1]};
  float d[4];
  moec::mma_m16n8k8_tf32(d, fa, fb, fc);
  D[c0 + g * 8 + 2 * q] = d[0];
  D[c0 + g * 8 + 2 * q + 1] = d[1];
  D[c0 + (g + 8) * 8 + 2 * q] = d[2];
  D[c0 + (g + 8) * 8 + 2 * q + 1] = d[3];
}
MOEC_EMU_EXPORT_KERNEL(mmaTf32)

// The math functions of the device library's subset, float and double.
extern "C" __global__ void mathFunctions(const moec::KernelParams p) {
  gptr<const float> x = bufferArg<const float>(p, 0);
  gptr<float> y = bufferArg<float>(p, 1);
  gptr<double> yd = bufferArg<double>(p, 2);
  const unsigned t = threadIdx.x;
  const float v = __ldg(x + t), w = __ldg(&x[(t + 1) % blockDim.x]);
  const float a = fabsf(v);
  gptr<float> o = y + 17 * t;
  o[0] = expf(v);
  o[1] = logf(a + 1.0f);
  o[2] = log1pf(a);
  o[3] = tanhf(v);
  o[4] = erff(v);
  o[5] = sqrtf(a);
  o[6] = rsqrtf(a + 1.0f);
  o[7] = fmaxf(v, 0.5f);
  o[8] = fminf(v, 0.5f);
  o[9] = __expf(v);
  o[10] = __logf(a + 1.0f);
  o[11] = __frcp_rn(v + 10.0f);
  o[12] = __fdividef(v, 3.0f);
  o[13] = __fmaf_rn(v, w, 1.0f);
  o[14] = __uint_as_float(__float_as_uint(v) ^ 0x80000000u);
  o[15] = __int_as_float(__float_as_int(v) & 0x7fffffff);
  o[16] = __saturatef(v);
  const double d = v, e = w;
  gptr<double> od = yd + 11 * t;
  od[0] = exp(d);
  od[1] = log(fabs(d) + 1.0);
  od[2] = log1p(fabs(d));
  od[3] = tanh(d);
  od[4] = erf(d);
  od[5] = sqrt(fabs(d));
  od[6] = rsqrt(fabs(d) + 1.0);
  od[7] = fmax(d, 0.5);
  od[8] = fmin(d, 0.5);
  od[9] = __fma_rn(d, e, 1.0);
  od[10] = __drcp_rn(d + 10.0);
}
MOEC_EMU_EXPORT_KERNEL(mathFunctions)

// Scheduler load: ten barriers per thread.
extern "C" __global__ void __launch_bounds__(1024)
barrierLoop(const moec::KernelParams p) {
  gptr<int> y = bufferArg<int>(p, 0);
  MOEC_SHARED(int, s, 1024);
  const unsigned t = threadIdx.x, n = blockDim.x;
  int v = static_cast<int>(t);
  for (int r = 0; r < 5; ++r) {
    s[t] = v;
    __syncthreads();
    v = s[(t + 1) % n] + 1;
    __syncthreads();
  }
  y[static_cast<int64_t>(blockIdx.x) * n + t] = v;
}
MOEC_EMU_EXPORT_KERNEL(barrierLoop)

// Scheduler load: 64 shuffles per thread.
extern "C" __global__ void shuffleLoop(const moec::KernelParams p) {
  gptr<float> y = bufferArg<float>(p, 0);
  float v = static_cast<float>(threadIdx.x);
  for (int r = 0; r < 16; ++r)
    for (int o = 1; o < 32; o <<= 1)
      if (o < 16)
        v = 0.5f * (v + __shfl_xor_sync(0xffffffffu, v, o));
  y[blockIdx.x * blockDim.x + threadIdx.x] = v;
}
MOEC_EMU_EXPORT_KERNEL(shuffleLoop)

// Scheduler load: no synchronization at all.
extern "C" __global__ void plainCopy(const moec::KernelParams p) {
  gptr<const float> x = bufferArg<const float>(p, 0);
  gptr<float> y = bufferArg<float>(p, 1);
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  y[i] = x[i];
}
MOEC_EMU_EXPORT_KERNEL(plainCopy)
)cuda";

const char *const kFaultyKernels = R"cuda(
// Reads x[n] for the last thread.
extern "C" __global__ void offByOne(const moec::KernelParams p) {
  gptr<const float> x = bufferArg<const float>(p, 0);
  gptr<float> y = bufferArg<float>(p, 1);
  const int64_t n = scalarArg(p, 0);
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = x[i + 1];
}
MOEC_EMU_EXPORT_KERNEL(offByOne)

// s[63] is never written but thread 62 reads it.
extern "C" __global__ void unwrittenShared(const moec::KernelParams p) {
  gptr<float> y = bufferArg<float>(p, 0);
  MOEC_SHARED(float, s, 64);
  const unsigned t = threadIdx.x;
  if (t < 63)
    s[t] = static_cast<float>(t);
  __syncthreads();
  y[t] = s[(t + 1) % 64];
}
MOEC_EMU_EXPORT_KERNEL(unwrittenShared)

// Reads the upper half of dynamic shared memory, which nobody wrote.
extern "C" __global__ void unwrittenDynamic(const moec::KernelParams p) {
  gptr<float> y = bufferArg<float>(p, 0);
  MOEC_DYNAMIC_SHARED(float, buf);
  const unsigned t = threadIdx.x, n = blockDim.x;
  buf[t] = 1.0f;
  __syncthreads();
  y[t] = buf[n + t];
}
MOEC_EMU_EXPORT_KERNEL(unwrittenDynamic)

// Lanes 0-15 shuffle among themselves but read lanes 16-31.
extern "C" __global__ void shuffleOutsideMask(const moec::KernelParams p) {
  gptr<int> out = bufferArg<int>(p, 0);
  const int lane = threadIdx.x % 32;
  if (lane < 16)
    out[lane] = __shfl_sync(0x0000ffffu, lane, lane + 16);
}
MOEC_EMU_EXPORT_KERNEL(shuffleOutsideMask)

// Sums one element past the end of a shared array.
extern "C" __global__ void sharedOverrun(const moec::KernelParams p) {
  gptr<float> y = bufferArg<float>(p, 0);
  MOEC_SHARED(float, vals, 32);
  vals[threadIdx.x] = 1.0f;
  __syncthreads();
  y[threadIdx.x] = sumFirst(vals, 33);
}
MOEC_EMU_EXPORT_KERNEL(sharedOverrun)

// Half a warp calls ldmatrix; the other half has returned.
extern "C" __global__ void ldmatrixHalfWarp(const moec::KernelParams p) {
  gptr<uint32_t> out = bufferArg<uint32_t>(p, 0);
  MOEC_SHARED(uint4, tile, 32);
  tile[threadIdx.x] = make_uint4(1, 2, 3, 4);
  __syncthreads();
  if (threadIdx.x >= 16)
    return;
  uint32_t d[4];
  moec::ldmatrixX4(d, tile + threadIdx.x);
  out[threadIdx.x] = d[0];
}
MOEC_EMU_EXPORT_KERNEL(ldmatrixHalfWarp)

// cp.async from an address 8 bytes into a buffer.
extern "C" __global__ void cpAsyncMisaligned(const moec::KernelParams p) {
  gptr<const uint32_t> x = bufferArg<const uint32_t>(p, 0);
  gptr<uint32_t> y = bufferArg<uint32_t>(p, 1);
  MOEC_SHARED(uint4, tile, 32);
  moec::cpAsync16(tile + threadIdx.x, x + 4 * threadIdx.x + 2, 16);
  moec::cpAsyncCommit();
  moec::cpAsyncWait<0>();
  __syncthreads();
  const uint4 v = tile[threadIdx.x];
  y[threadIdx.x] = v.x;
}
MOEC_EMU_EXPORT_KERNEL(cpAsyncMisaligned)

// Writes one float past the end of the output.
extern "C" __global__ void writePastEnd(const moec::KernelParams p) {
  gptr<float> y = bufferArg<float>(p, 0);
  y[threadIdx.x] = 1.0f;
}
MOEC_EMU_EXPORT_KERNEL(writePastEnd)
)cuda";

} // namespace moec::emu::test
