//===- CudaGpuTest.cpp - the cuda device on a real GPU --------------------===//
//
// Run where a GPU is (the GPU pack's run.sh runs them); each test skips
// itself, saying why, on a machine without a driver, a GPU or NVRTC. They
// launch kernels written like generated ones through the real driver and
// compare with the host on random inputs, and move random tensors through
// the cuda device's buffers.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"
#include "Device.h"
#include "GemmTestBundle.h"
#include "KernelParams.h"
#include "ProgramRunner.h"
#include "cuda/CublasLt.h"
#include "cuda/CudaDevice.h"
#include "cuda/CudaDriver.h"
#include "cuda/Nvrtc.h"
#include "moec/Cuda.h"
#include "moec/Error.h"
#include "moec/support/DeviceLibrary.h"

#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <random>

using namespace moec;
using namespace moec::detail::cuda;

namespace {

using detail::KernelParams;

/// The GPU 0 context, or a skip reason.
class GpuContext {
public:
  explicit GpuContext(std::string &why) {
    CudaEnvironment env = probeCudaEnvironment();
    if (cudaReadiness(env, why) != CudaReadiness::Ready)
      return;
    driver = &CudaDriver::get();
    driver->check(driver->cuDeviceGet(&device, 0), "cuDeviceGet");
    driver->check(driver->cuDevicePrimaryCtxRetain(&context, device),
                  "cuDevicePrimaryCtxRetain");
    driver->check(driver->cuCtxSetCurrent(context), "cuCtxSetCurrent");
    arch = env.gpus.front().arch;
  }
  ~GpuContext() {
    for (CUdeviceptr p : allocations)
      driver->cuMemFree(p);
    for (CUmodule m : modules)
      driver->cuModuleUnload(m);
    if (context)
      driver->cuDevicePrimaryCtxRelease(device);
  }
  bool ready() const { return context != nullptr; }

  CUdeviceptr upload(const void *data, size_t bytes) {
    CUdeviceptr p = 0;
    driver->check(driver->cuMemAlloc(&p, bytes), "cuMemAlloc");
    allocations.push_back(p);
    if (data)
      driver->check(driver->cuMemcpyHtoD(p, data, bytes), "cuMemcpyHtoD");
    return p;
  }

  template <typename T> std::vector<T> download(CUdeviceptr p, size_t count) {
    std::vector<T> out(count);
    driver->check(driver->cuMemcpyDtoH(out.data(), p, count * sizeof(T)),
                  "cuMemcpyDtoH");
    return out;
  }

  /// Compiles `source` for this GPU and launches `name` once.
  void launch(const std::string &source, const std::string &name,
              KernelParams &params, unsigned grid, unsigned block) {
    CompiledKernel k = Nvrtc::get().compile(source, name, arch, false);
    CUmodule module = nullptr;
    driver->check(driver->cuModuleLoadData(&module, k.cubin->data()),
                  "cuModuleLoadData");
    modules.push_back(module);
    CUfunction function = nullptr;
    driver->check(driver->cuModuleGetFunction(&function, module, name.c_str()),
                  "cuModuleGetFunction");
    void *args[] = {&params};
    driver->check(driver->cuLaunchKernel(function, grid, 1, 1, block, 1, 1, 0,
                                         nullptr, args, nullptr),
                  "cuLaunchKernel");
    driver->check(driver->cuStreamSynchronize(nullptr), "cuStreamSynchronize");
  }

  std::string arch;

private:
  const CudaDriver *driver = nullptr;
  CUdevice device = 0;
  CUcontext context = nullptr;
  std::vector<CUdeviceptr> allocations;
  std::vector<CUmodule> modules;
};

#define MOEC_REQUIRE_GPU(gpu)                                                  \
  std::string gpuMissing;                                                      \
  GpuContext gpu(gpuMissing);                                                  \
  if (!gpu.ready())                                                            \
    GTEST_SKIP() << "no usable GPU: " << gpuMissing

TEST(CudaGpu, TheEnvironmentIsReadyOnAGpuMachine) {
  MOEC_REQUIRE_GPU(gpu);
  CudaEnvironment env = probeCudaEnvironment();
  ASSERT_FALSE(env.gpus.empty());
  EXPECT_GT(env.gpus.front().multiprocessors, 0);
  EXPECT_GT(env.gpus.front().memoryBytes, size_t{1} << 30);
  EXPECT_FALSE(env.driverCudaVersion.empty());
  EXPECT_FALSE(env.nvrtcVersion.empty());
}

TEST(CudaGpu, ABlockReductionKernelMatchesTheHost) {
  MOEC_REQUIRE_GPU(gpu);
  const int64_t n = 1000;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float &v : x)
    v = dist(rng);
  KernelParams params{};
  params.buffers[0] =
      reinterpret_cast<void *>(gpu.upload(x.data(), n * sizeof(float)));
  CUdeviceptr y = gpu.upload(nullptr, n * sizeof(float));
  params.buffers[1] = reinterpret_cast<void *>(y);
  params.scalars[0] = n;
  unsigned blocks = (n + 127) / 128;
  gpu.launch(test::scaleKernelSource("moek_gpu_scale"), "moek_gpu_scale",
             params, blocks, 128);
  std::vector<float> got = gpu.download<float>(y, n);
  for (int64_t b = 0; b < int64_t(blocks); ++b) {
    double sum = 0;
    for (int64_t i = b * 128; i < std::min(n, (b + 1) * 128); ++i)
      sum += x[i];
    for (int64_t i = b * 128; i < std::min(n, (b + 1) * 128); ++i)
      EXPECT_NEAR(got[i], std::exp(x[i]) * sum,
                  1e-5 * (1 + std::abs(std::exp(x[i]) * sum)))
          << "element " << i;
  }
}

/// bf16 bits of `v`, rounded to nearest even.
uint16_t toBf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

float fromBf16(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

TEST(CudaGpu, TheTensorCoreTileMatchesTheFragmentLayoutOfPtx) {
  MOEC_REQUIRE_GPU(gpu);
  // mmaKernelSource: per 16-deep step j of tile t, every lane holds four
  // 32-bit registers of A (16x16) and two of B (16x8), two bf16 each, in
  // the register layout of mma.m16n8k16 (PTX ISA, "Matrix fragments").
  const int64_t tiles = 3;
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> small(-8, 8);
  std::vector<uint32_t> a(tiles * 4 * 128), b(tiles * 4 * 64);
  auto pair = [&] {
    uint16_t lo = toBf16(small(rng) / 8.0f), hi = toBf16(small(rng) / 8.0f);
    return uint32_t(lo) | (uint32_t(hi) << 16);
  };
  for (uint32_t &v : a)
    v = pair();
  for (uint32_t &v : b)
    v = pair();
  KernelParams params{};
  params.buffers[0] = reinterpret_cast<void *>(
      gpu.upload(a.data(), a.size() * sizeof(uint32_t)));
  params.buffers[1] = reinterpret_cast<void *>(
      gpu.upload(b.data(), b.size() * sizeof(uint32_t)));
  CUdeviceptr c = gpu.upload(nullptr, 128 * 16 * sizeof(float));
  params.buffers[2] = reinterpret_cast<void *>(c);
  params.scalars[0] = tiles;
  gpu.launch(test::mmaKernelSource("moek_gpu_mma"), "moek_gpu_mma", params, 1,
             128);
  std::vector<float> got = gpu.download<float>(c, 128 * 16);

  auto half = [](uint32_t reg, int which) {
    return fromBf16(static_cast<uint16_t>(which ? reg >> 16 : reg & 0xffff));
  };
  for (int thread = 0; thread < 128; ++thread) {
    int lane = thread % 32, group = lane / 4, inGroup = lane % 4;
    for (int j = 0; j < 4; ++j) {
      // Rebuild A and B of step (t, j) from every lane's registers.
      double acc[4] = {0, 0, 0, 0};
      for (int64_t t = 0; t < tiles; ++t) {
        float A[16][16], B[16][8];
        const uint32_t *fa = &a[(t * 4 + j) * 128];
        const uint32_t *fb = &b[(t * 4 + j) * 64];
        for (int l = 0; l < 32; ++l) {
          int g = l / 4, q = l % 4;
          for (int h = 0; h < 2; ++h) {
            A[g][q * 2 + h] = half(fa[l], h);
            A[g + 8][q * 2 + h] = half(fa[32 + l], h);
            A[g][q * 2 + 8 + h] = half(fa[64 + l], h);
            A[g + 8][q * 2 + 8 + h] = half(fa[96 + l], h);
            B[q * 2 + h][g] = half(fb[l], h);
            B[q * 2 + 8 + h][g] = half(fb[32 + l], h);
          }
        }
        const int rows[4] = {group, group, group + 8, group + 8};
        const int cols[4] = {inGroup * 2, inGroup * 2 + 1, inGroup * 2,
                             inGroup * 2 + 1};
        for (int r = 0; r < 4; ++r)
          for (int k = 0; k < 16; ++k)
            acc[r] += double(A[rows[r]][k]) * B[k][cols[r]];
      }
      for (int r = 0; r < 4; ++r)
        EXPECT_NEAR(got[thread * 16 + j * 4 + r], std::tanh(acc[r]), 1e-5)
            << "thread " << thread << " step " << j << " register " << r;
    }
  }
}

TEST(CudaGpu, DeviceBuffersKeepRandomTensorsExactly) {
  MOEC_REQUIRE_GPU(gpu);
  std::unique_ptr<detail::Device> device = detail::createDevice("cuda");
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  Tensor t(DType::F32, {37, 129});
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = dist(rng);
  std::unique_ptr<detail::DeviceBuffer> a = device->allocate(DType::F32,
                                                             {37, 129});
  std::unique_ptr<detail::DeviceBuffer> b = device->allocate(DType::F32,
                                                             {37, 129});
  device->upload(*a, t);
  device->copy(*b, *a);
  Tensor back = device->download(*b);
  ASSERT_EQ(back.numel(), t.numel());
  EXPECT_EQ(std::memcmp(back.raw(), t.raw(), t.numel() * sizeof(float)), 0);
}

/// A program of the bundle's kind: "forward", y[B, 4] from x[B, 4] by one
/// launch of `kernel` (its own source, without the device library) over
/// the 4B elements, 128 threads a block.
detail::BundleData elementwiseBundle(const std::string &kernel,
                                     std::string source) {
  using namespace detail;
  BundleData bundle;
  bundle.origin = "gpu-test.bundle.json";
  bundle.deviceLibraryHash = std::string(deviceLibraryHash());
  bundle.kernels[kernel] = {kernel, std::move(source)};
  ProgramDesc &p = bundle.programs["forward"];
  p.name = "forward";
  DimExpr batch = *DimExpr::parse("B"), items = *DimExpr::parse("4*B");
  p.buffers = {{BufferKind::Input, DType::F32, {batch, DimExpr(4)}, "x", {}},
               {BufferKind::Temp, DType::F32, {batch, DimExpr(4)}, "", {}}};
  p.inputs = {{"x", 0}};
  p.outputs = {{"y", 1}};
  LaunchDesc l;
  l.kernel = kernel;
  l.grid[0] = {items, 128};
  l.grid[1] = {DimExpr(1), 1};
  l.block[0] = 128;
  l.buffers = {0, 1};
  l.scalars = {items};
  GroupDesc g;
  g.launches.push_back(l);
  p.groups = {g};
  return bundle;
}

/// y = exp(x) times the sum of x over each 128-element block.
detail::BundleData scaleBundle() {
  std::string unit = test::scaleKernelSource("moek_gpu_scale", "gpu");
  return elementwiseBundle("moek_gpu_scale",
                           unit.substr(deviceLibrarySource().size() + 1));
}

/// A cuda device that captures a program's second run as a CUDA graph
/// (whatever MOEC_CUDA_GRAPHS and MOEC_CUDA_SYNC say), with "forward"
/// compiled, so that any kernel-cache warning comes before a test reads
/// stderr.
std::unique_ptr<CudaDevice> capturingDevice(const detail::BundleData &bundle) {
  test::ScopedEnv graphs("MOEC_CUDA_GRAPHS", "1");
  test::ScopedEnv sync("MOEC_CUDA_SYNC", std::nullopt);
  std::unique_ptr<CudaDevice> device = createCudaDevice();
  device->setBundle(bundle);
  device->prepare(bundle.programs.at("forward"));
  return device;
}

// The cuda device's own path on the real driver: prepare, a run kernel by
// kernel, the capture of a CUDA graph on the second run with the same
// buffers, its replays, the status words read back after each; every
// output against the host, and no warning (a refused capture would run
// kernel by kernel, slower, with one).
TEST(CudaGpu, TheDeviceRunsCapturesAndReplaysAProgram) {
  MOEC_REQUIRE_GPU(gpu);
  detail::BundleData bundle = scaleBundle();
  std::unique_ptr<CudaDevice> device = capturingDevice(bundle);
  detail::ProgramRunner runner(*device, bundle.programs.at("forward"));
  const int64_t batch = 80; // 320 elements: two full blocks and a part
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  ::testing::internal::CaptureStderr();
  for (int run = 0; run < 4; ++run) {
    Tensor x(DType::F32, {batch, 4});
    for (int64_t i = 0; i < x.numel(); ++i)
      x.data<float>()[i] = dist(rng);
    detail::BufferMap params, states;
    Tensor y = runner.run({{"x", x}}, params, states).at("y");
    if (y.numel() != x.numel()) {
      ADD_FAILURE() << "run " << run + 1 << ": y has " << y.numel()
                    << " elements";
      break;
    }
    const float *in = x.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t first = i / 128 * 128, last = std::min(x.numel(), first + 128);
      double sum = 0, magnitude = 0;
      for (int64_t j = first; j < last; ++j) {
        sum += in[j];
        magnitude += std::abs(in[j]);
      }
      // A float tree sum errs by at most log2(128) ulp of the sum of
      // magnitudes, expf by 2 ulp: 1e-5 of the magnitude is far above both.
      double growth = std::exp(double(in[i]));
      EXPECT_NEAR(y.data<float>()[i], growth * sum,
                  1e-5 * growth * magnitude + 1e-7)
          << "run " << run + 1 << ", element " << i;
    }
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

/// "forward": y = 2x over x [B, 4], whose kernel reports row r of x that
/// holds a NaN as token r of a router's logits [B, 2, 4] (the status words
/// a router kernel reports through).
detail::BundleData reportingBundle() {
  using namespace detail;
  BundleData bundle = elementwiseBundle("moek_gpu_report", R"(
extern "C" __global__ void __launch_bounds__(128)
moek_gpu_report(const moec::KernelParams p) {
  moec::gptr<const float> x = moec::bufferArg<const float>(p, 0);
  moec::gptr<float> y = moec::bufferArg<float>(p, 1);
  const int64_t n = moec::scalarArg(p, 0);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  const float v = x[i];
  // The first block reports last: the lowest item must win over the
  // first report.
  if (blockIdx.x == 0)
    for (int wait = 0; wait < 100; ++wait)
      __nanosleep(1000);
  if (moec::isNanValue(v))
    moec::reportBadItem(moec::kernelReport(p), moec::kStatusRouterLogits,
                        i / 4);
  y[i] = 2.0f * v;
}
)");
  ProgramDesc &p = bundle.programs.at("forward");
  p.buffers.push_back({BufferKind::Temp,
                       DType::F32,
                       {*DimExpr::parse("B"), DimExpr(2), DimExpr(4)},
                       "",
                       {}});
  StepDesc router;
  router.op = "moe.topk_router";
  router.in = {2};
  router.loc = "gpu-test.moe:7:3";
  p.steps = {router};
  p.groups[0].steps = {0};
  return bundle;
}

// The status words on the real GPU: a kernel's report fails the run with
// the cpu device's words for the lowest item reported, directly and from a
// replayed graph, and leaves nothing behind for the next run.
TEST(CudaGpu, AKernelsReportFailsTheRunAndIsClearedAfter) {
  MOEC_REQUIRE_GPU(gpu);
  detail::BundleData bundle = reportingBundle();
  std::unique_ptr<CudaDevice> device = capturingDevice(bundle);
  detail::ProgramRunner runner(*device, bundle.programs.at("forward"));
  const int64_t batch = 96; // 384 elements, three blocks
  auto runWithNanAt = [&](std::vector<int64_t> nans) {
    Tensor x(DType::F32, {batch, 4});
    for (int64_t i = 0; i < x.numel(); ++i)
      x.data<float>()[i] = 0.25f * float(i % 7) - 0.5f;
    for (int64_t i : nans)
      x.data<float>()[i] = std::nanf("");
    detail::BufferMap params, states;
    try {
      Tensor y = runner.run({{"x", x}}, params, states).at("y");
      for (int64_t i = 0; i < x.numel(); ++i)
        if (y.data<float>()[i] != 2 * x.data<float>()[i])
          return fmt::format("y[{}] is {}, not {}", i, y.data<float>()[i],
                             2 * x.data<float>()[i]);
      return std::string("(no error)");
    } catch (const Error &e) {
      return std::string(e.what());
    }
  };
  auto words = [](const char *token) {
    return fmt::format("program 'forward', group 0, kernel 'moek_gpu_report': "
                       "moe.topk_router: the logits of token {} contain NaN "
                       "or +inf, or are all -inf; the router cannot rank "
                       "them (from gpu-test.moe:7:3)",
                       token);
  };
  ::testing::internal::CaptureStderr();      // a refused capture warns
  EXPECT_EQ(runWithNanAt({}), "(no error)"); // kernel by kernel
  // Row 7 of x (token [3, 1]) is in block 0, which reports last; rows
  // 300 / 4 = 75 and 383 / 4 = 95 are in block 2: the lowest stays.
  EXPECT_EQ(runWithNanAt({383, 29, 300}), words("[3, 1]")); // captured
  EXPECT_EQ(runWithNanAt({}), "(no error)");                // replayed
  EXPECT_EQ(runWithNanAt({200, 2, 130}), words("[0, 0]"));
  EXPECT_EQ(runWithNanAt({}), "(no error)");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

// The cuda device's GEMMs through the real cuBLASLt, in the storage orders
// the plan writes (a linear layer with its bias, its input gradient, its
// weight gradient; bf16), each run four times so that the product is also
// captured in a CUDA graph and replayed. The fake cuBLASLt's tests check
// the same mapping against moec's own reading of cuBLASLt's conventions;
// this checks it against cuBLASLt.
TEST(CudaGpu, LibraryGemmsMatchTheHostInEveryStorageOrder) {
  MOEC_REQUIRE_GPU(gpu);
  std::string why;
  if (!CublasLt::get(&why))
    GTEST_SKIP() << "no cuBLASLt: " << why;
  using test::GemmCase;
  auto dims = [](const char *rows, int64_t cols) {
    return std::vector<detail::DimExpr>{*detail::DimExpr::parse(rows),
                                        detail::DimExpr(cols)};
  };
  GemmCase linear{"B", "96", "128", false, false, 128, 96};
  linear.aDims = dims("B", 128);
  linear.bDims = dims("128", 96);
  linear.bias = true;
  GemmCase inputGradient{"B", "128", "96", false, true, 96, 96};
  inputGradient.aDims = dims("B", 96);
  inputGradient.bDims = dims("128", 96);
  GemmCase weightGradient{"128", "96", "B", true, false, 128, 96};
  weightGradient.aDims = dims("B", 128);
  weightGradient.bDims = dims("B", 96);
  GemmCase bf16 = linear;
  bf16.in = bf16.out = DType::BF16;
  struct Case {
    const char *name;
    GemmCase gemm;
    double tolerance;
  } cases[] = {{"linear with bias", linear, 1e-5},
               {"input gradient", inputGradient, 1e-5},
               {"weight gradient", weightGradient, 1e-5},
               {"bf16 linear with bias", bf16, 8e-3}};
  for (const Case &c : cases) {
    detail::BundleData bundle = test::gemmBundle(c.gemm);
    std::unique_ptr<CudaDevice> device = capturingDevice(bundle);
    detail::ProgramRunner runner(*device, bundle.programs.at("forward"));
    ::testing::internal::CaptureStderr();
    for (int run = 0; run < 4; ++run) {
      // Other operands every run: a replay that computed nothing would
      // leave the last run's product in the reused output buffer.
      test::GemmOperands o = test::gemmOperands(c.gemm, 64, 0.5 * run);
      detail::BufferMap params, states;
      Tensor d =
          runner.run({{"a", o.a}, {"b", o.b}, {"bias", o.bias}}, params, states)
              .at("d");
      if (d.numel() != o.m * o.n) {
        ADD_FAILURE() << c.name << ": d has " << d.numel() << " elements";
        break;
      }
      double worst = 0;
      int64_t worstAt = 0;
      for (int64_t i = 0; i < o.m; ++i)
        for (int64_t j = 0; j < o.n; ++j) {
          double want = test::gemmExpected(c.gemm, o, i, j);
          double error = std::fabs(d.at(i * o.n + j) - want) /
                         (c.tolerance * (1 + std::fabs(want)));
          // A NaN compares false: it becomes the worst, for good.
          if (std::isnan(error) || error > worst) {
            worst = std::isnan(error) ? INFINITY : error;
            worstAt = i * o.n + j;
          }
        }
      // The stand-in kernel (the library declined) writes nothing into d.
      EXPECT_LE(worst, 1.0)
          << c.name << ", run " << run + 1 << ": d[" << worstAt / o.n << ", "
          << worstAt % o.n << "] is " << d.at(worstAt)
          << " (all zeros when cuBLASLt did not compute the product)";
    }
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << c.name;
  }
}

} // namespace
