//===- CostModel.h - FLOPs, bytes and roofline time per kernel --*- C++ -*-===//
//
// A static cost model of a bundle's plan: for every fused kernel the
// floating-point work, the fewest bytes it must move through device memory
// (what it reads from, and writes for, other kernels), its arithmetic
// intensity, whether it is compute- or memory-bound, and the time it needs
// at a device's ceilings; for the program the totals, and the traffic of
// the same graph run one op per kernel. `moec compile --report` prints it.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_COSTMODEL_H
#define MOEC_COSTMODEL_H

#include "moec/Bundle.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace moec {

/// The throughput a kernel can reach at best.
struct DeviceCeilings {
  std::string name = "H100 SXM";
  /// Dense tensor-core bf16 FLOP/s, and CUDA-core f32 FLOP/s (f32 models
  /// stay off the tensor cores unless they set f32_matmul).
  double bf16FlopsPerSecond = 800e12, f32FlopsPerSecond = 60e12;
  /// f32 models with f32_matmul = tf32; tf32x3 runs three mma per product,
  /// so a third of it.
  double tf32FlopsPerSecond = 400e12;
  double bytesPerSecond = 3.0e12;
};

struct KernelCost {
  /// The generated kernel (its first launch), its group kind and the tiles
  /// of its kernels (each kernel's by its phase where they differ).
  std::string kernel, kind, tiles;
  /// The ops it fuses, and the spec location of the first.
  std::vector<std::string> ops;
  std::string location;
  double flops = 0;
  /// Distinct values read from outside the kernel plus values it writes
  /// that a later kernel (or the program's results) reads.
  double bytes = 0;
  /// The same ops run one per kernel, as an eager framework runs them:
  /// every op reads and writes in full, and the expert FFN and attention
  /// as their separate steps (gather, products, activation, combine;
  /// scores, softmax, product) with their intermediates in memory.
  double opByOpBytes = 0;
  /// At the ceilings: max(flops / FLOP/s, bytes / bandwidth).
  double seconds = 0;
  bool computeBound = false;
  /// The GEMM launches of the group: the kernel, whether the cuda device
  /// hands it to cuBLASLt, and the plan's reason.
  struct GemmRoute {
    std::string kernel;
    bool library = false;
    std::string why;
  };
  std::vector<GemmRoute> gemms;
};

struct ProgramCost {
  std::string program;
  /// The sizes the symbolic dimensions were given.
  std::map<std::string, int64_t> sizes;
  std::vector<KernelCost> kernels;
  double flops = 0, bytes = 0, opByOpBytes = 0, seconds = 0;
};

/// Costs every fused kernel of `program` with the symbols bound to `sizes`
/// (a missing symbol throws moec::Error naming it). Needs a bundle with
/// CUDA kernels.
ProgramCost programCost(const Bundle &bundle, const std::string &program,
                        const std::map<std::string, int64_t> &sizes,
                        const DeviceCeilings &ceilings = {});

/// The sizes a report uses by default: B = the training batch, S and T =
/// the training sequence length.
std::map<std::string, int64_t> defaultSizes(const Bundle &bundle);

/// The report `moec compile --report` prints: how tiles are chosen, one row
/// per kernel of `program`, and the totals of every program.
std::string costReport(const Bundle &bundle, const std::string &program,
                       const std::map<std::string, int64_t> &sizes,
                       const DeviceCeilings &ceilings = {});

} // namespace moec

#endif // MOEC_COSTMODEL_H
