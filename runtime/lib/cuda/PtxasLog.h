//===- PtxasLog.h - resource usage from ptxas's verbose log -----*- C++ -*-===//
//
// With --ptxas-options=-v NVRTC's log carries ptxas's report per function:
// registers, static shared memory, spills and stack. moec records them for
// every kernel it compiles (spills are the first sign of a bad tile).
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CUDA_PTXASLOG_H
#define MOEC_RUNTIME_CUDA_PTXASLOG_H

#include "moec/Cuda.h"

#include <string>

namespace moec::detail::cuda {

using ResourceUsage = moec::KernelResources;

/// The usage of entry function `kernel` in a ptxas -v log. When the log does
/// not name `kernel` but has exactly one entry function, that one is used.
ResourceUsage parsePtxasLog(const std::string &log, const std::string &kernel);

} // namespace moec::detail::cuda

#endif // MOEC_RUNTIME_CUDA_PTXASLOG_H
