//===- PtxasLog.h - resource usage from ptxas's verbose log -----*- C++ -*-===//
//
// With --ptxas-options=-v NVRTC's log carries ptxas's report per function:
// registers, static shared memory, spills and stack. moec records them for
// every kernel it compiles (spills are the first sign of a bad tile).
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CUDA_PTXASLOG_H
#define MOEC_RUNTIME_CUDA_PTXASLOG_H

#include <string>

namespace moec::detail::cuda {

/// What ptxas reports for one kernel; -1 where the log says nothing.
struct ResourceUsage {
  int registers = -1;
  int sharedBytes = -1;
  int spillStoreBytes = -1;
  int spillLoadBytes = -1;
  int stackBytes = -1;
};

/// The usage of entry function `kernel` in a ptxas -v log. When the log does
/// not name `kernel` but has exactly one entry function, that one is used.
ResourceUsage parsePtxasLog(const std::string &log, const std::string &kernel);

} // namespace moec::detail::cuda

#endif // MOEC_RUNTIME_CUDA_PTXASLOG_H
