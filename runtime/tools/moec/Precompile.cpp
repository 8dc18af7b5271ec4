//===- Precompile.cpp - moec precompile -----------------------------------===//
//
// Compiles every generated kernel of a model with NVRTC for one GPU
// architecture into the kernel cache, so that the first run on that GPU
// starts at once; reports ptxas's registers, shared memory and spills, and
// with --mix each kernel's instruction mix as counted in its PTX. Needs
// NVRTC, not a GPU.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "moec/Cuda.h"
#include "moec/support/Stopwatch.h"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <iostream>
#include <vector>

namespace moec::driver {
namespace {

class PrecompileCommand : public cli::Command {
public:
  PrecompileCommand()
      : Command("precompile",
                "Compile every kernel of a model into the kernel cache "
                "(needs NVRTC, not a GPU).") {
    positional("FILE", "a .moe spec (compiled first) or a bundle", input);
    option("arch", "sm_XY",
           "The GPU architecture: sm_80, sm_86, sm_89, "
           "sm_90, ...",
           arch)
        .required();
    option("dtype", "DTYPE", "Override the spec's dtype (f32, f64, bf16)",
           dtype)
        .oneOf(dtypeChoices());
    option("f32-matmul", "MODE", kF32MatmulHelp, f32Matmul)
        .oneOf(f32MatmulChoices());
    option("jobs", "N", "Kernels compiled at once (default: one per core)",
           jobs)
        .atLeast(int64_t{0});
    flag("v", "List every kernel with its resources", verbose);
    flag("mix",
         "List every kernel's instruction mix, counted in its PTX: "
         "instructions, tensor-core mma, ldmatrix, cp.async, global loads "
         "and stores and shared accesses (of them 16-byte), barriers, calls, "
         "double-precision",
         mix);
  }

  int run() override;

private:
  std::string input, arch, dtype, f32Matmul;
  int64_t jobs = 0;
  bool verbose = false, mix = false;
};

/// The bundles the command read, never freed: the process ends after it,
/// and freeing a large model's bundle (80,000 JSON values at 12 blocks)
/// would take a tenth of a warm start. The static pointer keeps them
/// reachable, so leak checkers do not count them.
std::vector<Bundle> &keptBundles() {
  static auto *kept = new std::vector<Bundle>;
  return *kept;
}

void printMix(const std::vector<PrecompiledKernel> &kernels) {
  std::cout << fmt::format("{:<36} {:>6} {:>5} {:>8} {:>8} {:>11} {:>11} "
                           "{:>9} {:>5} {:>5} {:>5}\n",
                           "kernel", "instr", "mma", "ldmatrix", "cp.async",
                           "ld.global", "st.global", "shared", "bar", "call",
                           "f64");
  auto wide = [](int64_t all, int64_t wide16) {
    return fmt::format("{} ({})", all, wide16);
  };
  for (const PrecompiledKernel &k : kernels) {
    const InstructionMix &m = k.mix;
    std::cout << fmt::format(
        "{:<36} {:>6} {:>5} {:>8} {:>8} {:>11} {:>11} {:>9} {:>5} {:>5} "
        "{:>5}\n",
        k.name, m.instructions, m.mma, m.ldmatrix, m.cpAsync,
        wide(m.globalLoads, m.globalLoads16),
        wide(m.globalStores, m.globalStores16),
        wide(m.sharedAccesses, m.sharedAccesses16), m.barriers, m.calls, m.f64);
  }
  std::cout << "(static counts in each kernel's PTX, called functions "
               "included; in parentheses the 16-byte accesses)\n";
}

int PrecompileCommand::run() {
  tileFamily(arch);
  NvrtcPreload nvrtc;
  const Bundle &bundle =
      keptBundles().emplace_back(loadModel(input, dtype, arch, f32Matmul));
  auto start = std::chrono::steady_clock::now();
  std::vector<PrecompiledKernel> kernels =
      precompileKernels(bundle, arch, static_cast<unsigned>(jobs), mix);
  double seconds = support::secondsSince(start);
  size_t hits = 0, spilling = 0;
  int maxRegisters = 0, maxShared = 0;
  for (const PrecompiledKernel &k : kernels) {
    hits += k.cacheHit;
    bool spills = k.usage.spillStoreBytes > 0 || k.usage.spillLoadBytes > 0;
    spilling += spills;
    maxRegisters = std::max(maxRegisters, k.usage.registers);
    maxShared = std::max(maxShared, k.usage.sharedBytes);
    if (verbose || spills)
      std::cout << fmt::format(
          "{:<36} {:>3} registers {:>6} B shared {:>4} B stack  spills "
          "{}/{} B  {}{:.2f} s\n",
          k.name, k.usage.registers, k.usage.sharedBytes, k.usage.stackBytes,
          k.usage.spillStoreBytes, k.usage.spillLoadBytes,
          k.cacheHit ? "cached " : "", k.seconds);
  }
  if (mix)
    printMix(kernels);
  std::cout << fmt::format(
      "{} kernels for {}: {} from the cache, {} compiled; {:.2f} s; at most "
      "{} registers and {} B of shared memory; {}\n",
      kernels.size(), arch, hits, kernels.size() - hits, seconds, maxRegisters,
      maxShared,
      spilling ? fmt::format("{} kernels spill", spilling) : "no spills");
  std::cout << "cache: " << kernelCacheDirectory() << "\n";
  return 0;
}

} // namespace

std::unique_ptr<cli::Command> makePrecompileCommand() {
  return std::make_unique<PrecompileCommand>();
}

} // namespace moec::driver
