//===- Common.h - helpers shared by the cpu kernels ------------*- C++ -*-===//
//
// Entry checks that turn a planner bug into a precise error instead of memory
// corruption, float dtype dispatch, `[..., d]` row views, a gemm wrapper and
// deterministic column sums.
//
// Threading rules every kernel follows: validation (anything that may throw)
// happens before a parallel region; each parallel iteration owns its output
// elements; and reductions over tokens run in a fixed order inside one
// iteration, so results never depend on the thread count. Kernels whose
// outputs may alias inputs (optimizer updates, kv_cache_write) read element i
// of every input before writing element i of any output.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CPU_KERNELS_COMMON_H
#define MOEC_RUNTIME_CPU_KERNELS_COMMON_H

#include "cpu/Kernel.h"
#include "moec/support/MoeDefs.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace moec::cpu {

/// The dtype of a C++ element type.
template <typename T> constexpr DType dtypeOf() {
  if constexpr (std::is_same_v<T, float>)
    return DType::F32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::F64;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::I32;
  else
    return DType::I64;
}

/// Calls `fn(T{})` with T = float or double for `view`'s dtype; fails for
/// any other dtype.
template <typename Fn>
void dispatchFloat(const KernelContext &ctx, const TensorView &view,
                   std::string_view name, Fn &&fn) {
  switch (view.dtype) {
  case DType::F32:
    fn(float{});
    return;
  case DType::F64:
    fn(double{});
    return;
  default:
    break;
  }
  ctx.fail(std::string("the cpu device computes in f32 or f64, but ") +
           std::string(name) + " is " + dtypeName(view.dtype));
}

/// Fails unless the step has `minIn..maxIn` inputs and `minOut..maxOut`
/// outputs.
/// The value of enum E that the step's string attribute `attr` spells;
/// anything else fails, listing the spellings E accepts.
template <typename E>
E enumAttr(const KernelContext &ctx, std::string_view attr) {
  std::string text = ctx.attrs.getString(attr);
  if (std::optional<E> value = defs::EnumTraits<E>::parse(text))
    return *value;
  ctx.fail("unknown " + std::string(defs::EnumTraits<E>::kDescription) +
           " '" + text + "' in attribute '" + std::string(attr) +
           "' (expected one of " +
           std::string(defs::EnumTraits<E>::kSpellings) + ")");
}

void checkArity(const KernelContext &ctx, size_t minIn, size_t maxIn,
                size_t minOut, size_t maxOut);

/// Input i, failing with its operand name when it is absent.
const TensorView &requireInput(const KernelContext &ctx, size_t i,
                               std::string_view name);

void expectDType(const KernelContext &ctx, const TensorView &view, DType dtype,
                 std::string_view name);
void expectShape(const KernelContext &ctx, const TensorView &view,
                 const Shape &shape, std::string_view name);
void expectRank(const KernelContext &ctx, const TensorView &view, int64_t rank,
                std::string_view name);

/// A `[..., width]` tensor seen as `rows` rows of `width` elements.
struct RowShape {
  int64_t rows;
  int64_t width;
};
RowShape rowShape(const TensorView &view);

/// Fails unless `view` is `[..., width]` with `rows` rows (any split of the
/// leading dimensions, so `[B, S, d]` and `[B*S, d]` both match) and has
/// `dtype`. Absent views (outputs nobody reads) pass.
void expectRows(const KernelContext &ctx, const TensorView &view, int64_t rows,
                int64_t width, DType dtype, std::string_view name);

/// Fails unless `view` holds `count` elements of `dtype` (absent views pass).
void expectNumel(const KernelContext &ctx, const TensorView &view,
                 int64_t count, DType dtype, std::string_view name);

/// Whether the bytes of two present views share an address.
inline bool viewsOverlap(const TensorView &a, const TensorView &b) {
  if (!a.present() || !b.present())
    return false;
  const char *aBegin = static_cast<const char *>(a.data),
             *bBegin = static_cast<const char *>(b.data);
  return aBegin < bBegin + b.nbytes() && bBegin < aBegin + a.nbytes();
}

/// The value of a 0-d i64 operand.
int64_t scalarInt(const KernelContext &ctx, const TensorView &view,
                  std::string_view name);
/// The value of a 0-d f32 or f64 operand.
double scalarFloat(const KernelContext &ctx, const TensorView &view,
                   std::string_view name);

/// Fails unless every expert index (with `slot`, every kept one: slot >= 0)
/// is in [0, numExperts).
void checkExpertIndices(const KernelContext &ctx, const TensorView &expert,
                        const TensorView *slot, int64_t numExperts);

/// "[1, 2]": the multi-index of flat element `flat` of `shape`.
std::string indexString(const Shape &shape, int64_t flat);

/// Row-major C = alpha * op(A) * op(B) + beta * C with op(A) `[m, k]` and
/// op(B) `[k, n]` (OpenBLAS sgemm/dgemm; sgemv/dgemv where C is one row or
/// one column). Handles empty sizes.
template <typename T>
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, T alpha,
          const T *a, int64_t lda, const T *b, int64_t ldb, T beta, T *c,
          int64_t ldc);

/// gemm on the calling thread, in one BLAS call: for kernels that already
/// run in a parallel loop. Sizes must be positive.
template <typename T>
void gemmSerial(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                T alpha, const T *a, int64_t lda, const T *b, int64_t ldb,
                T beta, T *c, int64_t ldc);

/// 64-byte aligned host blocks kept for reuse: take() hands out the
/// smallest idle block that fits, so that steady-state runs reuse the same
/// (already faulted-in) pages.
class BlockPool {
public:
  struct Block {
    void *data = nullptr;
    size_t bytes = 0;
  };

  BlockPool() = default;
  BlockPool(const BlockPool &) = delete;
  BlockPool &operator=(const BlockPool &) = delete;
  /// Frees the idle blocks; taken ones belong to their holder until given.
  ~BlockPool();

  /// A block of at least `bytes`. When none fits and `replaceLargest`, the
  /// largest idle block is freed first, so that the pool holds about its
  /// high-water mark rather than every size ever asked for. `what` names the
  /// use in the out-of-memory error.
  Block take(size_t bytes, bool replaceLargest, const char *what);
  /// Returns a block from take() to the idle ones.
  void give(Block block) { idle.push_back(block); }

private:
  std::vector<Block> idle;
};

/// Uninitialised temporary buffers that stay allocated on the calling thread
/// between kernel calls, so a kernel's large temporaries (the expert FFN's
/// gathered matrices) do not page-fault afresh on every call. Buffers are
/// distinct until the Scratch is destroyed, which returns them to the
/// thread's pool; the pool keeps its high-water mark.
class Scratch {
public:
  Scratch() = default;
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  ~Scratch();

  /// `count` uninitialised elements of T, 64-byte aligned.
  template <typename T> T *get(int64_t count) {
    return static_cast<T *>(getBytes(static_cast<size_t>(count) * sizeof(T)));
  }

private:
  void *getBytes(size_t bytes);
  std::vector<BlockPool::Block> taken;
};

/// Below this many elementary operations a loop runs on the calling thread:
/// forking costs more than it saves, and far more when the cores are busy.
constexpr int64_t kMinParallelWork = 1 << 15;

/// Parallel-for over [0, n) with OpenMP (static schedule) when the loop does
/// at least kMinParallelWork operations, `workPerItem` per iteration.
template <typename Fn>
void parallelFor(int64_t n, int64_t workPerItem, Fn &&fn) {
  // Targets built without OpenMP (the sanitizer build, tools that include
  // this header) run the loop as it is, without an unknown pragma.
#ifdef _OPENMP
  const bool parallel = n > 1 && n * workPerItem >= kMinParallelWork;
#pragma omp parallel for schedule(static) if (parallel)
#else
  (void)workPerItem;
#endif
  for (int64_t i = 0; i < n; ++i)
    fn(i);
}

/// The sum over c < n of term(c), in double, as eight interleaved partial
/// sums (term c goes to sum c % 8) added in a fixed tree: the adds do not
/// wait on each other, and the order depends on n alone.
template <typename Fn> double laneSum(int64_t n, Fn &&term) {
  constexpr int64_t kLanes = 8;
  double acc[kLanes] = {};
  int64_t full = n - n % kLanes;
  for (int64_t c = 0; c < full; c += kLanes)
    for (int64_t j = 0; j < kLanes; ++j)
      acc[j] += term(c + j);
  for (int64_t c = full; c < n; ++c)
    acc[c - full] += term(c);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
         ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/// outs[i][c] = sum over rows r, ascending, of terms(r, c)[i] for N sums
/// in one pass over the rows (terms returns std::array<double, N>; a null
/// outs[i] is not stored), accumulated in double. Parallel over blocks of
/// columns only, so the order of every sum is fixed whatever the thread
/// count.
template <size_t N, typename T, typename Fn>
void columnReduceEach(int64_t rows, int64_t width,
                      const std::array<T *, N> &outs, Fn &&terms) {
  constexpr int64_t kBlock = 64;
  int64_t blocks = (width + kBlock - 1) / kBlock;
  parallelFor(blocks, kBlock * rows * static_cast<int64_t>(N),
              [&](int64_t blk) {
                int64_t c0 = blk * kBlock, c1 = std::min(width, c0 + kBlock);
                double acc[N][kBlock] = {};
                for (int64_t r = 0; r < rows; ++r)
                  for (int64_t c = c0; c < c1; ++c) {
                    const std::array<double, N> t = terms(r, c);
                    for (size_t i = 0; i < N; ++i)
                      acc[i][c - c0] += t[i];
                  }
                for (size_t i = 0; i < N; ++i)
                  if (outs[i])
                    for (int64_t c = c0; c < c1; ++c)
                      outs[i][c] = static_cast<T>(acc[i][c - c0]);
              });
}

/// out[c] = sum over rows r, ascending, of term(r, c) (see
/// columnReduceEach).
template <typename T, typename Fn>
void columnReduce(int64_t rows, int64_t width, T *out, Fn &&term) {
  columnReduceEach<1>(
      rows, width, std::array<T *, 1>{out},
      [&](int64_t r, int64_t c) { return std::array<double, 1>{term(r, c)}; });
}

/// out[c] = sum over rows of in[r * width + c] (see columnReduce).
template <typename T>
void columnSums(const T *in, int64_t rows, int64_t width, T *out) {
  columnReduce(rows, width, out, [&](int64_t r, int64_t c) -> double {
    return in[r * width + c];
  });
}

} // namespace moec::cpu

#endif // MOEC_RUNTIME_CPU_KERNELS_COMMON_H
