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
#include "ProgramRunner.h"
#include "cuda/CudaDevice.h"
#include "moec/support/DeviceLibrary.h"

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

/// Element (i, j) of a matrix stored row-major (p[i*ld + j]) or
/// column-major (p[j*ld + i]): gemm.cuh's RowMajor and ColMajor loaders.
double at(const Tensor &t, bool colMajor, int64_t ld, int64_t i, int64_t j) {
  return t.at(colMajor ? j * ld + i : i * ld + j);
}

/// Values that are not round in bf16 and differ from element to element.
Tensor filled(DType dtype, Shape shape, double phase) {
  Tensor t(DType::F32, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = float(std::sin(0.7 * double(i) + phase) + 0.1);
  return dtype == DType::F32 ? t : t.to(dtype);
}

/// One program, "forward": d = A B (+ bias), A and B inputs stored as the
/// case says, and the library GEMM record the plan would write.
struct GemmCase {
  std::string m, n, k;
  bool aCol = false, bCol = false;
  int64_t lda = 0, ldb = 0;
  DType in = DType::F32, out = DType::F32;
  bool bias = false;
  /// The stored shapes of A and B.
  std::vector<DimExpr> aDims{}, bDims{};
};

/// A linear layer's product: x [B, 5] times W [5, 3], both row-major.
GemmCase linearCase() {
  GemmCase c{"B", "3", "5", false, false, 5, 3};
  c.aDims = {dim("B"), DimExpr(5)};
  c.bDims = {DimExpr(5), DimExpr(3)};
  return c;
}

BundleData bundleFor(const GemmCase &c) {
  BundleData bundle;
  bundle.origin = "gemm.bundle.json";
  bundle.deviceLibraryHash = std::string(deviceLibraryHash());
  std::string unit = test::scaleKernelSource("moek_test_gemm", "gemm");
  bundle.kernels["moek_test_gemm"] = {
      "moek_test_gemm", unit.substr(deviceLibrarySource().size() + 1)};
  ProgramDesc &p = bundle.programs["forward"];
  p.name = "forward";
  p.buffers = {{BufferKind::Input, c.in, c.aDims, "a", {}},
               {BufferKind::Input, c.in, c.bDims, "b", {}},
               {BufferKind::Input, c.out, {dim(c.n)}, "bias", {}},
               {BufferKind::Temp, c.out, {dim(c.m), dim(c.n)}, "", {}}};
  p.inputs = {{"a", 0}, {"b", 1}, {"bias", 2}};
  p.outputs = {{"d", 3}};
  LaunchDesc l;
  l.kernel = "moek_test_gemm";
  l.grid[0] = {dim(c.m), 64};
  l.block[0] = 128;
  l.buffers = {0, 1, c.bias ? 2 : -1, 3};
  GemmDesc g;
  g.library = true;
  g.why = "dense GEMM, nothing fused";
  g.m = dim(c.m);
  g.n = dim(c.n);
  g.k = dim(c.k);
  g.a = {0, c.aCol, c.lda};
  g.b = {1, c.bCol, c.ldb};
  g.d = 3;
  g.bias = c.bias ? 2 : -1;
  g.compute = "f32";
  l.gemm = g;
  GroupDesc group;
  group.kind = "gemm";
  group.launches.push_back(l);
  p.groups.push_back(group);
  return bundle;
}

class CudaLibraryGemmTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    if (!test::tryNvrtc(why))
      GTEST_SKIP() << "NVRTC is not available: " << why;
    driver().launches.clear();
    lt().failCreate = false;
    lt().noAlgorithm = false;
    lt().failMatmul = false;
    lt().matmuls = 0;
    lt().queriesWithoutBiasPointer = 0;
  }

  /// Runs linearCase() once at B = 2 on a fresh device.
  void runLinearOnce() {
    BundleData bundle = bundleFor(linearCase());
    std::unique_ptr<cuda::CudaDevice> device = cuda::createCudaDevice();
    device->setBundle(bundle);
    ProgramRunner runner(*device, bundle.programs.at("forward"));
    BufferMap params, states;
    runner.run({{"a", filled(DType::F32, {2, 5}, 0)},
                {"b", filled(DType::F32, {5, 3}, 1)},
                {"bias", filled(DType::F32, {3}, 2)}},
               params, states);
  }

  /// Runs the case at B = `batch` and checks d against the loaders'
  /// product, within `tolerance` relative to the largest |d|.
  void expectProduct(const GemmCase &c, int64_t batch, double tolerance) {
    BundleData bundle = bundleFor(c);
    std::unique_ptr<cuda::CudaDevice> device = cuda::createCudaDevice();
    device->setBundle(bundle);
    const ProgramDesc &program = bundle.programs.at("forward");
    SymbolValues symbols{{"B", batch}};
    auto shape = [&](const std::vector<DimExpr> &dims) {
      Shape s;
      for (const DimExpr &d : dims)
        s.push_back(*d.evaluate(symbols));
      return s;
    };
    Tensor a = filled(c.in, shape(c.aDims), 0.3);
    Tensor b = filled(c.in, shape(c.bDims), 1.1);
    int64_t m = *dim(c.m).evaluate(symbols), n = *dim(c.n).evaluate(symbols),
            k = *dim(c.k).evaluate(symbols);
    Tensor bias = filled(c.out, {n}, 2.0);
    ProgramRunner runner(*device, program);
    BufferMap params, states;
    Tensor d = runner.run({{"a", a}, {"b", b}, {"bias", bias}}, params, states)
                   .at("d");
    EXPECT_EQ(lt().matmuls, 1);
    EXPECT_TRUE(driver().launches.empty())
        << "cuBLASLt computes the GEMM: no kernel is launched";
    ASSERT_EQ(d.shape(), (Shape{m, n}));
    ASSERT_EQ(d.dtype(), c.out);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double want = c.bias ? at(bias, false, n, 0, j) : 0;
        for (int64_t l = 0; l < k; ++l)
          want += at(a, c.aCol, c.lda, i, l) * at(b, c.bCol, c.ldb, l, j);
        double got = d.at(i * n + j);
        ASSERT_NEAR(got, want, tolerance * (1 + std::fabs(want)))
            << "d[" << i << ", " << j << "]";
      }
  }
};

// A linear layer: x [B, 5] times W [5, 3] plus its bias.
TEST_F(CudaLibraryGemmTest, RowMajorOperandsWithBias) {
  GemmCase c = linearCase();
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
  GemmCase c = linearCase();
  c.in = DType::BF16;
  expectProduct(c, 4, 1e-6);
}

// bf16 in and out, with a bf16 bias: rounded once, at the store.
TEST_F(CudaLibraryGemmTest, Bf16OperandsIntoBf16WithBias) {
  GemmCase c = linearCase();
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
  BundleData bundle = bundleFor(c);
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
    GemmCase c = linearCase();
    c.lda = bad.lda;
    c.ldb = bad.ldb;
    BundleData bundle = bundleFor(c);
    std::unique_ptr<cuda::CudaDevice> device = cuda::createCudaDevice();
    device->setBundle(bundle);
    ProgramRunner runner(*device, bundle.programs.at("forward"));
    BufferMap params, states;
    try {
      runner.run({{"a", filled(DType::F32, {2, 5}, 0)},
                  {"b", filled(DType::F32, {5, 3}, 1)},
                  {"bias", filled(DType::F32, {3}, 2)}},
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
  expectProduct(linearCase(), 3, 1e-6);
  EXPECT_EQ(driver().liveAllocations, allocations);
  EXPECT_EQ(lt().liveObjects, objects);
  EXPECT_EQ(lt().handles, 0);
}

} // namespace
