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
#include "KernelParams.h"
#include "cuda/CudaDriver.h"
#include "cuda/Nvrtc.h"
#include "moec/Cuda.h"
#include "moec/Error.h"

#include <cmath>
#include <cstring>
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

} // namespace
