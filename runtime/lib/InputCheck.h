//===- InputCheck.h - token inputs checked before any kernel ----*- C++ -*-===//
//
// Token ids index embedding tables and positions index the position table
// and the KV cache. The cpu kernels check their indices, but the generated
// kernels do not (a GPU cannot report), so the session checks every input
// it hands a device: a bad id is a clear error, never a wild read.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_INPUTCHECK_H
#define MOEC_RUNTIME_INPUTCHECK_H

#include "BundleData.h"

#include <map>
#include <string>

namespace moec::detail {

/// Throws moec::Error naming the program, the input and the element when a
/// token id or target is outside the vocabulary (negative targets are
/// ignored positions), or when `past` plus the sequence length exceeds the
/// model's max_seq.
void checkTokenInputs(const BundleData &bundle, const std::string &program,
                      const std::map<std::string, Tensor> &inputs);

} // namespace moec::detail

#endif // MOEC_RUNTIME_INPUTCHECK_H
