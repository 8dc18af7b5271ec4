//===- EmuCompilerTest.cpp - building, caching and loading TUs ------------===//

#include "EmuTestUtil.h"
#include "ScopedEnv.h"

#include "moec/support/DeviceLibrary.h"
#include "moec/Error.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <random>
#include <unistd.h>

using namespace moec::emu;
using namespace moec::emu::test;

namespace {

/// A fresh, empty cache directory removed at the end of the test.
class TempCache {
public:
  TempCache() {
    std::random_device random;
    path = std::filesystem::temp_directory_path() /
           ("moec-emu-test-" + std::to_string(::getpid()) + "-" +
            std::to_string(random()));
    std::filesystem::create_directories(path);
  }
  ~TempCache() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  EmuOptions options() const {
    EmuOptions options;
    options.cacheDir = path.string();
    return options;
  }
  std::filesystem::path path;
};

double seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

const char *kTinyKernel = R"cuda(
extern "C" __global__ void fill(const moec::KernelParams p) {
  moec::gptr<int> y = moec::bufferArg<int>(p, 0);
  y[threadIdx.x] = static_cast<int>(moec::scalarArg(p, 0) + threadIdx.x);
}
MOEC_EMU_EXPORT_KERNEL(fill)
)cuda";

} // namespace

TEST(EmuCompiler, CompileErrorCarriesTheLogAndTheSavedSource) {
  TempCache cache;
  std::string source = deviceHeaders() + R"cuda(
extern "C" __global__ void broken(const moec::KernelParams p) {
  int x = undeclaredName + 1;
}
MOEC_EMU_EXPORT_KERNEL(broken)
)cuda";
  try {
    EmuModule::load(source, "broken-tu", cache.options());
    FAIL() << "compiled";
  } catch (const moec::Error &e) {
    std::string message = e.what();
    EXPECT_NE(message.find("compiling 'broken-tu' failed"), std::string::npos)
        << message;
    EXPECT_NE(message.find("error:"), std::string::npos) << message;
    EXPECT_NE(message.find("undeclaredName"), std::string::npos) << message;
    size_t at = message.find("the source is saved as ");
    ASSERT_NE(at, std::string::npos) << message;
    std::string path = message.substr(at + 23);
    path = path.substr(0, path.find('\n'));
    std::ifstream in(path);
    std::string saved((std::istreambuf_iterator<char>(in)),
                      std::istreambuf_iterator<char>());
    EXPECT_EQ(saved, source);
  }
}

TEST(EmuCompiler, SecondLoadHitsTheCache) {
  TempCache cache;
  std::string source = deviceHeaders() + kTinyKernel;
  auto start = std::chrono::steady_clock::now();
  EmuModule first = EmuModule::load(source, "tiny", cache.options());
  double compile = seconds(start);
  EXPECT_FALSE(first.fromCache());
  start = std::chrono::steady_clock::now();
  EmuModule second = EmuModule::load(source, "tiny", cache.options());
  double hit = seconds(start);
  EXPECT_TRUE(second.fromCache());
  EXPECT_EQ(first.libraryPath(), second.libraryPath());
  EXPECT_LT(hit, compile / 5) << "compile " << compile << " s, hit " << hit;
  std::printf("[ emu      ] compile %.3f s, cache hit %.4f s\n", compile, hit);

  std::vector<int> y(8, 0);
  Launch(1, 8).buffer(0, y).scalar(0, 40).run(second, "fill");
  for (int t = 0; t < 8; ++t)
    EXPECT_EQ(y[t], 40 + t);

  // A different option is a different library.
  EmuOptions checked = cache.options();
  checked.check = true;
  EmuModule third = EmuModule::load(source, "tiny", checked);
  EXPECT_FALSE(third.fromCache());
  EXPECT_NE(third.libraryPath(), first.libraryPath());
}

// MOEC_EMU_CXXFLAGS goes to the compiler, after every other flag, and a
// library built with other flags is another library.
TEST(EmuCompiler, FlagsFromTheEnvironmentComeLastAndKeyTheCache) {
  TempCache cache;
  std::string source = deviceHeaders() + R"cuda(
extern "C" __global__ void offset(const moec::KernelParams p) {
  moec::gptr<int> y = moec::bufferArg<int>(p, 0);
  y[threadIdx.x] = MOEC_TEST_OFFSET + static_cast<int>(threadIdx.x);
}
MOEC_EMU_EXPORT_KERNEL(offset)
)cuda";
  std::vector<std::string> libraries;
  for (int offset : {7, 9}) {
    std::string flags = "-O0 -DMOEC_TEST_OFFSET=" + std::to_string(offset);
    moec::test::ScopedEnv env("MOEC_EMU_CXXFLAGS", flags);
    EmuModule module = EmuModule::load(source, "offset", cache.options());
    EXPECT_FALSE(module.fromCache()) << flags;
    libraries.push_back(module.libraryPath());
    std::vector<int> y(4, 0);
    Launch(1, 4).buffer(0, y).run(module, "offset");
    for (int t = 0; t < 4; ++t)
      EXPECT_EQ(y[t], offset + t) << flags;
  }
  EXPECT_NE(libraries[0], libraries[1]);
  // After the options' own flags: its -U undoes their -D, and the
  // compiler's error names the macro.
  EmuOptions defined = cache.options();
  defined.extraFlags = {"-DMOEC_TEST_OFFSET=3"};
  EXPECT_NO_THROW(EmuModule::load(source, "offset", defined));
  moec::test::ScopedEnv env("MOEC_EMU_CXXFLAGS", "-UMOEC_TEST_OFFSET");
  try {
    EmuModule::load(source, "offset", defined);
    FAIL() << "compiled without MOEC_TEST_OFFSET";
  } catch (const moec::Error &e) {
    EXPECT_NE(std::string(e.what()).find("MOEC_TEST_OFFSET"), std::string::npos)
        << e.what();
  }
}

TEST(EmuCompiler, ADamagedCachedLibraryIsRebuiltNotLoaded) {
  TempCache cache;
  std::string source = deviceHeaders() + kTinyKernel;
  std::string library =
      EmuModule::load(source, "tiny", cache.options()).libraryPath();
  // Damage the cached library the way a full disk or a stray write would:
  // same size, garbage in the middle (dlopen of it could crash).
  {
    std::fstream file(library,
                      std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(
        std::filesystem::file_size(library) / 2));
    std::string garbage(4096, '\xAB');
    file.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  EmuModule again = EmuModule::load(source, "tiny", cache.options());
  EXPECT_FALSE(again.fromCache());
  std::vector<int> y(4, 0);
  Launch(1, 4).buffer(0, y).scalar(0, 7).run(again, "fill");
  for (int t = 0; t < 4; ++t)
    EXPECT_EQ(y[t], 7 + t);
  // The rebuilt library is trusted again.
  EXPECT_TRUE(EmuModule::load(source, "tiny", cache.options()).fromCache());
}

TEST(EmuCompiler, UnknownKernelsAreReported) {
  const EmuModule &module = correctModule();
  EXPECT_TRUE(module.hasKernel("blockReduce"));
  EXPECT_FALSE(module.hasKernel("noSuchKernel"));
  try {
    module.launch("noSuchKernel", EmuLaunchConfig{}, KernelParams{});
    FAIL() << "launched";
  } catch (const moec::Error &e) {
    EXPECT_NE(std::string(e.what()).find("no kernel 'noSuchKernel'"),
              std::string::npos)
        << e.what();
  }
}

TEST(EmuCompiler, PreludeIsEmbedded) {
  EXPECT_NE(emuPrelude().find("#define MOEC_EMU_EXPORT_KERNEL(name)"),
            std::string::npos);
  EXPECT_NE(defaultEmuCacheDir().find("emu"), std::string::npos);
}

// The whole device library as the runtime embeds it builds in check mode,
// and its block reduction, last-block ticket and GEMM tile work.
TEST(EmuCompiler, DeviceLibraryBuildsInCheckMode) {
  std::string source = std::string(moec::deviceLibrarySource()) + R"cuda(
extern "C" __global__ void __launch_bounds__(128)
libraryReduce(const moec::KernelParams p) {
  moec::gptr<const float> x = moec::bufferArg<const float>(p, 0);
  moec::gptr<float> partials = moec::bufferArg<float>(p, 1);
  moec::gptr<unsigned> ticket = moec::bufferArg<unsigned>(p, 2);
  moec::gptr<float> out = moec::bufferArg<float>(p, 3);
  MOEC_SHARED(float, scratch, 4);
  float v = x[moec::blockLinear() * 128 + threadIdx.x];
  float sum = moec::blockSum<128>(v, scratch);
  if (threadIdx.x == 0)
    partials[moec::blockLinear()] = sum;
  if (moec::isLastBlock(ticket) && threadIdx.x == 0) {
    float total = 0.0f;
    for (unsigned b = 0; b < gridDim.x; ++b)
      total += partials[b];
    out[0] = total;
  }
}
MOEC_EMU_EXPORT_KERNEL(libraryReduce)

extern "C" __global__ void __launch_bounds__(256)
libraryGemm(const moec::KernelParams p) {
  moec::gptr<float> c = moec::bufferArg<float>(p, 2);
  const int64_t M = moec::scalarArg(p, 0), N = moec::scalarArg(p, 1),
                K = moec::scalarArg(p, 2);
  moec::RowMajor<float> a{moec::bufferArg<const float>(p, 0), K};
  moec::ColMajor<float> b{moec::bufferArg<const float>(p, 1), K};
  moec::gemmTile<32, 32, 8, 256>(
      static_cast<int64_t>(blockIdx.x) * 32, static_cast<int64_t>(blockIdx.y) * 32,
      M, N, K, a, b, [&](int64_t m, int64_t n, float v) { c[m * N + n] = v; });
}
MOEC_EMU_EXPORT_KERNEL(libraryGemm)
)cuda";
  EmuModule module =
      EmuModule::load(source, "emu-test-devlib", testOptions(true));
  const int blocks = 5;
  std::vector<float> x(128 * blocks), partials(blocks), out(1);
  std::vector<unsigned> ticket(1, 0);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(i % 11);
  Launch(blocks, 128)
      .buffer(0, x)
      .buffer(1, partials)
      .buffer(2, ticket)
      .buffer(3, out)
      .hostThreads(2)
      .run(module, "libraryReduce");
  float expected = 0.0f;
  for (float v : x)
    expected += v;
  EXPECT_EQ(out[0], expected);
  EXPECT_EQ(ticket[0], 0u);

  // C = A B^T with A (M, K) and B (N, K) row-major, fp32 FMA in k order.
  const int M = 40, N = 24, K = 20;
  std::vector<float> A(M * K), B(N * K), C(M * N, 0.0f);
  for (int i = 0; i < M * K; ++i)
    A[i] = std::sin(0.7f * i);
  for (int i = 0; i < N * K; ++i)
    B[i] = std::cos(0.3f * i);
  Launch gemm(2, 256);
  gemm.config.grid = {2, 1, 1};
  gemm.buffer(0, A).buffer(1, B).buffer(2, C).scalar(0, M).scalar(1, N).scalar(
      2, K);
  gemm.run(module, "libraryGemm");
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int k = 0; k < K; ++k)
        acc = std::fma(A[m * K + k], B[n * K + k], acc);
      ASSERT_EQ(C[m * N + n], acc) << m << ", " << n;
    }
}
