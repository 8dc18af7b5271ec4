//===- KernelResourcesTest.cpp - every kernel through NVRTC and ptxas -----===//
//
// Every kernel of every example (and of the specs in test/unit/check/specs)
// compiles with NVRTC for sm_80 and sm_90
// with its kernels tiled for that architecture; the test prints ptxas's
// registers, shared memory and stack for each (the record of what the
// generated code costs) and fails on any spill. Each kernel's instruction
// mix, counted in its PTX, shows the intended hardware paths: tensor cores
// in every bf16 GEMM and bf16 attention forward, dq and dk/dv (head dims
// 16 to 128 in steps of 16, 160 to 256 in steps of 32) and in every f32
// GEMM under f32_matmul tf32
// or tf32x3, none elsewhere in f32 models, the cp.async / ldmatrix pipeline in
// bf16 models, 16-byte accesses in the optimizer kernels, in norms and their
// gradients (f32 rows of a multiple of 4 columns, bf16 of 8), in the
// cross-entropy, and in the expert combine when its width is a multiple of 4,
// 16-byte shared loads in the CUDA-core attention kernels of head dims of a
// multiple of 4. No GPU is needed.
//
//===----------------------------------------------------------------------===//

#include "Examples.h"
#include "moec/Compiler.h"
#include "moec/Cuda.h"
#include "moec/Error.h"

#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <iostream>
#include <map>
#include <regex>
#include <utility>

using namespace moec;

namespace {

/// A checked spec for one architecture, with the dtype it names (dtype
/// empty) or with bf16 storage, or in f32 with f32_matmul tf32 (sm_80) or
/// tf32x3 (sm_90).
struct Case {
  test::SpecFile spec;
  std::string arch;
  std::string dtype;
  std::string f32Matmul = "";
  std::string name() const {
    return spec.name + "_" + arch + (dtype.empty() ? "" : "_" + dtype) +
           (f32Matmul.empty() ? "" : "_" + f32Matmul);
  }
};

void PrintTo(const Case &c, std::ostream *os) { *os << c.name(); }

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const test::SpecFile &spec : test::checkedSpecs())
    for (const char *arch : {"sm_80", "sm_90"}) {
      for (const char *dtype : {"", "bf16"})
        all.push_back({spec, arch, dtype});
      // The TF32 tiles are one code for both families: tf32 is compiled
      // for sm_80 and tf32x3 for sm_90 (each mode once, keeping the
      // suite's time), so each family's tiles meet one of them.
      all.push_back(
          {spec, arch, "", std::string(arch) == "sm_80" ? "tf32" : "tf32x3"});
    }
  return all;
}

/// Each kernel's own source in the bundle's translation unit, by name.
std::map<std::string, std::string> kernelSources(const Bundle &bundle) {
  std::string unit = cudaTranslationUnit(bundle);
  std::map<std::string, std::string> sources;
  const std::regex name(R"(void (?:__launch_bounds__\([^)]*\) )?(moek_\w+)\()");
  size_t at = unit.find("\n// group ");
  while (at != std::string::npos) {
    size_t next = unit.find("\n// group ", at + 1);
    std::string text = unit.substr(
        at, next == std::string::npos ? std::string::npos : next - at);
    std::smatch m;
    if (std::regex_search(text, m, name))
      sources[m[1]] = text;
    at = next;
  }
  return sources;
}

bool calls(const std::string &source, const char *function) {
  return source.find(function) != std::string::npos;
}

/// The width D of the expertCombine<K, D> the kernel calls, or 0.
int combineWidth(const std::string &source) {
  const std::string call = "moec::expertCombine<";
  size_t at = source.find(call);
  if (at == std::string::npos)
    return 0;
  size_t comma = source.find(',', at);
  return comma == std::string::npos ? 0 : std::atoi(source.c_str() + comma + 1);
}

/// The registers a thread may use under the kernel's
/// __launch_bounds__(threads, blocks): 64 Ki over threads x blocks, at most
/// 255.
int registerAllowance(const std::string &source) {
  std::smatch bounds;
  if (!std::regex_search(source, bounds,
                         std::regex(R"(__launch_bounds__\((\d+), (\d+)\))")))
    return 255;
  return std::min(255, 65536 / (std::stoi(bounds[1]) * std::stoi(bounds[2])));
}

class KernelResources : public ::testing::TestWithParam<Case> {};

TEST_P(KernelResources, CompileWithoutSpills) {
#ifndef MOEC_HAVE_NVRTC
  GTEST_SKIP() << "built without the CUDA toolkit";
#endif
  const Case &c = GetParam();
  CompileOptions options;
  options.arch = c.arch;
  options.dtype = c.dtype;
  options.f32Matmul = c.f32Matmul;
  Bundle bundle = compileFile(c.spec.path, options);
  std::vector<PrecompiledKernel> kernels =
      precompileKernels(bundle, c.arch, 0, /*mix=*/true);
  ASSERT_FALSE(kernels.empty());
  std::map<std::string, std::string> sources = kernelSources(bundle);
  const bool bf16 = bundle.model().dtype == "bf16";
  int pipelined = 0, tf32Gemms = 0;
  std::cout << fmt::format("{}: {} kernels\n", c.name(), kernels.size());
  for (const PrecompiledKernel &k : kernels) {
    const InstructionMix &m = k.mix;
    std::cout << fmt::format(
        "  {:<34} {:>3} registers {:>6} B shared {:>4} B "
        "stack; {:>5} instructions, {} mma, {} ldmatrix, "
        "{} cp.async, {} of {} global loads, {} of {} "
        "shared accesses 16-byte\n",
        k.name, k.usage.registers, k.usage.sharedBytes, k.usage.stackBytes,
        m.instructions, m.mma, m.ldmatrix, m.cpAsync, m.globalLoads16,
        m.globalLoads, m.sharedAccesses16, m.sharedAccesses);
    ASSERT_TRUE(sources.count(k.name)) << k.name;
    const std::string &source = sources[k.name];
    EXPECT_GT(m.instructions, 0) << k.name;
    const bool tf32 = calls(source, "moec::gemmTileTf32") ||
                      calls(source, "moec::gemmTile3xTf32");
    if (tf32) {
      EXPECT_FALSE(c.f32Matmul.empty()) << k.name << ": tf32 by default";
    }
    tf32Gemms += tf32;
    if (!bf16 && !tf32) {
      EXPECT_EQ(m.mma, 0) << k.name
                          << ": f32 models stay off the tensor "
                             "cores but for tf32 GEMMs";
    }
    if (calls(source, "moec::gemmTileBf16")) {
      EXPECT_GT(m.mma, 0) << k.name << ": a bf16 GEMM without mma";
    }
    // bf16 attention kernels run on the tensor cores, with ldmatrix and
    // cp.async, for head dims that are multiples of 16 up to 128 or of 32
    // up to 256; the others stay on CUDA cores.
    for (auto [mmaKernel, coresKernel] :
         {std::make_pair("attentionForwardMma", "attentionForward"),
          std::make_pair("attentionGradQMma", "attentionGradQ"),
          std::make_pair("attentionGradKVMma", "attentionGradKV")}) {
      if (calls(source, (std::string("moec::") + mmaKernel).c_str())) {
        EXPECT_TRUE(bf16) << k.name;
        EXPECT_GT(m.mma, 0) << k.name << ": " << mmaKernel << " without mma";
        EXPECT_GT(m.ldmatrix, 0) << k.name;
        EXPECT_GT(m.cpAsync, 0) << k.name;
      }
      std::smatch cores;
      if (std::regex_search(source, cores,
                            std::regex(std::string(R"(moec::)") + coresKernel +
                                       R"(<(\d+),)"))) {
        const int headDim = std::stoi(cores[1]);
        const bool mmaHeadDim = headDim <= 128
                                    ? headDim % 16 == 0
                                    : headDim <= 256 && headDim % 32 == 0;
        EXPECT_FALSE(bf16 && mmaHeadDim)
            << k.name << ": " << coresKernel << " of head dim " << headDim
            << " on CUDA cores in a bf16 model";
      }
    }
    // The CUDA-core attention kernels read the rows a whole warp shares
    // four floats a load when the head dim (and so every tile) allows.
    std::smatch cudaCore;
    if (std::regex_search(
            source, cudaCore,
            std::regex(R"(moec::attention(?:Forward|GradQ|GradKV)<(\d+),)")) &&
        std::stoi(cudaCore[1]) % 4 == 0) {
      EXPECT_GT(m.sharedAccesses16, 0)
          << k.name << ": a CUDA-core attention without 16-byte shared loads";
    }
    if (tf32) {
      EXPECT_GT(m.mma, 0) << k.name << ": a tf32 GEMM without mma";
    }
    if (calls(source, "moec::gemmTile<")) {
      EXPECT_TRUE(c.f32Matmul.empty() || bf16)
          << k.name << ": an fp32 GEMM under f32_matmul " << c.f32Matmul;
    }
    pipelined += m.cpAsync > 0 && m.ldmatrix > 0 && m.mma > 0;
    if (calls(source, "moec::adamUpdate") || calls(source, "moec::sgdUpdate") ||
        calls(source, "moec::sumOfSquares")) {
      EXPECT_GT(m.globalLoads16, 0) << k.name << ": no 16-byte loads";
      // Their calls roll into loops that index the parameter block at run
      // time: ptxas must read it in place, not copy it to the stack.
      EXPECT_EQ(k.usage.stackBytes, 0) << k.name << ": a stack frame";
    }
    // GEMM tiles and attention keep their accumulators in registers: a
    // loop over fragments or a warp's rows left rolled indexes them at run
    // time, and ptxas moves them to the stack for the whole kernel.
    if (calls(source, "moec::gemmTile") || calls(source, "moec::attention")) {
      EXPECT_EQ(k.usage.stackBytes, 0)
          << k.name << ": accumulators in a stack frame";
    }
    // A norm's row vectors stay in registers: column loops left rolled
    // index them at run time (64-128 B stack frames before).
    if (calls(source, "moec::normRows") ||
        calls(source, "moec::normGradRows")) {
      EXPECT_EQ(k.usage.stackBytes, 0) << k.name << ": a row in a stack frame";
    }
    // Norm gradients of whole 16-byte vectors: f32 rows of a multiple of 4
    // columns, bf16 rows of a multiple of 8.
    std::smatch normGrad;
    const bool normGradVector =
        std::regex_search(source, normGrad,
                          std::regex(R"(moec::normGradRows<(\d+),)")) &&
        std::stoi(normGrad[1]) % (bf16 ? 8 : 4) == 0;
    // Cross-entropy over a vocabulary of a multiple of 4, both ways.
    std::smatch crossEntropy;
    const bool crossEntropy4 =
        std::regex_search(
            source, crossEntropy,
            std::regex(R"(moec::crossEntropy(?:Forward|Backward)<(\d+),)")) &&
        std::stoi(crossEntropy[1]) % 4 == 0;
    if (calls(source, "moec::normRowsVector") || normGradVector ||
        crossEntropy4) {
      EXPECT_GT(m.globalLoads16, 0) << k.name
                                    << ": a norm or cross-entropy "
                                       "without 16-byte loads";
    }
    if (int width = combineWidth(source); width % 4 == 0 && width > 0) {
      EXPECT_GT(m.globalLoads16, 0) << k.name << ": a combine of width "
                                    << width << " without 16-byte loads";
    }
    EXPECT_GT(k.usage.registers, 0) << k.name;
    // Within what the launch bounds leave a thread: 128 registers for the
    // 512 resident threads most kernels ask for, 255 for the tensor-core
    // attention of wide heads (two blocks of 128).
    EXPECT_LE(k.usage.registers, registerAllowance(source)) << k.name;
    EXPECT_EQ(k.usage.spillStoreBytes, 0) << k.name;
    EXPECT_EQ(k.usage.spillLoadBytes, 0) << k.name;
    // Static shared memory within the 48 KiB a launch gets without opting in.
    EXPECT_LE(k.usage.sharedBytes, 48 * 1024) << k.name;
    EXPECT_GT(k.cubinBytes, 0u) << k.name;
  }
  if (bf16) {
    EXPECT_GT(pipelined, 0) << "no kernel runs the cp.async/ldmatrix pipeline";
  }
  if (!c.f32Matmul.empty()) {
    EXPECT_GT(tf32Gemms, 0) << "no kernel multiplies in tf32";
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, KernelResources,
                         ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name(); });

} // namespace
