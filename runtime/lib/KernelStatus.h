//===- KernelStatus.h - bad data that generated kernels report --*- C++ -*-===//
//
// A kernel that meets data it cannot compute on (a router token whose
// logits have no ranking) cannot throw: it writes a few status words that
// every launch can reach (KernelParams::status, the device library's
// reportBadItem), carries on with a safe stand-in, and the device reads the
// words once the program has run. The cuda and emu devices turn them into
// the error the cpu device raises for the same data, here.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_KERNELSTATUS_H
#define MOEC_RUNTIME_KERNELSTATUS_H

#include "BundleData.h"
#include "DimExpr.h"
#include "moec/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace moec::detail {

/// The words, as prelude.cuh's reportBadItem writes them.
struct KernelStatusWords {
  /// The reporting launch's tag, KernelParams::launchTag: 1 + the launch's
  /// position among all launches of the program's groups, in order, those
  /// that run no block included; 0: nothing reported.
  uint32_t launch = 0;
  /// A KernelStatusCode of prelude.cuh.
  uint32_t code = 0;
  /// The lowest item (token) the launch reported.
  uint32_t item = 0xffffffffu;
  uint32_t unused = 0;
};
static_assert(sizeof(KernelStatusWords) == 16, "four 32-bit words");

/// The mirror of prelude.cuh's KernelStatusCode.
enum class KernelStatusCode : uint32_t { RouterLogits = 1 };

/// The error for what `words` say about a run of `program` with `symbols`;
/// none when nothing was reported. It names the launch, the op and the
/// item as the cpu device would (a token's index in the router logits'
/// leading dimensions).
std::optional<Error> kernelStatusError(const ProgramDesc &program,
                                       const SymbolValues &symbols,
                                       const KernelStatusWords &words);

/// The cpu device's words for a router token `index` ("[1, 2]") whose
/// logits cannot be ranked; the other devices say the same.
std::string unrankedLogitsMessage(const std::string &index);

} // namespace moec::detail

#endif // MOEC_RUNTIME_KERNELSTATUS_H
