//===- GroupEmitter.h - emitting the kernels of one group -------*- C++ -*-===//
//
// The shared machinery of every kernel kind: which values enter and leave
// the group, the argument table of the kernel being written (plan buffers,
// scratch buffers, run-time sizes), its launch shape, and the translation of
// elementwise ops into expressions for fused epilogues and prologues.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TARGET_CUDA_GROUPEMITTER_H
#define MOEC_TARGET_CUDA_GROUPEMITTER_H

#include "CodeWriter.h"
#include "moec/Target/CudaEmitter.h"
#include "moec/Analysis/KernelGroups.h"
#include "moe/IR/MoeOps.h"
#include "llvm/ADT/DenseMap.h"
#include <map>

namespace mlir::moe::cuda {

/// What all groups of one program share.
struct ProgramContext {
  std::string program;
  llvm::DenseMap<Value, SymShape> shapes;
  llvm::DenseMap<Value, int64_t> buffers;
  int64_t planBuffers = 0;
  ProgramCode code;
  /// Scratch ids by "type:shape", so groups reuse each other's scratch.
  std::map<std::string, llvm::SmallVector<int64_t>> scratchPool;
  KernelTable *kernels = nullptr;
};

class GroupEmitter {
public:
  GroupEmitter(ProgramContext &program, const KernelGroup &group);

  const KernelGroup &group() const { return grp; }
  Operation *first() const { return grp.ops.front(); }
  /// The group's tiles (the moe.kernel verifier guarantees every field its
  /// kind uses).
  TilesAttr tiles() const { return grp.tiles; }
  /// A tile field of tiles() that the kind uses.
  int64_t tile(std::optional<int64_t> field) const;

  bool inGroup(Value v) const;
  /// Whether anything outside the group reads `v` (it must be stored).
  bool escapes(Value v) const;
  /// Whether `a` and `b` share a plan buffer (an update in place).
  bool sameBuffer(Value a, Value b) const;
  const SymShape &shapeOf(Value v) const;
  SymDim numElements(Value v) const;
  /// The number of rows of a `[..., d]` value: all dimensions but the last.
  SymDim rowsOf(Value v) const;

  //===--- The kernel being written -------------------------------------===//

  /// Starts a new kernel (phase) of the group; argument tables reset.
  void beginKernel(StringRef phase);
  /// The kernel argument index of a value's plan buffer.
  int buffer(Value v);
  /// A new scratch buffer private to this group (pooled across groups);
  /// returns its buffer id, for argument() in any kernel of the group.
  /// Buffers are pooled only with others of the same `purpose`: a ticket
  /// counter must stay zero between launches, so it never holds data.
  int64_t scratch(Type elementType, const SymShape &shape,
                  StringRef purpose = "data");
  /// The kernel argument index of a buffer id.
  int argument(int64_t bufferId);
  /// A kernel argument of its own that passes a null pointer.
  int nullArgument();
  /// A run-time size.
  int scalar(const SymDim &value);
  /// A size in an argument slot of its own even when an earlier slot holds
  /// the same value: kernels that differ only in such sizes then have the
  /// same text, and the kernel table keeps one of them.
  int ownScalar(const SymDim &value);
  /// Declares `const int64_t name` holding the run-time size `value`, in a
  /// slot of its own with `ownSlot` (see ownScalar).
  void declareScalar(CodeWriter &w, StringRef name, const SymDim &value,
                     bool ownSlot = false);
  /// `const T *` (or `T *`) accessor expression for buffer argument `arg`.
  std::string bufferExpr(int arg, Type elementType, bool writable) const;
  /// Declares a local `name` bound to a value's buffer.
  void declare(CodeWriter &w, StringRef name, Value v, bool writable);
  /// Declares a fresh local (`prefix` and a number) bound to a value's
  /// buffer and returns its name.
  std::string declared(CodeWriter &w, Value v, bool writable,
                       StringRef prefix);
  /// Declares a fresh local like declared() that holds a null pointer of
  /// `elementType`, passed in an argument of its own (nullArgument), for a
  /// kernel shared by programs of which only some have the buffer.
  std::string declaredNull(CodeWriter &w, Type elementType, bool writable,
                           StringRef prefix);
  /// Finishes the kernel with `body` (the statements of the __global__) and
  /// records its launch. A kernel with more buffers or scalars than the
  /// kernel ABI allows is reported at the group and fails the group.
  void finishKernel(const std::string &body, GridDim x, GridDim y, GridDim z,
                    int64_t threads, int64_t sharedBytes = 0);
  /// Records how the next finished kernel's GEMM is computed (see
  /// GemmPath); its argument indices refer to that kernel's table.
  void setGemmPath(GemmPath path) { pendingGemm = std::move(path); }
  /// The next finished kernel needs up to `registers` registers a thread:
  /// its launch bounds then ask for as few resident blocks as leave it
  /// that many, instead of the 512 resident threads (128 registers) every
  /// other kernel keeps.
  void setRegisterBudget(int64_t registers) { pendingRegisters = registers; }
  /// The next finished kernel's header names `fields` ("head_dim=64
  /// tile_q=64 ...") as its tiles instead of the group's: a group whose
  /// kernels take different tiles (the attention gradient's dq and dk/dv)
  /// then says which each one runs.
  void setKernelTiles(std::string fields) { pendingTiles = std::move(fields); }

  /// Elementwise ops as expressions: emits `const T vN = ...;` for `op`
  /// given the expressions of its operands and the flat element `index`,
  /// and returns vN. Fails for ops that are not elementwise.
  FailureOr<std::string> elementwise(CodeWriter &w, Operation *op,
                                     llvm::ArrayRef<std::string> operands,
                                     StringRef index);
  std::string fresh(StringRef prefix = "v");
  /// Numbers fresh() names from the start again, for a kernel that must
  /// read like an earlier one of the group (none of its names may outlive
  /// the kernel).
  void restartNames() { counter = 0; }
  /// Whether a kernel of the group broke the kernel ABI's limits.
  bool exceededAbi() const { return abiExceeded; }

  InFlightDiagnostic error(const Twine &message) const;

private:
  /// Declares a local `local` bound to kernel argument `arg`.
  void declareArgument(CodeWriter &w, StringRef local, int arg,
                       Type elementType, bool writable);

  ProgramContext &program;
  const KernelGroup &grp;
  std::string phaseName, name;
  llvm::SmallVector<int64_t> args;
  llvm::SmallVector<SymDim> scalars;
  llvm::DenseMap<int64_t, int> argOf;
  /// Scratch ids this group took from the pool, returned after the group.
  llvm::SmallVector<std::pair<std::string, int64_t>> taken;
  int counter = 0;
  bool abiExceeded = false;
  std::optional<GemmPath> pendingGemm;
  std::optional<int64_t> pendingRegisters;
  std::optional<std::string> pendingTiles;

public:
  ~GroupEmitter();
};

/// The device library's name of a dialect enum value,
/// "moec::Activation::GeluTanh": defs.cuh and the dialect's enums are
/// generated from the same ODS, so the values agree.
std::string deviceEnum(Activation value);
std::string deviceEnum(GateWeighting value);
std::string deviceEnum(Capacity value);
std::string deviceEnum(BalanceLoss value);
std::string deviceEnum(LrSchedule value);
std::string deviceEnum(PoolWindow value);

/// The element type of a tensor value.
Type elementTypeOf(Value v);
/// The device type a tensor value's elements are stored as ("float",
/// "moec::bf16", ...).
std::string storageTypeOf(Value v);

/// The f32_matmul setting of the module holding `v`: "fp32" (also when the
/// module has none), "tf32" or "tf32x3".
StringRef f32MatmulOf(Value v);

/// The counting sort's tiles and block size: TILES * numKeys counts, and
/// every tile walked in chunks of kSortThreads elements.
constexpr int64_t kSortTiles = 64, kSortThreads = 256;

/// The scratch buffers of a counting sort (runtime/device/sort.cuh), all
/// int32: `order` holds the element indices grouped by key, stably, and
/// `offsets` (numKeys + 1) where each key's run starts. Without the scatter
/// there is no `order` (-1), and `offsets` holds each key's total.
struct CountingSort {
  int64_t counts, rank, totals, offsets, order;
};

/// The scratch of a counting sort of n keys in [0, numKeys), with the
/// `order` buffer only for a sort that scatters.
CountingSort countingSortScratch(GroupEmitter &e, const SymDim &n,
                                 int64_t numKeys, bool scatter);

/// Emits sort.cuh's launches over the n int32 keys that `keys` (called in
/// each kernel) names, as phases `prefix`rank, count, offsets and scatter
/// of the group; without `scatter`, only rank and count: then counts[t][k]
/// holds the keys k in the tiles before t and offsets[k] their total.
void emitCountingSortPhases(GroupEmitter &e, const CountingSort &s,
                            StringRef prefix, const SymDim &n,
                            int64_t numKeys,
                            llvm::function_ref<std::string(CodeWriter &)> keys,
                            bool scatter);

/// Emits the four launches of sort.cuh's stable counting sort of the int32
/// `keys` in [0, numKeys) (others are left out), as phases "sort_*" of the
/// group, and returns its buffers for the kernels that follow.
CountingSort emitCountingSort(GroupEmitter &e, Value keys, int64_t numKeys);

/// Writes `lines`, each one statement, with every run of two or more that
/// differ only in argument slots (`(p, N)`), each slot stepping by a fixed
/// stride from one line to the next, as one loop over the call number.
void emitRolledCalls(CodeWriter &w, llvm::ArrayRef<std::string> lines);

/// Emits the kernels of one group by kind; fails with a located error for
/// a kind or op the emitter does not support.
LogicalResult emitGroup(GroupEmitter &emitter);

// Per-kind emitters.
LogicalResult emitElementwiseGroup(GroupEmitter &e);
LogicalResult emitGemmGroup(GroupEmitter &e);
LogicalResult emitGemmGradGroup(GroupEmitter &e);
LogicalResult emitNormGroup(GroupEmitter &e);
LogicalResult emitNormGradGroup(GroupEmitter &e);
LogicalResult emitEmbeddingGroup(GroupEmitter &e);
LogicalResult emitEmbeddingGradGroup(GroupEmitter &e);
LogicalResult emitPositionsGradGroup(GroupEmitter &e);
LogicalResult emitKvWriteGroup(GroupEmitter &e);
/// Before a group's cache writes: a kernel each (phases copy, copy1, ...)
/// that copies the cache a write reads into the buffer of its result, for
/// the caches the plan keeps alive (none when every write is in place).
/// Returns how many it emitted.
int emitCacheCopies(GroupEmitter &e, ArrayRef<KvCacheWriteOp> writes,
                    int64_t threads, int64_t perBlock);
LogicalResult emitAttentionGroup(GroupEmitter &e);
LogicalResult emitAttentionGradGroup(GroupEmitter &e);
LogicalResult emitRouterGroup(GroupEmitter &e);
LogicalResult emitRouterGradGroup(GroupEmitter &e);
LogicalResult emitSwitchLossGradGroup(GroupEmitter &e);
LogicalResult emitZLossGradGroup(GroupEmitter &e);
LogicalResult emitExpertsGroup(GroupEmitter &e);
LogicalResult emitExpertsGradGroup(GroupEmitter &e);
LogicalResult emitExpertMapGroup(GroupEmitter &e);
LogicalResult emitExpertMapGradGroup(GroupEmitter &e);
LogicalResult emitExpertReduceGroup(GroupEmitter &e);
LogicalResult emitExpertReduceGradGroup(GroupEmitter &e);
LogicalResult emitCvLossGroup(GroupEmitter &e);
LogicalResult emitCvLossGradGroup(GroupEmitter &e);
LogicalResult emitRoutingStatsGroup(GroupEmitter &e);
LogicalResult emitCrossEntropyGroup(GroupEmitter &e);
LogicalResult emitCrossEntropyGradGroup(GroupEmitter &e);
LogicalResult emitGlobalNormGroup(GroupEmitter &e);
LogicalResult emitOptimizerGroup(GroupEmitter &e);
LogicalResult emitRowScaleGroup(GroupEmitter &e);
LogicalResult emitRowScaleGradGroup(GroupEmitter &e);
LogicalResult emitFiniteOrMinGroup(GroupEmitter &e);
LogicalResult emitFiniteOrMinGradGroup(GroupEmitter &e);
LogicalResult emitBatchNormGroup(GroupEmitter &e);
LogicalResult emitBatchNormGradGroup(GroupEmitter &e);
LogicalResult emitWindowMeanGroup(GroupEmitter &e);
LogicalResult emitWindowMeanGradGroup(GroupEmitter &e);
LogicalResult emitHeadMixtureGradGroup(GroupEmitter &e);
LogicalResult emitSampleExpertGroup(GroupEmitter &e);
LogicalResult emitGateStatsGroup(GroupEmitter &e);

} // namespace mlir::moe::cuda

#endif // MOEC_TARGET_CUDA_GROUPEMITTER_H
