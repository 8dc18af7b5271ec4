//===- RouterSlotCheck.h - router slots up to near-tied ranks ---*- C++ -*-===//
//
// Batch-priority routing hands out capacity slots in the order of each
// token's top-1 probability. A device computes those probabilities in its
// own order (the router group fuses its linear layer), so two tokens whose
// probabilities agree to an ulp can rank the other way round there, and
// swap their slots. The kernel check accepts such slots when they are what
// the cpu's rule gives for a ranking that differs from the cpu's only among
// near-tied tokens, and nothing else.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_ROUTERSLOTCHECK_H
#define MOEC_RUNTIME_ROUTERSLOTCHECK_H

#include <cstdint>
#include <string>
#include <vector>

namespace moec::detail {

/// Why `got`, a device's capacity slots [n, k] of batch-priority routing
/// over `numExperts` experts, cannot come from a ranking of the tokens that
/// differs from the cpu's only among tokens whose top-1 probabilities `key`
/// [n] agree within `tolerance` (relative); "" when they can. `want` are
/// the cpu's slots and `expert` [n, k] the choices both devices made. It
/// holds when, for every expert: the device hands out the same slots as
/// the cpu; first choices take slots before second choices, and so on; and
/// among the assignments of one choice, none that the device ranks later
/// (or drops) has a key above an earlier one's by more than the tolerance.
std::string nearTiedSlotMismatch(const int32_t *got, const int32_t *want,
                                 const int32_t *expert,
                                 const std::vector<double> &key, int64_t k,
                                 int64_t numExperts, double tolerance);

} // namespace moec::detail

#endif // MOEC_RUNTIME_ROUTERSLOTCHECK_H
