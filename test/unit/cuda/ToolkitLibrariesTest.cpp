//===- ToolkitLibrariesTest.cpp - NVRTC and cuBLASLt the driver runs ------===//
//
// Runs in moec-cuda-device-tests, where $MOEC_CUDA_DRIVER_LIBRARY names the
// fake driver, whose CUDA version the tests set.
//
//===----------------------------------------------------------------------===//

#include "cuda/ToolkitLibraries.h"
#include "FakeCudaDriver.h"
#include "moec/Cuda.h"
#include "moec/Error.h"

#include <cstdlib>
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace moec;
using namespace moec::detail::cuda;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace {

const char *fakeDriver() { return std::getenv("MOEC_CUDA_DRIVER_LIBRARY"); }

/// Sets the fake driver's CUDA version for one test.
class DriverVersion {
public:
  explicit DriverVersion(int version) {
    void *handle = ::dlopen(fakeDriver(), RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      throw Error(std::string("cannot open the fake driver: ") + ::dlerror());
    state = reinterpret_cast<fake::State *(*)()>(
        ::dlsym(handle, "fakeCudaState"))();
    saved = state->driverVersion;
    state->driverVersion = version;
  }
  ~DriverVersion() { state->driverVersion = saved; }

private:
  fake::State *state = nullptr;
  int saved = 0;
};

const std::string kLib = "/usr/local/cuda/lib64/";

TEST(ToolkitLibraries, TheMajorsTheDriverRunsComeFirstNewestFirst) {
  EXPECT_THAT(toolkitLibraryCandidates("libnvrtc.so", 13, true),
              ElementsAre("libnvrtc.so.13", kLib + "libnvrtc.so.13",
                          "libnvrtc.so.12", kLib + "libnvrtc.so.12",
                          "libnvrtc.so", kLib + "libnvrtc.so"));
  // A CUDA 12 driver cannot load NVRTC 13's kernels: 13 only as a last
  // resort.
  EXPECT_THAT(toolkitLibraryCandidates("libcublasLt.so", 12, false),
              ElementsAre("libcublasLt.so.12", kLib + "libcublasLt.so.12",
                          "libcublasLt.so.13", kLib + "libcublasLt.so.13"));
  // A newer driver runs both.
  EXPECT_THAT(toolkitLibraryCandidates("libcublasLt.so", 14, false),
              ElementsAre("libcublasLt.so.13", kLib + "libcublasLt.so.13",
                          "libcublasLt.so.12", kLib + "libcublasLt.so.12"));
  // No driver (a machine that only compiles): the loader's path first.
  EXPECT_THAT(toolkitLibraryCandidates("libnvrtc.so", 0, true),
              ElementsAre("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
                          kLib + "libnvrtc.so.13", kLib + "libnvrtc.so.12",
                          kLib + "libnvrtc.so"));
  // Older than both: the nearest newer one first.
  EXPECT_THAT(toolkitLibraryCandidates("libnvrtc.so", 11, false),
              ElementsAre("libnvrtc.so.12", kLib + "libnvrtc.so.12",
                          "libnvrtc.so.13", kLib + "libnvrtc.so.13"));
}

TEST(ToolkitLibraries, TheDriversMajorComesFromCuDriverGetVersion) {
  {
    DriverVersion version(12080);
    EXPECT_EQ(driverCudaMajor(fakeDriver()), 12);
    EXPECT_EQ(installedDriverCudaMajor(), 12);
  }
  EXPECT_EQ(installedDriverCudaMajor(), 13);
  EXPECT_EQ(driverCudaMajor("/nonexistent/libcuda.so.1"), 0);
  EXPECT_EQ(driverCudaMajor("libm.so.6"), 0);
}

CudaEnvironment hopperWith(const std::string &driverCuda,
                           const std::string &nvrtc) {
  CudaEnvironment env;
  env.driverCudaVersion = driverCuda;
  env.gpus.push_back({"NVIDIA H100", "sm_90", 132, size_t(80) << 30});
  env.nvrtcVersion = nvrtc;
  env.nvrtcLibrary = "/usr/local/cuda/lib64/libnvrtc.so.13";
  env.nvrtcArchs = {"sm_80", "sm_90"};
  return env;
}

TEST(ToolkitLibraries, NvrtcNewerThanTheDriverIsNotReady) {
  std::string why;
  EXPECT_EQ(cudaReadiness(hopperWith("12.8", "13.0"), why),
            CudaReadiness::NvrtcNewerThanDriver);
  EXPECT_THAT(why, HasSubstr("NVRTC 13.0 (/usr/local/cuda/lib64/"
                             "libnvrtc.so.13) is newer than the CUDA 12.8 "
                             "the driver supports"));
  EXPECT_THAT(why, HasSubstr("install NVRTC of CUDA 12"));
  for (auto [driver, nvrtc] :
       {std::pair{"12.8", "12.9"}, {"13.0", "13.0"}, {"13.1", "12.4"}}) {
    EXPECT_EQ(cudaReadiness(hopperWith(driver, nvrtc), why),
              CudaReadiness::Ready)
        << driver << " " << nvrtc << ": " << why;
    EXPECT_EQ(why, "");
  }
}

} // namespace
