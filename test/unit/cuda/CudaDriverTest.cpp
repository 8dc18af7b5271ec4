//===- CudaDriverTest.cpp - the driver loader and the cuda device ---------===//
//
// These machines have no GPU, so the tests check that every way of not
// having one ends in a clear moec::Error, and that the entry points moec
// asks for exist under the names it asks for (in the toolkit's stub).
//
//===----------------------------------------------------------------------===//

#include "cuda/CudaDriver.h"
#include "CudaTestUtil.h"
#include "Device.h"
#include "ErrorOf.h"
#include "cuda/CudaDevice.h"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

using namespace moec;
using moec::test::errorOf;
using namespace moec::detail::cuda;
using ::testing::HasSubstr;

namespace {

bool driverInstalled() {
  void *handle = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle)
    ::dlclose(handle);
  return handle != nullptr;
}

void getDriver() { CudaDriver::get(); }
void createCuda() { detail::createDevice("cuda"); }

TEST(CudaDriver, WithoutADriverTheErrorSaysWhatToDo) {
  test::ScopedEnv env("MOEC_CUDA_DRIVER_LIBRARY", std::nullopt);
  if (driverInstalled())
    GTEST_SKIP() << "this machine has a CUDA driver";
  std::string message = errorOf(getDriver);
  EXPECT_THAT(message, HasSubstr("no CUDA driver (libcuda.so.1) could be "
                                 "loaded"));
  EXPECT_THAT(message, HasSubstr("use --device cpu or --device emu"));
}

TEST(CudaDriver, CreateDeviceCudaThrowsTheSameError) {
  test::ScopedEnv env("MOEC_CUDA_DRIVER_LIBRARY", std::nullopt);
  if (driverInstalled())
    GTEST_SKIP() << "this machine has a CUDA driver";
  std::string message = errorOf(createCuda);
  EXPECT_THAT(message, HasSubstr("no CUDA driver (libcuda.so.1) could be "
                                 "loaded"));
  EXPECT_EQ(message, errorOf(getDriver));
}

TEST(CudaDriver, AMissingOverrideIsNamed) {
  test::ScopedEnv env("MOEC_CUDA_DRIVER_LIBRARY", "/nonexistent/libcuda.so.1");
  for (std::string message : {errorOf(getDriver), errorOf(createCuda)}) {
    EXPECT_THAT(message, HasSubstr("$MOEC_CUDA_DRIVER_LIBRARY "
                                   "('/nonexistent/libcuda.so.1') could not "
                                   "be loaded"));
    EXPECT_THAT(message, HasSubstr("use --device cpu or --device emu"));
  }
}

TEST(CudaDriver, ALibraryWithoutTheDriverApiIsNamed) {
  test::ScopedEnv env("MOEC_CUDA_DRIVER_LIBRARY", "libm.so.6");
  for (std::string message : {errorOf(getDriver), errorOf(createCuda)}) {
    EXPECT_THAT(message, HasSubstr("'libm.so.6' is not a usable CUDA driver: "
                                   "it has no cuGetErrorName"));
    EXPECT_THAT(message, HasSubstr("use --device cpu or --device emu"));
  }
}

/// The toolkit's stub libcuda exports the whole driver API but fails
/// cuInit: every entry point resolves under the names CudaDriver asks for.
const char *const kStub = "/usr/local/cuda/lib64/stubs/libcuda.so";

TEST(CudaDriver, EveryEntryPointResolvesInTheToolkitStub) {
  struct stat st;
  if (::stat(kStub, &st) != 0)
    GTEST_SKIP() << kStub << " is not installed";
  std::unique_ptr<CudaDriver> driver = CudaDriver::open(kStub);
  ASSERT_TRUE(driver);
  EXPECT_TRUE(driver->cuInit && driver->cuMemAlloc && driver->cuMemFree &&
              driver->cuLaunchKernel && driver->cuMemsetD8Async &&
              driver->cuStreamBeginCapture &&
              driver->cuGraphInstantiateWithFlags && driver->cuGraphLaunch &&
              driver->cuDevicePrimaryCtxRelease && driver->cuStreamDestroy);
  // Versioned exports: the pointers must be the _v2 functions.
  void *handle = ::dlopen(kStub, RTLD_NOW | RTLD_LOCAL);
  ASSERT_TRUE(handle);
  EXPECT_EQ(reinterpret_cast<void *>(driver->cuMemAlloc),
            ::dlsym(handle, "cuMemAlloc_v2"));
  EXPECT_EQ(reinterpret_cast<void *>(driver->cuMemcpyHtoDAsync),
            ::dlsym(handle, "cuMemcpyHtoDAsync_v2"));
  EXPECT_EQ(reinterpret_cast<void *>(driver->cuStreamBeginCapture),
            ::dlsym(handle, "cuStreamBeginCapture_v2"));
  EXPECT_EQ(reinterpret_cast<void *>(driver->cuDevicePrimaryCtxRelease),
            ::dlsym(handle, "cuDevicePrimaryCtxRelease_v2"));
  ::dlclose(handle);
}

TEST(CudaDriver, TheStubIsRecognisedAtCuInit) {
  struct stat st;
  if (::stat(kStub, &st) != 0)
    GTEST_SKIP() << kStub << " is not installed";
  test::ScopedEnv env("MOEC_CUDA_DRIVER_LIBRARY", kStub);
  for (std::string message : {errorOf(getDriver), errorOf(createCuda)}) {
    EXPECT_THAT(message, HasSubstr("stub driver, not a real one (cuInit: "));
    EXPECT_THAT(message, HasSubstr("use --device cpu or --device emu"));
  }
}

TEST(CudaDevice, OtherDevicesAreUnaffected) {
  EXPECT_EQ(detail::createDevice("cpu")->name(), "cpu");
  EXPECT_THROW(detail::createDevice("tpu"), Error);
}

} // namespace
