//===- Info.cpp - moec info -----------------------------------------------===//
//
// What this build and this machine offer: the moec version, whether the
// compiler is built in, the device library, and for the cuda device the
// driver, the GPUs and NVRTC. With --require cuda it is the one-line check
// that a GPU run can start, with its own exit status per missing piece.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "moec/CpuBlas.h"
#include "moec/Cuda.h"
#include "moec/support/DeviceLibrary.h"
#include "moec/Version.h"

#include <fmt/format.h>
#include <iostream>
#include <thread>

namespace moec::driver {
namespace {

/// Exit statuses of `moec info --require cuda`, documented in the README.
int exitStatusOf(CudaReadiness readiness) {
  switch (readiness) {
  case CudaReadiness::Ready:
    return 0;
  case CudaReadiness::NoDriver:
    return 3;
  case CudaReadiness::NoGpu:
    return 4;
  case CudaReadiness::NoNvrtc:
    return 5;
  // One status for every pair that does not fit: the GPU pack's run.sh
  // passes it on, and keeps 7 for a suite its time budget cut short.
  case CudaReadiness::UnsupportedGpu:
  case CudaReadiness::NvrtcNewerThanDriver:
    return 6;
  }
  return 1;
}

const char *readinessName(CudaReadiness readiness) {
  switch (readiness) {
  case CudaReadiness::Ready:
    return "ready";
  case CudaReadiness::NoDriver:
    return "no CUDA driver";
  case CudaReadiness::NoGpu:
    return "no GPU";
  case CudaReadiness::NoNvrtc:
    return "no NVRTC";
  case CudaReadiness::UnsupportedGpu:
    return "unsupported GPU";
  case CudaReadiness::NvrtcNewerThanDriver:
    return "NVRTC newer than the driver";
  }
  return "unknown";
}

class InfoCommand : public cli::Command {
public:
  InfoCommand()
      : Command("info",
                "Print this build's version and what the machine offers the "
                "cuda device (driver, GPUs, NVRTC).") {
    option("require", "DEVICE",
           "Exit non-zero with one line on stderr unless DEVICE can run "
           "here: cuda (exit 3: no driver, 4: no GPU, 5: no NVRTC, 6: GPU or "
           "NVRTC too old, or NVRTC newer than the driver)",
           require)
        .oneOf({"cuda"});
  }

  int run() override {
    std::cout << fmt::format("moec {} ({})\n", kVersion,
                             hasCompiler() ? "compiler and runtime"
                                           : "runtime only, no compiler");
    std::cout << fmt::format("device library: {}\n", deviceLibraryHash());
    std::cout << fmt::format("cpu: {} hardware threads\n",
                             std::thread::hardware_concurrency());
    CpuBlas blas = cpuBlas();
    if (blas.kernels.empty())
      std::cout << "cpu BLAS: " << blas.library << "\n";
    else
      std::cout << fmt::format("cpu BLAS: {} kernels, chosen by {} ({})\n",
                               blas.kernels, blas.chosenBy, blas.library);
    CudaEnvironment env = probeCudaEnvironment();
    if (env.driverProblem.empty())
      std::cout << fmt::format(
          "CUDA driver: {} (CUDA {}), {}\n",
          env.driverVersion.empty() ? "version unknown" : env.driverVersion,
          env.driverCudaVersion, env.driverLibrary);
    else
      std::cout << "CUDA driver: none (" << env.driverProblem << ")\n";
    for (size_t i = 0; i < env.gpus.size(); ++i) {
      const CudaEnvironment::Gpu &gpu = env.gpus[i];
      std::cout << fmt::format("GPU {}: {}, {}, {} multiprocessors, {:.1f} "
                               "GiB\n",
                               i, gpu.name, gpu.arch, gpu.multiprocessors,
                               gpu.memoryBytes / double(1ull << 30));
    }
    if (!env.gpuProblem.empty())
      std::cout << "GPU: none (" << env.gpuProblem << ")\n";
    if (env.nvrtcProblem.empty())
      std::cout << fmt::format("NVRTC: {}, {} (targets {})\n",
                               env.nvrtcVersion, env.nvrtcLibrary,
                               fmt::join(env.nvrtcArchs, " "));
    else
      std::cout << "NVRTC: none (" << env.nvrtcProblem << ")\n";
    if (env.cublasLtProblem.empty())
      std::cout << fmt::format("cuBLASLt: {}, {} (dense GEMMs that fuse "
                               "nothing)\n",
                               env.cublasLtVersion, env.cublasLtLibrary);
    else
      std::cout << "cuBLASLt: none (" << env.cublasLtProblem
                << "; moec's own GEMM kernels run instead)\n";
    std::string why;
    CudaReadiness readiness = cudaReadiness(env, why);
    std::cout << "cuda device: " << readinessName(readiness) << "\n"
              << std::flush;
    if (require.empty() || readiness == CudaReadiness::Ready)
      return 0;
    std::cerr << "moec: the cuda device cannot run here: " << why << "\n";
    return exitStatusOf(readiness);
  }

private:
  std::string require;
};

} // namespace

std::unique_ptr<cli::Command> makeInfoCommand() {
  return std::make_unique<InfoCommand>();
}

} // namespace moec::driver
