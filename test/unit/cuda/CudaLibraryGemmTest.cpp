//===- CudaLibraryGemmTest.cpp - library GEMMs on the cuda device ---------===//
//
// The plan hands dense GEMMs that fuse nothing to cuBLASLt. Here the cuda
// device runs them against the fake driver and the fake cuBLASLt, which
// computes cuBLASLt's column-major product on host memory: the values show
// whether the device's row-major mapping (operand swap, transposes, leading
// dimensions, bias) is right, for every storage order the plan writes.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"
#include "FakeCublasLt.h"
#include "FakeCudaDriver.h"
#include "GemmTestBundle.h"
#include "ProgramRunner.h"
#include "cuda/CudaDevice.h"

#include <cmath>
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace moec;
using namespace moec::detail;
using ::testing::HasSubstr;

namespace {

template <typename T> T &stateOf(const char *path, const char *symbol) {
  void *handle = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    throw Error(std::string("cannot open ") + path + ": " + ::dlerror());
  auto get = reinterpret_cast<T *(*)()>(::dlsym(handle, symbol));
  return *get();
}

fake::CublasLtState &lt() {
  return stateOf<fake::CublasLtState>(std::getenv("MOEC_CUBLASLT_LIBRARY"),
                                      "fakeCublasLtState");
}

fake::State &driver() {
  const char *path = std::getenv("MOEC_CUDA_DRIVER_LIBRARY");
  return stateOf<fake::State>(path, "fakeCudaState");
}

DimExpr dim(const std::string &text) { return *DimExpr::parse(text); }

using test::GemmCase;
using test::GemmOperands;

class CudaLibraryGemmTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    if (!test::tryNvrtc(why))
      GTEST_SKIP() << "NVRTC is not available: " << why;
    driver().resetInjections();
    lt().failCreate = false;
    lt().noAlgorithm = false;
    lt().failMatmul = false;
    lt().matmuls = 0;
    lt().queriesWithoutBiasPointer = 0;
  }

  /// Runs test::linearGemmCase() once at B = 2 on a fresh device.
  void runLinearOnce() {
    BundleData bundle = test::gemmBundle(test::linearGemmCase());
    std::unique_ptr<cuda::CudaDevice> device = cuda::createCudaDevice();
    device->setBundle(bundle);
    ProgramRunner runner(*device, bundle.programs.at("forward"));
    BufferMap params, states;
    runner.run({{"a", test::gemmOperand(DType::F32, {2, 5}, 0)},
                {"b", test::gemmOperand(DType::F32, {5, 3}, 1)},
                {"bias", test::gemmOperand(DType::F32, {3}, 2)}},
               params, states);
  }

  /// Runs the case at B = `batch` and checks d against the loaders'
  /// product, within `tolerance` relative to the largest |d|.
  void expectProduct(const GemmCase &c, int64_t batch, double tolerance) {
    BundleData bundle = test::gemmBundle(c);
    std::unique_ptr<cuda::CudaDevice> device = cuda::createCudaDevice();
    device->setBundle(bundle);
    GemmOperands o = test::gemmOperands(c, batch);
    ProgramRunner runner(*device, bundle.programs.at("forward"));
    BufferMap params, states;
    Tensor d =
        runner.run({{"a", o.a}, {"b", o.b}, {"bias", o.bias}}, params, states)
            .at("d");
    EXPECT_EQ(lt().matmuls, 1);
    EXPECT_TRUE(driver().launches.empty())
        << "cuBLASLt computes the GEMM: no kernel is launched";
    ASSERT_EQ(d.shape(), (Shape{o.m, o.n}));
    ASSERT_EQ(d.dtype(), c.out);
    for (int64_t i = 0; i < o.m; ++i)
      for (int64_t j = 0; j < o.n; ++j) {
        double want = test::gemmExpected(c, o, i, j);
        ASSERT_NEAR(d.at(i * o.n + j), want, tolerance * (1 + std::fabs(want)))
            << "d[" << i << ", " << j << "]";
      }
  }
};

// A linear layer: x [B, 5] times W [5, 3] plus its bias.
TEST_F(CudaLibraryGemmTest, RowMajorOperandsWithBias) {
  GemmCase c = test::linearGemmCase();
  c.bias = true;
  expectProduct(c, 7, 1e-6);
  EXPECT_EQ(lt().lastM, 3u) << "cuBLASLt's m is moec's n";
  EXPECT_EQ(lt().lastN, 7u);
  EXPECT_EQ(lt().lastK, 5u);
  // The algorithm is chosen for the whole description, bias pointer too.
  EXPECT_EQ(lt().queriesWithoutBiasPointer, 0);
}

// A linear gradient's dx = dy W^T: W [5, 3] read as a column-major 3 x 5.
TEST_F(CudaLibraryGemmTest, ColumnMajorB) {
  GemmCase c{"B", "5", "3", false, true, 3, 3};
  c.aDims = {dim("B"), DimExpr(3)};
  c.bDims = {DimExpr(5), DimExpr(3)};
  expectProduct(c, 6, 1e-6);
}

// A weight gradient dW = x^T dy over B tokens: x [B, 4] read column-major.
TEST_F(CudaLibraryGemmTest, ColumnMajorAWithATokenDepth) {
  GemmCase c{"4", "3", "B", true, false, 4, 3};
  c.aDims = {dim("B"), DimExpr(4)};
  c.bDims = {dim("B"), DimExpr(3)};
  expectProduct(c, 9, 1e-6);
}

// Padded leading dimensions and both operands transposed.
TEST_F(CudaLibraryGemmTest, BothColumnMajorWithWideLeadingDimensions) {
  GemmCase c{"3", "2", "4", true, true, 5, 6};
  c.aDims = {DimExpr(4), DimExpr(5)}; // A(i, l) = a[l*5 + i]
  c.bDims = {DimExpr(2), DimExpr(6)}; // B(l, j) = b[j*6 + l]
  expectProduct(c, 1, 1e-6);
}

// bf16 operands into an f32 result (a bf16 model's f32 gradient).
TEST_F(CudaLibraryGemmTest, Bf16OperandsIntoF32) {
  GemmCase c = test::linearGemmCase();
  c.in = DType::BF16;
  expectProduct(c, 4, 1e-6);
}

// bf16 in and out, with a bf16 bias: rounded once, at the store.
TEST_F(CudaLibraryGemmTest, Bf16OperandsIntoBf16WithBias) {
  GemmCase c = test::linearGemmCase();
  c.in = c.out = DType::BF16;
  c.bias = true;
  expectProduct(c, 4, 8e-3);
}

TEST_F(CudaLibraryGemmTest, NoAlgorithmLaunchesTheKernelInstead) {
  lt().noAlgorithm = true;
  runLinearOnce();
  EXPECT_EQ(lt().matmuls, 0);
  ASSERT_EQ(driver().launches.size(), 1u);
  EXPECT_EQ(driver().launches[0].kernel, "moek_test_gemm");
}

// A library that loads but cannot start (the GPU pack's check runs the
// real one against the fake driver) leaves every GEMM to the kernels.
TEST_F(CudaLibraryGemmTest, ALibraryThatCannotStartLeavesTheGemmsToTheKernels) {
  lt().failCreate = true;
  ::testing::internal::CaptureStderr();
  runLinearOnce();
  std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(warning, HasSubstr("moec: warning: cuBLASLt ("));
  EXPECT_THAT(warning, HasSubstr("cannot start: cublasLtCreate failed"));
  EXPECT_EQ(lt().matmuls, 0);
  EXPECT_EQ(driver().launches.size(), 1u);
}

TEST_F(CudaLibraryGemmTest, AnEmptyProductIsTheKernels) {
  GemmCase c{"4", "3", "B", true, false, 4, 3};
  c.aDims = {dim("B"), DimExpr(4)};
  c.bDims = {dim("B"), DimExpr(3)};
  BundleData bundle = test::gemmBundle(c);
  bundle.programs.at("forward").groups[0].launches[0].grid[0] = {DimExpr(4),
                                                                 64};
  std::unique_ptr<cuda::CudaDevice> device = cuda::createCudaDevice();
  device->setBundle(bundle);
  const ProgramDesc &program = bundle.programs.at("forward");
  device->prepare(program);
  // No B = 0 reaches a program through a session; the device still leaves
  // a product of depth 0 to the kernel, which writes its zeros.
  auto a = device->allocate(DType::F32, {0, 4});
  auto b = device->allocate(DType::F32, {0, 3});
  auto bias = device->allocate(DType::F32, {3});
  auto d = device->allocate(DType::F32, {4, 3});
  device->run(program, {{"B", 0}}, {a.get(), b.get(), bias.get(), d.get()});
  EXPECT_EQ(lt().matmuls, 0);
  EXPECT_EQ(driver().launches.size(), 1u);
}

TEST_F(CudaLibraryGemmTest, ALibraryFailureNamesProgramAndKernel) {
  lt().failMatmul = true;
  try {
    runLinearOnce();
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("program 'forward', group 0, kernel "
                                    "'moek_test_gemm'"));
    EXPECT_THAT(e.what(), HasSubstr("cublasLtMatmul failed: "
                                    "CUBLAS_STATUS_NOT_SUPPORTED"));
    EXPECT_THAT(e.what(), HasSubstr("MOEC_CUBLASLT=0"));
  }
}

// A GEMM record that disagrees with its buffers (the bundle was edited, or
// its compiler is wrong) is an error naming the launch, before cuBLASLt
// reads a byte.
TEST_F(CudaLibraryGemmTest, ARecordThatDoesNotFitItsBuffersIsAnError) {
  struct Bad {
    int64_t lda, ldb;
    const char *why;
  } cases[] = {
      {6, 3,
       "A (2 lines of 5 elements, 6 apart) reaches past its 10-element "
       "buffer"},
      {4, 3, "A has lines of 5 elements 4 apart"},
      {5, 2, "B has lines of 3 elements 2 apart"},
  };
  for (const Bad &bad : cases) {
    GemmCase c = test::linearGemmCase();
    c.lda = bad.lda;
    c.ldb = bad.ldb;
    BundleData bundle = test::gemmBundle(c);
    std::unique_ptr<cuda::CudaDevice> device = cuda::createCudaDevice();
    device->setBundle(bundle);
    ProgramRunner runner(*device, bundle.programs.at("forward"));
    BufferMap params, states;
    try {
      runner.run({{"a", test::gemmOperand(DType::F32, {2, 5}, 0)},
                  {"b", test::gemmOperand(DType::F32, {5, 3}, 1)},
                  {"bias", test::gemmOperand(DType::F32, {3}, 2)}},
                 params, states);
      ADD_FAILURE() << "expected an error for " << bad.why;
    } catch (const Error &e) {
      EXPECT_THAT(e.what(), HasSubstr("program 'forward', group 0, kernel "
                                      "'moek_test_gemm': the bundle's GEMM "
                                      "record (m 2, n 3, k 5) does not fit "
                                      "its buffers: "));
      EXPECT_THAT(e.what(), HasSubstr(bad.why));
    }
    EXPECT_EQ(lt().matmuls, 0);
  }
}

TEST_F(CudaLibraryGemmTest, DescriptorsAndWorkspaceAreReleasedWithTheDevice) {
  int64_t allocations = driver().liveAllocations;
  int64_t objects = lt().liveObjects;
  expectProduct(test::linearGemmCase(), 3, 1e-6);
  EXPECT_EQ(driver().liveAllocations, allocations);
  EXPECT_EQ(lt().liveObjects, objects);
  EXPECT_EQ(lt().handles, 0);
}

} // namespace
