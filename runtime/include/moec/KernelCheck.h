//===- KernelCheck.h - generated kernels against the cpu oracle -*- C++ -*-===//
//
// Checks every generated kernel of a bundle on a device that runs them (emu,
// or cuda on a GPU) against the cpu device. For every program (forward,
// loss, backward, train_step, decode, ...) it makes fresh random inputs,
// parameters (their initialisation) and state, then runs the program one
// fused group at a time: the device under test gets the cpu's values of
// everything the group reads, the group's outputs are poisoned (NaN) so that
// an element a kernel forgets to write cannot pass, both devices run the
// group, and every buffer the group writes is compared. A difference is
// thus attributed to the group and its kernels, and never carried into the
// next group. Kernels no comparison exercised are reported as uncovered.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_KERNELCHECK_H
#define MOEC_KERNELCHECK_H

#include "moec/Bundle.h"

#include <cstdint>
#include <string>
#include <vector>

namespace moec {

struct KernelCheckOptions {
  /// The device whose kernels are checked: "emu" or "cuda".
  std::string device = "emu";
  /// Batch size (B) and sequence length (S) of the random inputs; 0 for S:
  /// the largest of 37 and max_seq that fits (37 is no tile's multiple).
  int64_t batch = 2;
  int64_t seqLen = 0;
  /// New tokens per decode step (S of programs with a `past` input).
  int64_t decodeLen = 3;
  /// Seeds the inputs, the parameters' initialisation and the state.
  uint64_t seed = 1;
  /// Programs to check; empty: all of the bundle's.
  std::vector<std::string> programs;
  /// ‖a − b‖ / ‖b‖ allowed for each float dtype; a group is held to the
  /// loosest tolerance of the float buffers it reads and writes.
  double f32Tolerance = 1e-4;
  double f64Tolerance = 1e-10;
  double bf16Tolerance = 2e-2;
  /// Groups whose kernels multiply on tf32 tensor cores (f32_matmul =
  /// tf32): each product is off by up to 2^-10 relative, and with random
  /// signs the relative error of a product sum is about 2^-11 whatever its
  /// length, since error and sum both grow as sqrt(K); this allows ten
  /// times that for GEMMs chained in one group and for cancellation.
  /// 3xTF32 (tf32x3) is held to f32Tolerance.
  double tf32Tolerance = 5e-3;
  /// tf32 experts_grad groups recompute the expert hidden layer from tf32
  /// products and apply the activation's derivative to it: where relu's
  /// input is within rounding of 0 the derivative flips between 0 and 1, so
  /// single weight-gradient entries differ by a whole token's contribution
  /// (up to 1.8e-2 relative on switch_lm at the check's sizes).
  double tf32RecomputeTolerance = 5e-2;
};

/// One buffer a group writes, compared between the two devices.
struct BufferComparison {
  std::string program;
  size_t group = 0;
  /// The group's kind ("gemm", "router", ...) and kernels.
  std::string kind;
  std::vector<std::string> kernels;
  int64_t buffer = 0;
  /// The op of the plan step that writes it, and where it came from.
  std::string op;
  std::string location;
  DType dtype = DType::F32;
  Shape shape;
  /// ‖a − b‖ / max(‖b‖, f·s·√n) for floats, s the largest root-mean-square
  /// size among the buffers the group writes and f = min(1, 100 ε /
  /// tolerance), ε fp32's roundoff (f64's for f64 groups): values that
  /// cancel to almost nothing are measured against that noise floor, not
  /// their rounding noise; for integers the fraction of elements that
  /// differ.
  double error = 0;
  /// Updated in place (an optimizer step): the float error is relative to
  /// the change, b − before, instead of b.
  bool inPlace = false;
  double tolerance = 0;
  /// Elements of the checked device's result that are NaN or infinite where
  /// the cpu's are not.
  int64_t nonFinite = 0;
  /// The first element that differs most: index and both values.
  int64_t worstIndex = -1;
  double worstGot = 0, worstExpected = 0;
  /// The cpu's value is all zeros (the comparison proves little).
  bool trivial = false;
  /// The cpu's value (or change) is under the noise floor, f·s above, so
  /// the error is measured against the floor (the comparison proves less).
  bool floored = false;
  bool passed = false;
  /// Why a comparison passed that differs (router slots of near-tied
  /// tokens), or is empty.
  std::string note;
};

struct KernelCheckReport {
  std::string device;
  std::vector<BufferComparison> comparisons;
  /// Kernels of the bundle no non-trivial comparison exercised.
  std::vector<std::string> uncovered;
  /// Every kernel that was launched and checked.
  std::vector<std::string> covered;
  /// Seconds spent running groups on the checked device.
  double deviceSeconds = 0;

  bool passed() const;
  /// A table of the failures (all comparisons when `verbose`), the
  /// uncovered kernels and a summary line.
  std::string format(bool verbose = false) const;
};

/// Runs the check. Throws moec::Error when the device cannot be created or
/// a program cannot run at all (a kernel that fails to build or traps).
KernelCheckReport checkKernels(const Bundle &bundle,
                               const KernelCheckOptions &options = {});

} // namespace moec

#endif // MOEC_KERNELCHECK_H
