//===- EmuCheckTest.cpp - check mode: bounds and uninitialized shared -----===//

#include "EmuTestUtil.h"

#include "moec/support/DeviceLibrary.h"

#include <gtest/gtest.h>

using namespace moec::emu;
using namespace moec::emu::test;

TEST(EmuCheck, OffByOneGlobalReadIsReported) {
  const int n = 1024;
  std::vector<float> x(n, 1.0f), y(n, 0.0f);
  std::string error =
      Launch(4, 256).buffer(0, x).buffer(1, y).scalar(0, n).error(
          checkedModule(), "offByOne");
  EXPECT_NE(error.find("offByOne: block (3,0,0), thread (255,0,0): "
                       "out-of-bounds access to buffer 0: byte offset 4096"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("the buffer has 4096 bytes"), std::string::npos)
      << error;
}

TEST(EmuCheck, GlobalWritePastTheEndIsReported) {
  std::vector<float> y(63, 0.0f);
  std::string error =
      Launch(1, 64).buffer(0, y).error(checkedModule(), "writePastEnd");
  EXPECT_NE(error.find("thread (63,0,0): out-of-bounds access to buffer 0: "
                       "byte offset 252"),
            std::string::npos)
      << error;
}

TEST(EmuCheck, ReadOfUnwrittenSharedMemoryIsReported) {
  std::vector<float> y(64, 0.0f);
  std::string error =
      Launch(1, 64).buffer(0, y).error(checkedModule(), "unwrittenShared");
  EXPECT_NE(error.find("unwrittenShared: block (0,0,0), thread (62,0,0): "
                       "read of uninitialized shared memory: shared array "
                       "'s', byte offset 252"),
            std::string::npos)
      << error;

  error = Launch(1, 32)
              .buffer(0, y)
              .shared(64 * sizeof(float))
              .error(checkedModule(), "unwrittenDynamic");
  EXPECT_NE(error.find("read of uninitialized shared memory: dynamic shared "
                       "memory, byte offset 128"),
            std::string::npos)
      << error;

  // A kernel that skips its barriers reads before the writer wrote.
  std::vector<int> x(256, 1), z(256, 0);
  error = Launch(1, 256).buffer(0, x).buffer(1, z).error(checkedModule(),
                                                         "reverseNoBarrier");
  EXPECT_NE(error.find("thread (0,0,0): read of uninitialized shared memory"),
            std::string::npos)
      << error;
}

TEST(EmuCheck, SharedOutOfBoundsIsReported) {
  std::vector<float> y(32, 0.0f);
  std::string error =
      Launch(1, 32).buffer(0, y).error(checkedModule(), "sharedOverrun");
  EXPECT_NE(error.find("thread (0,0,0): out-of-bounds access to shared "
                       "array 'vals': byte offset 128, 4 bytes, but it has "
                       "128 bytes"),
            std::string::npos)
      << error;
}

TEST(EmuCheck, ShuffleFromALaneOutsideTheMaskIsReported) {
  std::vector<int> out(32, 0);
  std::string error =
      Launch(1, 32).buffer(0, out).error(checkedModule(), "shuffleOutsideMask");
  EXPECT_NE(error.find("__shfl_sync with mask 0x0000ffff: lane 0 reads lane "
                       "16, which is not in the mask"),
            std::string::npos)
      << error;
}

TEST(EmuCheck, LdmatrixByHalfAWarpIsReported) {
  std::vector<uint32_t> out(32, 0);
  std::string error =
      Launch(1, 32).buffer(0, out).error(checkedModule(), "ldmatrixHalfWarp");
  EXPECT_NE(error.find("ldmatrix.x4"), std::string::npos) << error;
}

TEST(EmuCheck, MisalignedCpAsyncIsReported) {
  std::vector<uint32_t> x(256, 1), y(32, 0);
  std::string error = Launch(1, 32).buffer(0, x).buffer(1, y).error(
      checkedModule(), "cpAsyncMisaligned");
  EXPECT_NE(error.find("cp.async.cg.shared.global: global address"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("is not 16-byte aligned"), std::string::npos) << error;
}

TEST(EmuCheck, CorrectKernelsPassAndAgreeWithTheNormalBuild) {
  struct Case {
    const char *kernel;
    unsigned grid, block;
  };
  const Case cases[] = {
      {"blockReduce", 3, 256},   {"reverseShared", 3, 256},
      {"dynamicShared", 3, 256}, {"sharedPairs", 1, 64},
      {"shuffles", 1, 64},       {"votes", 1, 64},
      {"warpReduce", 2, 64},     {"lastBlockSum", 3, 128},
      {"atomics", 3, 256},       {"mmaBf16", 2, 64},
      {"mmaTf32", 1, 96},        {"sharedParam", 1, 32},
      {"ldmatrixX4", 1, 32},
  };
  for (const Case &c : cases) {
    std::vector<std::vector<uint16_t>> outputs;
    for (const EmuModule *module : {&correctModule(), &checkedModule()}) {
      // Eight 64 KiB buffers: finite bf16, float and int inputs alike
      // (0x3f80 is bf16 1.0; as int or float it is a moderate value).
      std::vector<std::vector<uint16_t>> buffers(
          8, std::vector<uint16_t>(1 << 15));
      for (auto &buffer : buffers)
        for (size_t i = 0; i < buffer.size(); ++i)
          buffer[i] = static_cast<uint16_t>(0x3f80 + i % 7);
      Launch launch(c.grid, c.block);
      for (int i = 0; i < 8; ++i)
        launch.buffer(i, buffers[i]);
      std::fill(buffers[2].begin(), buffers[2].end(), 0); // ticket, counters
      launch.scalar(0, 3 * 256).shared(2 * 256 * sizeof(float));
      EXPECT_EQ(launch.error(*module, c.kernel), "") << c.kernel;
      std::vector<uint16_t> all;
      for (auto &buffer : buffers)
        all.insert(all.end(), buffer.begin(), buffer.end());
      outputs.push_back(std::move(all));
    }
    EXPECT_TRUE(outputs[0] == outputs[1]) << c.kernel;
  }
}

// Without shared-memory tracking, check mode builds kernels that hand
// shared arrays to templates deducing T from T* (the device library's
// blockSum) and still checks global memory.
TEST(EmuCheck, UntrackedSharedMemoryKeepsRawArrays) {
  std::string source = std::string(moec::deviceLibrarySource()) + R"cuda(
extern "C" __global__ void __launch_bounds__(128)
rawScratch(const moec::KernelParams p) {
  moec::gptr<const float> x = moec::bufferArg<const float>(p, 0);
  moec::gptr<float> out = moec::bufferArg<float>(p, 1);
  MOEC_SHARED(float, scratch, 4);
  float sum = moec::blockSum<128>(x[threadIdx.x], scratch);
  out[threadIdx.x] = sum;
}
MOEC_EMU_EXPORT_KERNEL(rawScratch)
)cuda";
  EmuOptions options = testOptions(true);
  options.trackShared = false;
  EmuModule module = EmuModule::load(source, "emu-test-untracked", options);
  std::vector<float> x(128, 0.5f), out(128, 0.0f);
  Launch(1, 128).buffer(0, x).buffer(1, out).run(module, "rawScratch");
  for (float v : out)
    EXPECT_EQ(v, 64.0f);
  std::vector<float> shortOut(127, 0.0f);
  std::string error = Launch(1, 128)
                          .buffer(0, x)
                          .buffer(1, shortOut)
                          .error(module, "rawScratch");
  EXPECT_NE(error.find("out-of-bounds access to buffer 1: byte offset 508"),
            std::string::npos)
      << error;
}
