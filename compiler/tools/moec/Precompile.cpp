//===- Precompile.cpp - moec precompile -----------------------------------===//
//
// Compiles every generated kernel of a model with NVRTC for one GPU
// architecture into the kernel cache, so that the first run on that GPU
// starts at once; reports ptxas's registers, shared memory and spills.
// Needs NVRTC, not a GPU.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "moec/Cuda.h"
#include "moec/Driver/Pipeline.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <fmt/format.h>

namespace cl = llvm::cl;

static cl::SubCommand precompileCommand(
    "precompile", "Compile every kernel of a model into the kernel cache");
static cl::opt<std::string> input(cl::Positional, cl::Required,
                                  cl::desc("<file.moe or bundle>"),
                                  cl::sub(precompileCommand));
static cl::opt<std::string> arch("arch",
                                 cl::desc("The GPU architecture: sm_80, "
                                          "sm_86, sm_89, sm_90, ..."),
                                 cl::Required, cl::sub(precompileCommand));
static cl::opt<unsigned> jobs("jobs",
                              cl::desc("Kernels compiled at once (default: "
                                       "one per core)"),
                              cl::init(0), cl::sub(precompileCommand));
static moec::driver::DtypeOption dtype(precompileCommand);
static cl::opt<bool> verbose("v",
                             cl::desc("List every kernel with its resources"),
                             cl::sub(precompileCommand));

bool moec::driver::isPrecompileCommand() {
  return static_cast<bool>(precompileCommand);
}

int moec::driver::runPrecompile() {
  if (llvm::Expected<std::string> tiles = tileArchitecture(arch); !tiles) {
    llvm::errs() << "moec: error: " << llvm::toString(tiles.takeError())
                 << "\n";
    return 1;
  }
  Bundle bundle = loadModel(input, dtype, arch);
  auto start = std::chrono::steady_clock::now();
  std::vector<PrecompiledKernel> kernels = precompileKernels(bundle, arch, jobs);
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  size_t hits = 0, spilling = 0;
  int maxRegisters = 0, maxShared = 0;
  for (const PrecompiledKernel &k : kernels) {
    hits += k.cacheHit;
    bool spills = k.usage.spillStoreBytes > 0 || k.usage.spillLoadBytes > 0;
    spilling += spills;
    maxRegisters = std::max(maxRegisters, k.usage.registers);
    maxShared = std::max(maxShared, k.usage.sharedBytes);
    if (verbose || spills)
      llvm::outs() << fmt::format(
          "{:<36} {:>3} registers {:>6} B shared {:>4} B stack  spills "
          "{}/{} B  {}{:.2f} s\n",
          k.name, k.usage.registers, k.usage.sharedBytes, k.usage.stackBytes,
          k.usage.spillStoreBytes, k.usage.spillLoadBytes,
          k.cacheHit ? "cached " : "", k.seconds);
  }
  llvm::outs() << fmt::format(
      "{} kernels for {}: {} from the cache, {} compiled; {:.2f} s; at most "
      "{} registers and {} B of shared memory; {}\n",
      kernels.size(), arch.getValue(), hits, kernels.size() - hits, seconds,
      maxRegisters, maxShared,
      spilling ? fmt::format("{} kernels spill", spilling) : "no spills");
  llvm::outs() << "cache: " << kernelCacheDirectory() << "\n";
  return 0;
}
