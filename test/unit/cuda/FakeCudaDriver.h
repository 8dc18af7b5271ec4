//===- FakeCudaDriver.h - a host-memory stand-in for libcuda ----*- C++ -*-===//
//
// The cuda device's host logic (allocation, transfers, kernel loading, grid
// and parameter set-up, graph capture and replay, error paths) is tested
// against this fake driver, loaded through $MOEC_CUDA_DRIVER_LIBRARY. It
// keeps "device" memory on the host and records launches instead of
// running them. The tests read and steer it through fakeCudaState().
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TEST_UNIT_CUDA_FAKECUDADRIVER_H
#define MOEC_TEST_UNIT_CUDA_FAKECUDADRIVER_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace moec::fake {

/// One kernel launch as the driver saw it.
struct Launch {
  std::string kernel;
  unsigned grid[3];
  unsigned block[3];
  unsigned sharedBytes;
  /// The bytes of the single kernel argument (moec::KernelParams).
  std::vector<uint8_t> params;
  /// Whether it ran as part of a replayed graph.
  bool fromGraph = false;
};

struct State {
  /// Executed launches, in order.
  std::vector<Launch> launches;
  int64_t liveAllocations = 0;
  int64_t modulesLoaded = 0;
  int64_t modulesUnloaded = 0;
  int64_t captures = 0;
  int64_t graphLaunches = 0;
  int64_t procAddressLookups = 0;
  /// What cuDriverGetVersion answers (13000: CUDA 13.0).
  int driverVersion = 13000;
  /// cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) by kernel.
  std::map<std::string, int> dynamicSharedLimit;
  /// Static shared memory by kernel (cuFuncGetAttribute); none when absent.
  std::map<std::string, int> staticShared;
  /// The largest block by kernel (cuFuncGetAttribute); 1024 when absent.
  std::map<std::string, int> maxThreads;
  /// Failure injection: cuLaunchKernel of this kernel returns
  /// CUDA_ERROR_INVALID_VALUE; the next cuStreamSynchronize returns
  /// CUDA_ERROR_ILLEGAL_ADDRESS when set.
  std::string failLaunchOf;
  bool failNextSynchronize = false;
  /// cuModuleLoadData returns CUDA_ERROR_INVALID_IMAGE.
  bool failModuleLoad = false;
  /// cuGraphInstantiateWithFlags returns CUDA_ERROR_INVALID_VALUE.
  bool failInstantiate = false;
  /// A launch of this kernel reports item `reportItem` through the status
  /// words its parameters point at, as the device library's reportBadItem
  /// does (also when replayed from a graph).
  std::string reportFrom;
  uint32_t reportItem = 0;

  /// Back to a plain driver: no failures injected, no attributes or
  /// version set, no launches recorded (the counters stay).
  void resetInjections() {
    launches.clear();
    dynamicSharedLimit.clear();
    staticShared.clear();
    maxThreads.clear();
    driverVersion = 13000;
    failLaunchOf.clear();
    failNextSynchronize = false;
    failModuleLoad = false;
    failInstantiate = false;
    reportFrom.clear();
    reportItem = 0;
  }
};

} // namespace moec::fake

/// The fake driver's state (exported by the fake library).
extern "C" moec::fake::State *fakeCudaState();

#endif // MOEC_TEST_UNIT_CUDA_FAKECUDADRIVER_H
