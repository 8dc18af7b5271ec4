//===- CudaTestUtil.h - shared helpers of the cuda tests --------*- C++ -*-===//

#ifndef MOEC_TEST_UNIT_CUDA_CUDATESTUTIL_H
#define MOEC_TEST_UNIT_CUDA_CUDATESTUTIL_H

#include "ScopedEnv.h"
#include "cuda/Nvrtc.h"
#include "moec/Error.h"

#include <gtest/gtest.h>
#include <optional>
#include <string>
#include <vector>

namespace moec::test {

/// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  const std::string &path() const { return dir; }

private:
  std::string dir;
};

/// NVRTC, or nullptr with the reason in `why` when it cannot be loaded.
const detail::cuda::Nvrtc *tryNvrtc(std::string &why);

/// Regular files directly in `dir`, by name, sorted.
std::vector<std::string> filesIn(const std::string &dir);

std::string readFile(const std::string &path);
void writeFile(const std::string &path, const std::string &bytes);

/// A kernel written like a generated one: device library conventions,
/// static shared memory, a block reduction; `tag` varies its text.
std::string scaleKernelSource(const std::string &name,
                              const std::string &tag = "");
/// A heavier kernel using the tensor-core tiles of mma.cuh.
std::string mmaKernelSource(const std::string &name);

} // namespace moec::test

/// Skips the current test when NVRTC is not installed; defines `nvrtc`.
#define MOEC_REQUIRE_NVRTC()                                                   \
  std::string nvrtcMissing;                                                    \
  const moec::detail::cuda::Nvrtc *nvrtcPtr =                                  \
      moec::test::tryNvrtc(nvrtcMissing);                                      \
  if (!nvrtcPtr)                                                               \
    GTEST_SKIP() << "NVRTC is not available: " << nvrtcMissing;                \
  const moec::detail::cuda::Nvrtc &nvrtc = *nvrtcPtr;                          \
  (void)nvrtc

#endif // MOEC_TEST_UNIT_CUDA_CUDATESTUTIL_H
