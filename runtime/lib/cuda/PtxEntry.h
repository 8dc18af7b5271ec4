//===- PtxEntry.h - one kernel's part of a PTX module -----------*- C++ -*-===//
//
// NVRTC compiles several kernels in one program (its fixed cost per program
// is as large as a small kernel's own), and gives one PTX module for all of
// them. What a kernel's instruction mix counts is its own part: its entry
// function and the device functions it calls, directly or not.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CUDA_PTXENTRY_H
#define MOEC_RUNTIME_CUDA_PTXENTRY_H

#include <string>
#include <vector>

namespace moec::detail::cuda {

/// For each of `entries`, `modulePtx` without the definitions of the other
/// entry functions and of the device functions that neither the entry nor
/// the module's globals reach: the module's header, declarations and
/// globals stay, so each is a module of its own. Throws std::logic_error
/// (a bug in moec, not in the user's input) when the module defines no
/// entry function of one of the names or cannot be read.
std::vector<std::string> entryPtx(const std::string &modulePtx,
                                  const std::vector<std::string> &entries);

} // namespace moec::detail::cuda

#endif // MOEC_RUNTIME_CUDA_PTXENTRY_H
