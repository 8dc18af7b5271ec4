//===- CudaDeviceTest.cpp - the cuda device against a fake driver ---------===//
//
// No GPU here: the device runs on FakeCudaDriver (host memory, launches
// recorded, not run), with real NVRTC CUBINs for sm_80. This checks what
// the device decides (grids, kernel parameters, shared memory attributes,
// graph capture and replay, transfers, lifetimes, error messages); whether
// the kernels compute the right thing is the emu device's and the GPU's
// business.
//
//===----------------------------------------------------------------------===//

#include "cuda/CudaDevice.h"
#include "CudaTestUtil.h"
#include "FakeCudaDriver.h"
#include "KernelParams.h"
#include "ProgramRunner.h"
#include "moec/support/DeviceLibrary.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace moec;
using namespace moec::detail;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

/// The fake driver: $MOEC_FAKE_CUDA_DRIVER when set (the GPU pack carries
/// it in its own folder), else where the build put it.
const char *fakeDriverPath() {
  const char *path = std::getenv("MOEC_FAKE_CUDA_DRIVER");
  return path && *path ? path : MOEC_FAKE_CUDA_DRIVER;
}

/// The fake cuBLASLt, found the same way.
const char *fakeCublasLtPath() {
  const char *path = std::getenv("MOEC_FAKE_CUBLASLT");
  return path && *path ? path : MOEC_FAKE_CUBLASLT;
}

/// Every test in this executable talks to the fake driver and cuBLASLt.
class FakeDriverEnvironment : public ::testing::Environment {
public:
  void SetUp() override {
    ::setenv("MOEC_CUDA_DRIVER_LIBRARY", fakeDriverPath(), 1);
    ::setenv("MOEC_CUBLASLT_LIBRARY", fakeCublasLtPath(), 1);
  }
};

[[maybe_unused]] ::testing::Environment *const fakeDriverEnvironment =
    ::testing::AddGlobalTestEnvironment(new FakeDriverEnvironment);

fake::State &fakeState() {
  void *handle = ::dlopen(fakeDriverPath(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    throw Error(std::string("cannot open the fake driver: ") + ::dlerror());
  auto get =
      reinterpret_cast<fake::State *(*)()>(::dlsym(handle, "fakeCudaState"));
  return *get();
}

using Params = detail::KernelParams;

Params paramsOf(const fake::Launch &launch) {
  Params p;
  std::memcpy(&p, launch.params.data(), sizeof(p));
  return p;
}

DimExpr dim(const std::string &text) { return *DimExpr::parse(text); }

LaunchDesc launch(const std::string &kernel, GridDimDesc x, int64_t gridY,
                  int64_t shared, std::vector<int64_t> buffers,
                  std::vector<DimExpr> scalars) {
  LaunchDesc l;
  l.kernel = kernel;
  l.grid[0] = x;
  l.grid[1] = {DimExpr(gridY), 1};
  l.block[0] = 128;
  l.sharedBytes = shared;
  l.buffers = std::move(buffers);
  l.scalars = std::move(scalars);
  return l;
}

/// A bundle with one program, "forward": x[B,4] -> y[B,4], a scratch
/// buffer, three groups: the scale kernel over 4*B elements, the mma kernel
/// with 64 KiB of dynamic shared memory, and an empty launch.
BundleData testBundle() {
  BundleData bundle;
  bundle.origin = "fake.bundle.json";
  bundle.deviceLibraryHash = std::string(deviceLibraryHash());
  auto own = [](const std::string &unit) {
    return unit.substr(deviceLibrarySource().size() + 1);
  };
  bundle.kernels["moek_test_scale"] = {
      "moek_test_scale",
      own(test::scaleKernelSource("moek_test_scale", "device"))};
  bundle.kernels["moek_test_mma"] = {
      "moek_test_mma", own(test::mmaKernelSource("moek_test_mma"))};

  ProgramDesc &p = bundle.programs["forward"];
  p.name = "forward";
  BufferDesc x{BufferKind::Input, DType::F32, {dim("B"), DimExpr(4)}, "x", {}};
  BufferDesc y{BufferKind::Temp, DType::F32, {dim("B"), DimExpr(4)}, "", {}};
  BufferDesc scratch{BufferKind::Temp, DType::F32, {DimExpr(64)}, "", {}};
  p.buffers = {x, y, scratch};
  p.inputs = {{"x", 0}};
  p.outputs = {{"y", 1}};
  GroupDesc scale, mma, empty;
  scale.launches.push_back(launch("moek_test_scale", {dim("4*B"), 128}, 1, 0,
                                  {0, 1, -1}, {dim("4*B"), DimExpr(7)}));
  mma.launches.push_back(
      launch("moek_test_mma", {dim("B"), 1}, 2, 64 * 1024, {2}, {dim("B")}));
  empty.launches.push_back(
      launch("moek_test_scale", {DimExpr(0), 1}, 1, 0, {0, 1}, {}));
  p.groups = {scale, mma, empty};
  return bundle;
}

Tensor input(int64_t batch) {
  Tensor x(DType::F32, {batch, 4});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] = 0.5f + float(i);
  return x;
}

class CudaDeviceTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    if (!test::tryNvrtc(why))
      GTEST_SKIP() << "NVRTC is not available: " << why;
    state().resetInjections();
    baseline = state().liveAllocations;
  }

  // The fake driver outlives the test: what a test injected must not reach
  // the tests of other fixtures (ToolkitLibrariesTest, CudaLibraryGemmTest).
  void TearDown() override { state().resetInjections(); }

  fake::State &state() { return fakeState(); }

  std::unique_ptr<cuda::CudaDevice> makeDevice() {
    std::unique_ptr<cuda::CudaDevice> device = cuda::createCudaDevice();
    device->setBundle(bundle);
    return device;
  }

  std::map<std::string, Tensor> run(ProgramRunner &runner, int64_t batch) {
    BufferMap params, states;
    return runner.run({{"x", input(batch)}}, params, states);
  }

  /// Runs `forward` on a fresh device whose next wait for the GPU fails
  /// and returns the error the run reports.
  std::string errorOfAFaultingRun() {
    std::unique_ptr<cuda::CudaDevice> device = makeDevice();
    const ProgramDesc &program = bundle.programs.at("forward");
    device->prepare(program);
    std::unique_ptr<DeviceBuffer> x = device->allocate(DType::F32, {8, 4});
    std::unique_ptr<DeviceBuffer> y = device->allocate(DType::F32, {8, 4});
    std::unique_ptr<DeviceBuffer> scratch = device->allocate(DType::F32, {64});
    state().failNextSynchronize = true;
    try {
      device->run(program, {{"B", 8}}, {x.get(), y.get(), scratch.get()});
    } catch (const Error &e) {
      return e.what();
    }
    return "(no error)";
  }

  BundleData bundle = testBundle();
  int64_t baseline = 0;
};

TEST_F(CudaDeviceTest, DescribesTheGpu) {
  std::unique_ptr<cuda::CudaDevice> device = makeDevice();
  EXPECT_EQ(device->name(), "cuda");
  EXPECT_TRUE(device->runsGroups());
  EXPECT_EQ(device->arch(), "sm_80");
  EXPECT_GT(state().procAddressLookups, 0)
      << "entry points should come from cuGetProcAddress";
  EXPECT_EQ(createDevice("cuda")->name(), "cuda");
}

TEST_F(CudaDeviceTest, BuffersStartZeroedAndRoundTrip) {
  std::unique_ptr<cuda::CudaDevice> device = makeDevice();
  // The device's own: the status words kernels report through.
  EXPECT_EQ(state().liveAllocations, baseline + 1);
  {
    std::unique_ptr<DeviceBuffer> a = device->allocate(DType::F32, {3, 5});
    std::unique_ptr<DeviceBuffer> b = device->allocate(DType::F32, {3, 5});
    std::unique_ptr<DeviceBuffer> none = device->allocate(DType::I64, {0});
    EXPECT_EQ(state().liveAllocations, baseline + 3);
    Tensor zero = device->download(*a);
    for (int64_t i = 0; i < zero.numel(); ++i)
      ASSERT_EQ(zero.data<float>()[i], 0.0f);
    Tensor x(DType::F32, {3, 5});
    for (int64_t i = 0; i < x.numel(); ++i)
      x.data<float>()[i] = float(i) * 1.5f;
    device->upload(*a, x);
    device->copy(*b, *a);
    Tensor back = device->download(*b);
    EXPECT_EQ(std::memcmp(back.raw(), x.raw(), x.nbytes()), 0);
    EXPECT_EQ(device->download(*none).numel(), 0);
    // Buffers may outlive the device.
    device.reset();
  }
  EXPECT_EQ(state().liveAllocations, baseline);
}

TEST_F(CudaDeviceTest, PrepareLoadsEachKernelOnceAndAllowsBigSharedMemory) {
  int64_t loaded = state().modulesLoaded, unloaded = state().modulesUnloaded;
  int64_t modules = 0;
  {
    std::unique_ptr<cuda::CudaDevice> device = makeDevice();
    device->prepare(bundle.programs.at("forward"));
    modules = state().modulesLoaded - loaded;
    // Two kernels: two modules, or one when they were compiled together.
    EXPECT_TRUE(modules == 1 || modules == 2) << modules;
    device->prepare(bundle.programs.at("forward"));
    EXPECT_EQ(state().modulesLoaded, loaded + modules);
    EXPECT_EQ(state().dynamicSharedLimit["moek_test_mma"], 64 * 1024);
    EXPECT_EQ(state().dynamicSharedLimit.count("moek_test_scale"), 0u);
  }
  EXPECT_EQ(state().modulesUnloaded, unloaded + modules);
}

TEST_F(CudaDeviceTest, LaunchesFollowTheDescription) {
  std::unique_ptr<cuda::CudaDevice> device = makeDevice();
  ProgramRunner runner(*device, bundle.programs.at("forward"));
  std::map<std::string, Tensor> out = run(runner, 300);
  ASSERT_EQ(state().launches.size(), 2u) << "the empty launch must be skipped";

  const fake::Launch &scale = state().launches[0];
  EXPECT_EQ(scale.kernel, "moek_test_scale");
  EXPECT_EQ(scale.grid[0], 10u); // ceil(1200 / 128)
  EXPECT_EQ(scale.grid[1], 1u);
  EXPECT_EQ(scale.block[0], 128u);
  EXPECT_EQ(scale.sharedBytes, 0u);
  Params p = paramsOf(scale);
  ASSERT_NE(p.buffers[0], nullptr);
  ASSERT_NE(p.buffers[1], nullptr);
  EXPECT_NE(p.buffers[0], p.buffers[1]);
  EXPECT_EQ(p.buffers[2], nullptr);
  EXPECT_EQ(p.buffers[3], nullptr);
  EXPECT_EQ(p.scalars[0], 1200);
  EXPECT_EQ(p.scalars[1], 7);
  EXPECT_EQ(p.scalars[2], 0);
  // The fake's device memory is host memory: the kernel would read x.
  Tensor x = input(300);
  EXPECT_EQ(std::memcmp(p.buffers[0], x.raw(), x.nbytes()), 0);

  const fake::Launch &mma = state().launches[1];
  EXPECT_EQ(mma.kernel, "moek_test_mma");
  EXPECT_EQ(mma.grid[0], 300u);
  EXPECT_EQ(mma.grid[1], 2u);
  EXPECT_EQ(mma.sharedBytes, 64u * 1024);
  EXPECT_EQ(paramsOf(mma).scalars[0], 300);

  // Nothing ran, so y is still the zero-filled allocation.
  ASSERT_EQ(out.at("y").shape(), (Shape{300, 4}));
  for (int64_t i = 0; i < out.at("y").numel(); ++i)
    ASSERT_EQ(out.at("y").data<float>()[i], 0.0f);
}

TEST_F(CudaDeviceTest, TheSecondIdenticalRunCapturesAGraphAndLaterRunsReplay) {
  std::unique_ptr<cuda::CudaDevice> device = makeDevice();
  ProgramRunner runner(*device, bundle.programs.at("forward"));
  int64_t captures = state().captures, replays = state().graphLaunches;
  run(runner, 8);
  EXPECT_EQ(state().captures, captures) << "no capture on the first run";
  run(runner, 8);
  EXPECT_EQ(state().captures, captures + 1);
  run(runner, 8);
  run(runner, 8);
  EXPECT_EQ(state().captures, captures + 1);
  EXPECT_EQ(state().graphLaunches, replays + 3);
  ASSERT_EQ(state().launches.size(), 8u);
  for (size_t i = 0; i < 8; ++i)
    EXPECT_EQ(state().launches[i].fromGraph, i >= 2) << i;
  // The replayed launches are the recorded ones, parameters included.
  EXPECT_EQ(state().launches[6].params, state().launches[0].params);

  // New sizes mean new buffers: launch directly, capture again later.
  run(runner, 16);
  EXPECT_FALSE(state().launches.back().fromGraph);
  EXPECT_EQ(state().launches.back().grid[0], 16u);
  run(runner, 16);
  EXPECT_EQ(state().captures, captures + 2);
  EXPECT_TRUE(state().launches.back().fromGraph);
}

/// Makes the test bundle's mma group stand for a router over logits
/// [B, 2, 4], after a group whose launch runs no block (tags count it).
ProgramDesc &withRouterGroup(BundleData &bundle) {
  ProgramDesc &p = bundle.programs.at("forward");
  p.buffers.push_back({BufferKind::Temp,
                       DType::F32,
                       {dim("B"), DimExpr(2), DimExpr(4)},
                       "",
                       {}});
  StepDesc router;
  router.op = "moe.topk_router";
  router.in = {3};
  router.loc = "fake.moe:3:5";
  p.steps = {router};
  p.groups[1].steps = {0};
  p.groups.insert(p.groups.begin(), p.groups[2]);
  return p;
}

// A kernel that meets data it cannot compute on reports the item through
// the status words every launch gets; the run then fails with the cpu
// device's words for it, naming the reporting launch, and the words are
// clear for the next run, direct or replayed from a graph.
TEST_F(CudaDeviceTest, AReportedTokenFailsTheRunWithTheCpusWords) {
  ProgramDesc &p = withRouterGroup(bundle);
  std::unique_ptr<cuda::CudaDevice> device = makeDevice();
  ProgramRunner runner(*device, p);
  state().reportFrom = "moek_test_mma";
  state().reportItem = 5; // [2, 1] of [8, 2]
  const std::string words =
      "program 'forward', group 2, kernel 'moek_test_mma': moe.topk_router: "
      "the logits of token [2, 1] contain NaN or +inf, or are all -inf; the "
      "router cannot rank them (from fake.moe:3:5)";
  auto errorOfRun = [&] {
    try {
      run(runner, 8);
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(errorOfRun(), words);
  ASSERT_EQ(state().launches.size(), 2u);
  Params scale = paramsOf(state().launches[0]),
         mma = paramsOf(state().launches[1]);
  EXPECT_NE(scale.status, nullptr);
  EXPECT_EQ(mma.status, scale.status);
  EXPECT_EQ(scale.launchTag, 2);
  EXPECT_EQ(mma.launchTag, 3);

  state().reportFrom.clear();
  EXPECT_EQ(errorOfRun(), "(no error)"); // captures a graph
  EXPECT_TRUE(state().launches.back().fromGraph);
  state().reportFrom = "moek_test_mma";
  EXPECT_EQ(errorOfRun(), words);
  EXPECT_TRUE(state().launches.back().fromGraph);
  state().reportFrom.clear();
  EXPECT_EQ(errorOfRun(), "(no error)");
}

// A run that stops at a failing launch after a kernel reported leaves no
// report behind for the next run.
TEST_F(CudaDeviceTest, AFailedRunLeavesNoReportBehind) {
  std::unique_ptr<cuda::CudaDevice> device = makeDevice();
  ProgramRunner runner(*device, withRouterGroup(bundle));
  state().reportFrom = "moek_test_scale";
  state().failLaunchOf = "moek_test_mma";
  EXPECT_THROW(run(runner, 8), Error);
  state().reportFrom.clear();
  state().failLaunchOf.clear();
  EXPECT_NO_THROW(run(runner, 8));
}

// A program object the device is told to forget takes its CUDA graph with
// it: another program later at the same address (the kernel check runs
// each group as a program of its own on the stack) launches its own
// kernels, never the old graph.
TEST_F(CudaDeviceTest, AForgottenProgramsGraphIsNotReplayedForItsSuccessor) {
  std::unique_ptr<cuda::CudaDevice> device = makeDevice();
  ProgramDesc part = bundle.programs.at("forward");
  std::unique_ptr<DeviceBuffer> x = device->allocate(DType::F32, {8, 4});
  std::unique_ptr<DeviceBuffer> y = device->allocate(DType::F32, {8, 4});
  std::unique_ptr<DeviceBuffer> scratch = device->allocate(DType::F32, {64});
  std::vector<DeviceBuffer *> buffers = {x.get(), y.get(), scratch.get()};
  auto runPart = [&] {
    device->prepare(part);
    device->run(part, {{"B", 8}}, buffers);
  };
  part.groups = {bundle.programs.at("forward").groups[0]};
  runPart();
  runPart(); // captured and replayed
  ASSERT_TRUE(state().launches.back().fromGraph);
  device->forget(part);
  part.groups = {bundle.programs.at("forward").groups[1]};
  state().launches.clear();
  runPart();
  runPart();
  runPart();
  ASSERT_EQ(state().launches.size(), 3u);
  for (const fake::Launch &l : state().launches)
    EXPECT_EQ(l.kernel, "moek_test_mma");
}

// A CUDA 12 driver does not load what NVRTC 13 compiles; the error says so.
TEST_F(CudaDeviceTest, AKernelTheDriverRefusesNamesAnNvrtcNewerThanIt) {
  std::unique_ptr<cuda::CudaDevice> device = makeDevice();
  state().failModuleLoad = true;
  auto [major, minor] = cuda::Nvrtc::get().version();
  state().driverVersion = (major - 1) * 1000 + 80;
  std::string message = "(no error)";
  try {
    device->prepare(bundle.programs.at("forward"));
  } catch (const Error &e) {
    message = e.what();
  }
  EXPECT_THAT(message, HasSubstr("cuModuleLoadData: CUDA_ERROR_INVALID_IMAGE"));
  EXPECT_THAT(message,
              HasSubstr(fmt::format("; NVRTC {}.{} compiled it, newer than the "
                                    "CUDA {}.8 the driver supports: install "
                                    "NVRTC of CUDA {}",
                                    major, minor, major - 1, major - 1)));
  // A driver as new as NVRTC: the driver's own words only.
  std::unique_ptr<cuda::CudaDevice> current = makeDevice();
  state().driverVersion = major * 1000;
  try {
    current->prepare(bundle.programs.at("forward"));
    FAIL() << "the module loaded";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), Not(HasSubstr("NVRTC")));
  }
}

// Graphs save host time only: a program whose capture the driver refuses
// runs kernel by kernel, with a warning, and is not captured again.
TEST_F(CudaDeviceTest, AProgramTheDriverCannotCaptureRunsKernelByKernel) {
  std::unique_ptr<cuda::CudaDevice> device = makeDevice();
  ProgramRunner runner(*device, bundle.programs.at("forward"));
  state().failInstantiate = true;
  int64_t captures = state().captures;
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 4; ++i)
    EXPECT_NO_THROW(run(runner, 8)) << "run " << i + 1;
  std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(warnings, "moec: warning: program 'forward': instantiating its "
                      "CUDA graph failed: cuGraphInstantiateWithFlags: "
                      "CUDA_ERROR_INVALID_VALUE: fake driver error; the "
                      "program runs kernel by kernel\n");
  EXPECT_EQ(state().captures, captures + 1);
  ASSERT_EQ(state().launches.size(), 8u);
  for (const fake::Launch &l : state().launches)
    EXPECT_FALSE(l.fromGraph);
}

// A launch that fails while a graph is captured fails the run, as without
// graphs, and leaves graphs on: the next run captures and replays.
TEST_F(CudaDeviceTest, ALaunchErrorDuringCaptureFailsTheRunAndKeepsGraphs) {
  std::unique_ptr<cuda::CudaDevice> device = makeDevice();
  ProgramRunner runner(*device, bundle.programs.at("forward"));
  int64_t captures = state().captures;
  run(runner, 8);
  state().failLaunchOf = "moek_test_mma";
  ::testing::internal::CaptureStderr();
  EXPECT_THROW(run(runner, 8), Error);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  state().failLaunchOf.clear();
  run(runner, 8); // the failed capture ended; this one is replayed
  EXPECT_EQ(state().captures, captures + 2);
  EXPECT_TRUE(state().launches.back().fromGraph);
}

TEST_F(CudaDeviceTest, UpdatesOfFrozenParametersAreWrittenBackAfterEveryRun) {
  // A program that updates a parameter no optimizer touches (batch norm's
  // running statistics): its new value is a temporary the kernels write,
  // copied over the parameter after the launches, graphs or not.
  bundle.programs["stats"] = bundle.programs.at("forward");
  ProgramDesc &p = bundle.programs.at("stats");
  p.name = "stats";
  p.buffers.push_back(
      {BufferKind::Param, DType::F32, {DimExpr(4)}, "bn.running_var", {}});
  p.buffers.push_back({BufferKind::Temp, DType::F32, {DimExpr(4)}, "", {}});
  p.updates = {{"bn.running_var", 4}};
  std::unique_ptr<cuda::CudaDevice> device = makeDevice();
  ProgramRunner runner(*device, p);
  BufferMap params, states;
  params["bn.running_var"] = device->allocate(DType::F32, {4});
  Tensor ones = Tensor::of<float>({4}, {1, 1, 1, 1});
  int64_t captures = state().captures;
  for (int run = 0; run < 3; ++run) {
    device->upload(*params.at("bn.running_var"), ones);
    runner.run({{"x", input(8)}}, params, states);
    // Nothing ran, so the update is the zero-filled temporary.
    Tensor after = device->download(*params.at("bn.running_var"));
    for (int64_t i = 0; i < 4; ++i)
      EXPECT_EQ(after.data<float>()[i], 0.0f) << "run " << run << " " << i;
  }
  EXPECT_EQ(state().captures, captures + 1) << "the later runs replay a graph";
  EXPECT_TRUE(state().launches.back().fromGraph);
}

TEST_F(CudaDeviceTest, GraphsCanBeTurnedOff) {
  test::ScopedEnv env("MOEC_CUDA_GRAPHS", "0");
  std::unique_ptr<cuda::CudaDevice> device = makeDevice();
  ProgramRunner runner(*device, bundle.programs.at("forward"));
  int64_t captures = state().captures;
  for (int i = 0; i < 3; ++i)
    run(runner, 8);
  EXPECT_EQ(state().captures, captures);
  EXPECT_EQ(state().launches.size(), 6u);
  for (const fake::Launch &l : state().launches)
    EXPECT_FALSE(l.fromGraph);
}

TEST_F(CudaDeviceTest, ProfilingTimesEachKernelWithoutGraphs) {
  std::unique_ptr<cuda::CudaDevice> device = makeDevice();
  device->setProfiling(true);
  ProgramRunner runner(*device, bundle.programs.at("forward"));
  int64_t captures = state().captures;
  for (int i = 0; i < 3; ++i)
    run(runner, 8);
  EXPECT_EQ(state().captures, captures);
  EXPECT_EQ(device->profile().at("moek_test_scale").calls, 3);
  EXPECT_EQ(device->profile().at("moek_test_mma").calls, 3);
}

TEST_F(CudaDeviceTest, AFailingLaunchNamesProgramGroupAndKernel) {
  std::unique_ptr<cuda::CudaDevice> device = makeDevice();
  ProgramRunner runner(*device, bundle.programs.at("forward"));
  run(runner, 8);
  // Fails while the second run is being captured; the stream must recover.
  state().failLaunchOf = "moek_test_mma";
  try {
    run(runner, 8);
    FAIL() << "the launch failure was not reported";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("program 'forward', group 1, kernel "
                                    "'moek_test_mma': cuLaunchKernel failed: "
                                    "CUDA_ERROR_INVALID_VALUE"));
  }
  state().failLaunchOf.clear();
  size_t before = state().launches.size();
  run(runner, 8);
  EXPECT_EQ(state().launches.size(), before + 2);
}

TEST_F(CudaDeviceTest, AnAsynchronousFaultNamesTheProgram) {
  // Without MOEC_CUDA_SYNC the fault surfaces at the wait that ends the run.
  std::string message = errorOfAFaultingRun();
  EXPECT_THAT(message, HasSubstr("program 'forward': a kernel failed on "
                                 "the GPU"));
  EXPECT_THAT(message, HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS"));
  EXPECT_THAT(message, HasSubstr("MOEC_CUDA_SYNC=1"));
}

TEST_F(CudaDeviceTest, SyncModeNamesTheFaultingKernel) {
  test::ScopedEnv env("MOEC_CUDA_SYNC", "1");
  EXPECT_THAT(errorOfAFaultingRun(),
              HasSubstr("program 'forward', group 0, kernel "
                        "'moek_test_scale': the kernel failed on "
                        "the GPU: CUDA_ERROR_ILLEGAL_ADDRESS"));
}

// The driver lets a kernel's static and dynamic shared memory reach 48 KiB
// together before the attribute must raise the dynamic part: 16 KiB
// dynamic beside 40 KiB static needs it.
TEST_F(CudaDeviceTest, StaticSharedMemoryCountsTowardsTheDefaultLimit) {
  bundle.programs.at("forward").groups[0].launches[0].sharedBytes = 16 * 1024;
  state().staticShared["moek_test_scale"] = 40 * 1024;
  std::unique_ptr<cuda::CudaDevice> device = makeDevice();
  ProgramRunner runner(*device, bundle.programs.at("forward"));
  EXPECT_NO_THROW(run(runner, 8));
  EXPECT_EQ(state().dynamicSharedLimit["moek_test_scale"], 16 * 1024);
}

TEST_F(CudaDeviceTest, TooMuchSharedMemoryIsRefusedAtPrepare) {
  bundle.programs.at("forward").groups[1].launches[0].sharedBytes = 200000;
  std::unique_ptr<cuda::CudaDevice> device = makeDevice();
  try {
    device->prepare(bundle.programs.at("forward"));
    FAIL() << "200000 bytes of shared memory were accepted";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("program 'forward', group 1, kernel "
                                    "'moek_test_mma'"));
    EXPECT_THAT(e.what(), HasSubstr("200000 of dynamic shared memory"));
    EXPECT_THAT(e.what(), HasSubstr("Fake A100"));
  }
}

// A block larger than the kernel's own limit (its __launch_bounds__, or
// its registers) would fail at the launch; prepare says why.
TEST_F(CudaDeviceTest, ABlockLargerThanTheKernelRunsIsRefusedAtPrepare) {
  state().maxThreads["moek_test_mma"] = 64;
  std::unique_ptr<cuda::CudaDevice> device = makeDevice();
  try {
    device->prepare(bundle.programs.at("forward"));
    FAIL() << "a block of 128 threads was accepted for a kernel of 64";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("program 'forward', group 1, kernel "
                                    "'moek_test_mma'"));
    EXPECT_THAT(e.what(), HasSubstr("a block of 128 threads; the kernel runs "
                                    "at most 64 per block"));
  }
  EXPECT_TRUE(state().launches.empty());
}

TEST_F(CudaDeviceTest, ABundleForAnotherDeviceLibraryIsRefused) {
  bundle.deviceLibraryHash = "0000";
  std::unique_ptr<cuda::CudaDevice> device = cuda::createCudaDevice();
  try {
    device->setBundle(bundle);
    FAIL() << "a bundle for another device library was accepted";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("another device library"));
  }
}

TEST_F(CudaDeviceTest, PreparingWithoutABundleIsAnInternalError) {
  std::unique_ptr<cuda::CudaDevice> device = cuda::createCudaDevice();
  EXPECT_THROW(device->prepare(bundle.programs.at("forward")), Error);
}

TEST_F(CudaDeviceTest, AProgramWithoutKernelsIsRefused) {
  std::unique_ptr<cuda::CudaDevice> device = makeDevice();
  ProgramDesc plain = bundle.programs.at("forward");
  plain.groups.clear();
  try {
    ProgramRunner runner(*device, plain);
    FAIL() << "a program without kernels was accepted";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("has no generated kernels"));
  }
}

} // namespace
