//===- PtxasLogTest.cpp - resource usage from captured ptxas logs ---------===//

#include "cuda/PtxasLog.h"

#include <gtest/gtest.h>

using namespace moec::detail::cuda;

namespace {

// NVRTC 13.0, sm_80, --ptxas-options=-v --maxrregcount=16: two kernels, one
// spilling, and a non-inlined device function reported after them.
const char *const kTwoKernels =
    R"(ptxas warning : For profile sm_80 adjusting per thread register count of 16 to lower bound of 24
ptxas info    : Overriding maximum register limit 256 for 'other' with  24 of maxrregcount option
ptxas info    : Overriding maximum register limit 256 for 'spilly' with  24 of maxrregcount option
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'other' for 'sm_80'
ptxas info    : Function properties for other
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers, 360 bytes cmem[0]
ptxas info    : Compile time = 5.356 ms
ptxas info    : Compiling entry function 'spilly' for 'sm_80'
ptxas info    : Function properties for spilly
ptxas         .     720 bytes stack frame, 496 bytes spill stores, 640 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers, 720 bytes cumulative stack size, 364 bytes cmem[0]
ptxas info    : Compile time = 34.851 ms
ptxas info    : Function properties for _Z6helperPfi
ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
)";

// NVRTC 13.0, sm_90: one kernel with static shared memory.
const char *const kOneKernel = R"(ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 1 barriers, 512 bytes smem
ptxas info    : Compile time = 5.876 ms
)";

TEST(PtxasLog, PicksTheNamedKernel) {
  ResourceUsage spilly = parsePtxasLog(kTwoKernels, "spilly");
  EXPECT_EQ(spilly.registers, 24);
  EXPECT_EQ(spilly.sharedBytes, 0);
  EXPECT_EQ(spilly.stackBytes, 720);
  EXPECT_EQ(spilly.spillStoreBytes, 496);
  EXPECT_EQ(spilly.spillLoadBytes, 640);

  ResourceUsage other = parsePtxasLog(kTwoKernels, "other");
  EXPECT_EQ(other.registers, 8);
  EXPECT_EQ(other.sharedBytes, 0);
  EXPECT_EQ(other.stackBytes, 0);
  EXPECT_EQ(other.spillStoreBytes, 0);
  EXPECT_EQ(other.spillLoadBytes, 0);
}

TEST(PtxasLog, DeviceFunctionsDoNotLeakIntoKernels) {
  // The helper's stack line comes last; it must not overwrite 'spilly'.
  EXPECT_EQ(parsePtxasLog(kTwoKernels, "spilly").stackBytes, 720);
  ResourceUsage helper = parsePtxasLog(kTwoKernels, "_Z6helperPfi");
  EXPECT_EQ(helper.stackBytes, 8);
  EXPECT_EQ(helper.registers, -1);
}

TEST(PtxasLog, StaticSharedMemory) {
  ResourceUsage k = parsePtxasLog(kOneKernel, "k");
  EXPECT_EQ(k.registers, 8);
  EXPECT_EQ(k.sharedBytes, 512);
  EXPECT_EQ(k.spillStoreBytes, 0);
}

TEST(PtxasLog, ASingleEntryServesAnyName) {
  EXPECT_EQ(parsePtxasLog(kOneKernel, "renamed").registers, 8);
  // With two entries an unknown name finds nothing.
  EXPECT_EQ(parsePtxasLog(kTwoKernels, "renamed").registers, -1);
}

TEST(PtxasLog, AnEmptyLogSaysNothing) {
  ResourceUsage none = parsePtxasLog("", "k");
  EXPECT_EQ(none.registers, -1);
  EXPECT_EQ(none.sharedBytes, -1);
  EXPECT_EQ(none.spillStoreBytes, -1);
  EXPECT_EQ(none.spillLoadBytes, -1);
  EXPECT_EQ(none.stackBytes, -1);
}

} // namespace
