//===- CudaEmitter.h - fused groups -> CUDA kernels -------------*- C++ -*-===//
//
// Writes one __global__ per fused-group phase (see compiler/CODEGEN.md)
// around the device library, and describes how to launch it. Runs on a
// module that moe-fuse-kernels, moe-tile-kernels and moe-lower-to-plan have
// annotated.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TARGET_CUDAEMITTER_H
#define MOEC_TARGET_CUDAEMITTER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "moe/IR/SymbolicShape.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include <optional>
#include <string>
#include <vector>

namespace mlir::moe::cuda {

/// ceil(extent / perBlock) + extra blocks.
struct GridDim {
  SymDim extent = SymDim(1);
  int64_t perBlock = 1;
  int64_t extra = 0;
};

/// Which code computes a launch's GEMM, and why: the plan's record, shown
/// by `moec compile --report`. A dense GEMM that fuses nothing goes through
/// cuBLASLt on the cuda device where the library loads; the launch's own
/// kernel computes it everywhere else (emu, no cuBLASLt, MOEC_CUBLASLT=0).
struct GemmPath {
  bool library = false;
  std::string why;
  // Library GEMMs only: D[m x n] (row-major, ld n) = A[m x k] B[k x n]
  // (+ bias[n]); operands are kernel argument indices (bias -1: none),
  // each of A and B row- or column-major with its leading dimension.
  SymDim m = SymDim(0), n = SymDim(0), k = SymDim(0);
  int a = -1, b = -1, d = -1, bias = -1;
  bool aColMajor = false, bColMajor = false;
  int64_t lda = 0, ldb = 0;
  /// The accumulation: "f32" (f32 and bf16 operands), "tf32", "f64".
  std::string compute;
};

struct Launch {
  std::string kernel;
  GridDim grid[3];
  int64_t block[3] = {1, 1, 1};
  int64_t sharedBytes = 0;
  /// Buffer ids: plan buffers, or scratch buffers numbered after them.
  llvm::SmallVector<int64_t> buffers;
  llvm::SmallVector<SymDim> scalars;
  /// GEMM launches only.
  std::optional<GemmPath> gemm;
};

/// A buffer only kernels use (partial sums, the expert dispatch order, the
/// experts' hidden activations). Its id follows the plan's buffers.
struct Scratch {
  Type elementType;
  SymShape shape;
};

struct GroupCode {
  int64_t group;
  std::string kind;
  /// Plan step indices of the ops the group covers.
  llvm::SmallVector<int64_t> steps;
  std::vector<Launch> launches;
};

struct Kernel {
  std::string name;
  /// The kernel's own source; compiled after the device library.
  std::string source;
};

/// The kernels of a bundle. A kernel whose code equals an earlier one's up
/// to its name (the same group compiled into several programs: forward,
/// loss, train_step) is not added again; its launches use the earlier one,
/// so NVRTC and the emu device build each distinct kernel once.
class KernelTable {
public:
  /// Adds the kernel `name` whose source is `header` (comments) followed by
  /// `code`, where `code` spells the kernel's name as kNamePlaceholder.
  /// Returns the name its launches must use.
  std::string add(const std::string &name, const std::string &header,
                  const std::string &code);
  const std::vector<Kernel> &kernels() const { return list; }

  static constexpr const char *kNamePlaceholder = "@KERNEL@";

private:
  std::vector<Kernel> list;
  llvm::StringMap<std::string> nameByCode;
};

struct ProgramCode {
  std::vector<GroupCode> groups;
  std::vector<Scratch> scratch;
};

/// Emits the kernels of one planned entry function named `program`,
/// adding them to `kernels`. Reports unsupported ops at their location.
FailureOr<ProgramCode> emitProgram(func::FuncOp func, StringRef program,
                                   KernelTable &kernels);

} // namespace mlir::moe::cuda

#endif // MOEC_TARGET_CUDAEMITTER_H
