//===- Initializers.h - parameter initial values ----------------*- C++ -*-===//

#ifndef MOEC_RUNTIME_INITIALIZERS_H
#define MOEC_RUNTIME_INITIALIZERS_H

#include "moec/Bundle.h"
#include "moec/Tensor.h"

namespace moec::detail {

/// The initial value of `param` under `seed`: element i comes from the
/// Philox stream keyed by (seed, streamId(param.name)) at counter i, so it is
/// the same on every device and independent of every other parameter.
Tensor initialValue(const ParamInfo &param, uint64_t seed);

} // namespace moec::detail

#endif // MOEC_RUNTIME_INITIALIZERS_H
