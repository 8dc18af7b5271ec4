//===- CudaTestUtil.cpp - shared helpers of the cuda tests ----------------===//

#include "CudaTestUtil.h"
#include "moec/support/DeviceLibrary.h"

#include <algorithm>
#include <cstdlib>
#include <dirent.h>
#include <fmt/format.h>
#include <fstream>
#include <ftw.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace moec::test {

namespace {

int removeEntry(const char *path, const struct stat *, int, struct FTW *) {
  return ::remove(path);
}

/// Every test process caches kernels in its own directory, so that tests
/// never read a user's cache or each other's entries.
class CacheEnvironment : public ::testing::Environment {
public:
  void SetUp() override {
    dir = std::make_unique<TempDir>();
    ::setenv("MOEC_CACHE_DIR", dir->path().c_str(), 1);
  }
  void TearDown() override { dir.reset(); }

private:
  std::unique_ptr<TempDir> dir;
};

[[maybe_unused]] ::testing::Environment *const cacheEnvironment =
    ::testing::AddGlobalTestEnvironment(new CacheEnvironment);

} // namespace

TempDir::TempDir() {
  const char *tmp = std::getenv("TMPDIR");
  std::string pattern =
      fmt::format("{}/moec-cuda-test.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!::mkdtemp(pattern.data()))
    throw Error("cannot create a temporary directory " + pattern);
  dir = pattern;
}

TempDir::~TempDir() {
  ::nftw(dir.c_str(), removeEntry, 16, FTW_DEPTH | FTW_PHYS);
}

const detail::cuda::Nvrtc *tryNvrtc(std::string &why) {
  try {
    return &detail::cuda::Nvrtc::get();
  } catch (const Error &e) {
    why = e.what();
    return nullptr;
  }
}

std::vector<std::string> filesIn(const std::string &dir) {
  std::vector<std::string> names;
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return names;
  while (struct dirent *entry = ::readdir(d)) {
    std::string name = entry->d_name;
    struct stat st;
    if (::stat((dir + "/" + name).c_str(), &st) == 0 && S_ISREG(st.st_mode))
      names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string scaleKernelSource(const std::string &name, const std::string &tag) {
  std::string kernel = R"(
extern "C" __global__ void __launch_bounds__(128)
NAME(const moec::KernelParams p) {
  moec::gptr<const float> x = moec::bufferArg<const float>(p, 0);
  moec::gptr<float> y = moec::bufferArg<float>(p, 1);
  const int64_t n = moec::scalarArg(p, 0);
  MOEC_SHARED(float, partial, 128);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const float v = i < n ? x[i] : 0.0f;
  partial[threadIdx.x] = v;
  __syncthreads();
  for (int s = 64; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (i < n)
    y[i] = expf(v) * partial[0];
}
)";
  kernel.replace(kernel.find("NAME"), 4, name);
  return std::string(deviceLibrarySource()) + "\n" + kernel + "// " + tag +
         "\n";
}

std::string mmaKernelSource(const std::string &name) {
  std::string kernel = R"(
extern "C" __global__ void __launch_bounds__(128)
NAME(const moec::KernelParams p) {
  moec::gptr<const uint32_t> a = moec::bufferArg<const uint32_t>(p, 0);
  moec::gptr<const uint32_t> b = moec::bufferArg<const uint32_t>(p, 1);
  moec::gptr<float> c = moec::bufferArg<float>(p, 2);
  const int64_t tiles = moec::scalarArg(p, 0);
  const int lane = threadIdx.x % 32;
  float acc[4][4] = {};
  for (int64_t t = 0; t < tiles; ++t) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t fa[4] = {a[(t * 4 + j) * 128 + lane], a[(t * 4 + j) * 128 + 32 + lane],
                              a[(t * 4 + j) * 128 + 64 + lane], a[(t * 4 + j) * 128 + 96 + lane]};
      const uint32_t fb[2] = {b[(t * 4 + j) * 64 + lane], b[(t * 4 + j) * 64 + 32 + lane]};
      moec::mma_m16n8k16_bf16(acc[j], fa, fb, acc[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r)
      c[(blockIdx.x * 128 + threadIdx.x) * 16 + j * 4 + r] = tanhf(acc[j][r]);
}
)";
  kernel.replace(kernel.find("NAME"), 4, name);
  return std::string(deviceLibrarySource()) + "\n" + kernel;
}

} // namespace moec::test
