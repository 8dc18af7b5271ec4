//===- PrecompileTest.cpp - a bundle's kernels through the cache ----------===//

#include "cuda/Precompile.h"
#include "BundleData.h"
#include "CudaTestUtil.h"
#include "cuda/KernelSource.h"
#include "cuda/Nvrtc.h"
#include "moec/Bundle.h"
#include "moec/Cuda.h"
#include "moec/support/DeviceLibrary.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <set>

using namespace moec;
using namespace moec::detail::cuda;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

/// The kernel part of a source made by the test helpers.
std::string ownSource(const std::string &translationUnit) {
  return translationUnit.substr(deviceLibrarySource().size() + 1);
}

/// A bundle with no programs and the two test kernels.
Bundle testBundle(const std::string &libraryHash, const std::string &tag) {
  nlohmann::json doc = {
      {"format", "moec-bundle"},
      {"version", 2},
      {"moec_version", "0.1.0"},
      {"model",
       {{"name", "t"},
        {"kind", "decoder"},
        {"objective", "lm"},
        {"vocab", 16},
        {"d_model", 8},
        {"max_seq", 8},
        {"dtype", "f32"},
        {"segments", 0},
        {"tokenizer", {{"kind", "bytes"}, {"path", ""}}},
        {"moe_layers", nlohmann::json::array()}}},
      {"training",
       {{"optimizer", "adamw"},
        {"schedule", "constant"},
        {"lr", 0.001},
        {"batch", 1},
        {"seq_len", 8},
        {"steps", 1},
        {"seed", 1},
        {"log_every", 1}}},
      {"data",
       {{"kind", "synthetic"},
        {"task", "copy"},
        {"paths", nlohmann::json::array()},
        {"labels", nlohmann::json::array()},
        {"task_seed", 0},
        {"branching", 2},
        {"valid_fraction", 0.1}}},
      {"params", nlohmann::json::array()},
      {"states", nlohmann::json::array()},
      {"cuda",
       {{"device_library", libraryHash},
        {"kernels",
         {{{"name", "moek_test_scale"},
           {"source",
            ownSource(test::scaleKernelSource("moek_test_scale", tag))}},
          {{"name", "moek_test_mma"},
           {"source", ownSource(test::mmaKernelSource("moek_test_mma"))}}}}}},
      {"programs", nlohmann::json::object()}};
  return Bundle::parse(doc.dump(), "test.bundle.json");
}

TEST(KernelSource, IsTheDeviceLibraryThenTheKernel) {
  detail::KernelDesc kernel{"k", "extern \"C\" __global__ void k() {}\n"};
  std::string unit = detail::kernelTranslationUnit(kernel);
  EXPECT_EQ(unit, std::string(deviceLibrarySource()) + "\n" + kernel.source);
  EXPECT_EQ(unit, std::string(deviceLibrarySource()) +
                      detail::kernelTextAfterLibrary(kernel));
}

TEST(KernelSource, ADifferentDeviceLibraryIsRefused) {
  Bundle bundle = testBundle("0123456789abcdef0123", "x");
  try {
    detail::checkDeviceLibrary(bundle.internals());
    FAIL() << "a bundle for another device library passed";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("test.bundle.json"));
    EXPECT_THAT(e.what(), HasSubstr("another device library"));
    EXPECT_THAT(e.what(), HasSubstr("recompile the model with this moec"));
  }
  EXPECT_NO_THROW(detail::checkDeviceLibrary(
      testBundle(std::string(deviceLibraryHash()), "x").internals()));
}

TEST(Precompile, RefusesABundleForAnotherDeviceLibrary) {
  Bundle bundle = testBundle("0123456789abcdef0123", "x");
  EXPECT_THROW(precompileBundle(bundle, "sm_90"), Error);
}

TEST(Precompile, CompilesEveryKernelThenHitsTheCache) {
  MOEC_REQUIRE_NVRTC();
  // A tag no other test uses, so that the first pass really compiles.
  Bundle bundle = testBundle(std::string(deviceLibraryHash()), "precompile");
  for (const char *arch : {"sm_80", "sm_90"}) {
    std::vector<PrecompiledKernel> cold = precompileBundle(bundle, arch, 2);
    ASSERT_EQ(cold.size(), 2u);
    EXPECT_EQ(cold[0].name, "moek_test_mma");
    EXPECT_EQ(cold[1].name, "moek_test_scale");
    for (const PrecompiledKernel &k : cold) {
      EXPECT_FALSE(k.cacheHit) << k.name;
      EXPECT_GT(k.usage.registers, 0) << k.name;
      EXPECT_EQ(k.usage.spillStoreBytes, 0) << k.name;
      EXPECT_GT(k.cubinBytes, 0u) << k.name;
    }
    EXPECT_EQ(cold[1].usage.sharedBytes, 512);
    std::vector<PrecompiledKernel> warm = precompileBundle(bundle, arch);
    for (size_t i = 0; i < warm.size(); ++i) {
      EXPECT_TRUE(warm[i].cacheHit) << warm[i].name;
      EXPECT_EQ(warm[i].usage.registers, cold[i].usage.registers);
    }
  }
}

TEST(Precompile, NamesAKernelThatDoesNotCompile) {
  MOEC_REQUIRE_NVRTC();
  nlohmann::json doc = nlohmann::json::parse(
      testBundle(std::string(deviceLibraryHash()), "x").json());
  doc["cuda"]["kernels"][0]["source"] =
      "extern \"C\" __global__ void moek_test_scale(const moec::KernelParams "
      "p) { broken }\n";
  Bundle bundle = Bundle::parse(doc.dump(), "broken.bundle.json");
  try {
    precompileBundle(bundle, "sm_80", 1);
    FAIL() << "a broken kernel compiled";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("could not compile kernel "
                                    "'moek_test_scale' for sm_80"));
    EXPECT_THAT(e.what(), HasSubstr("moek_test_scale.cu"));
  }
}

/// Nine small kernels, the fourth broken when asked.
std::vector<detail::KernelDesc> nineKernels(const std::string &tag,
                                            bool breakOne) {
  std::vector<detail::KernelDesc> kernels;
  for (int i = 0; i < 9; ++i) {
    std::string name = "moek_test_nine" + std::to_string(i);
    kernels.push_back({name, ownSource(test::scaleKernelSource(name, tag))});
  }
  if (breakOne)
    kernels[3].source = "extern \"C\" __global__ void moek_test_nine3(const "
                        "moec::KernelParams p) { broken }\n";
  return kernels;
}

TEST(Precompile, CompilesKernelsTogetherAFewProgramsPerJob) {
  MOEC_REQUIRE_NVRTC();
  std::vector<detail::KernelDesc> kernels = nineKernels("together", false);
  std::vector<const detail::KernelDesc *> pointers;
  for (const detail::KernelDesc &k : kernels)
    pointers.push_back(&k);
  std::vector<CompiledKernel> cold = fetchOrCompile(pointers, "sm_80", 1);
  ASSERT_EQ(cold.size(), 9u);
  std::set<const std::string *> modules;
  for (size_t i = 0; i < cold.size(); ++i) {
    EXPECT_EQ(cold[i].name, kernels[i].name);
    EXPECT_FALSE(cold[i].cacheHit) << cold[i].name;
    EXPECT_EQ(cold[i].usage.sharedBytes, 512) << cold[i].name;
    // The module really holds the kernel.
    EXPECT_NE(cold[i].cubin->find(kernels[i].name + '\0'), std::string::npos)
        << cold[i].name;
    modules.insert(cold[i].cubin.get());
  }
  EXPECT_EQ(modules.size(), 2u) << "one job: two programs for nine kernels";
  std::vector<CompiledKernel> warm = fetchOrCompile(pointers, "sm_80", 1);
  for (size_t i = 0; i < warm.size(); ++i) {
    EXPECT_TRUE(warm[i].cacheHit) << warm[i].name;
    EXPECT_EQ(warm[i].cubin, cold[i].cubin) << warm[i].name;
  }
  // With PTX (for the instruction mix) too, in two programs; each kernel
  // gets its own part of its program's module: here, the instructions it
  // has compiled alone.
  std::vector<CompiledKernel> ptx = fetchOrCompile(pointers, "sm_80", 1, true);
  std::set<const std::string *> ptxModules;
  for (size_t i = 0; i < ptx.size(); ++i) {
    ptxModules.insert(ptx[i].cubin.get());
    EXPECT_THAT(ptx[i].ptx, HasSubstr(".entry " + kernels[i].name + "("));
    EXPECT_THAT(ptx[i].ptx,
                Not(HasSubstr(".entry " + kernels[(i + 1) % 9].name + "(")));
  }
  for (size_t i : {0, 8}) {
    std::string alone =
        nvrtc
            .compile(test::scaleKernelSource(kernels[i].name, "together"),
                     kernels[i].name, "sm_80", true)
            .ptx;
    EXPECT_EQ(instructionMix(ptx[i].ptx).instructions,
              instructionMix(alone).instructions)
        << kernels[i].name;
  }
  EXPECT_EQ(ptxModules.size(), 2u);
}

TEST(Precompile, ABrokenKernelCompiledWithOthersIsNamed) {
  MOEC_REQUIRE_NVRTC();
  std::vector<detail::KernelDesc> kernels = nineKernels("broken", true);
  std::vector<const detail::KernelDesc *> pointers;
  for (const detail::KernelDesc &k : kernels)
    pointers.push_back(&k);
  try {
    fetchOrCompile(pointers, "sm_80", 1);
    FAIL() << "a broken kernel compiled";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("could not compile kernel "
                                    "'moek_test_nine3' for sm_80"));
    EXPECT_THAT(e.what(), HasSubstr("moek_test_nine3.cu"));
  }
}

TEST(Precompile, ABadArchitectureIsRefused) {
  Bundle bundle = testBundle(std::string(deviceLibraryHash()), "x");
  EXPECT_THROW(precompileBundle(bundle, "ampere"), Error);
}

} // namespace

// A kernel's weight counts the tiles it calls: tensor-core attention most.
TEST(Precompile, WeighsKernelsByTheTilesTheyCall) {
  EXPECT_EQ(compileWeight("moec::normRows<float, 128>(s, x, y);"), 1);
  EXPECT_EQ(compileWeight("moec::gemmTile<64, 64, 16, 256>(0, 0, M, N, K, "
                          "a, b, store);"),
            2.5);
  EXPECT_EQ(compileWeight("moec::gemmTileBf16Async<64, 64, 16, 256>(...); "
                          "moec::attentionGradKVMma<64, 32, 64, 128>(...);"),
            10);
}

// Heaviest first, each into the lightest batch: two heavy kernels and six
// light ones over two programs give each program one heavy kernel and
// three light ones; round robin would have put both heavy ones in one.
TEST(Precompile, BalancesBatchesByWeight) {
  std::vector<std::vector<size_t>> batches =
      balancedBatches({4, 4, 1, 1, 1, 1, 1, 1}, 2);
  ASSERT_EQ(batches.size(), 2u);
  for (const std::vector<size_t> &batch : batches) {
    double total = 0;
    for (size_t i : batch)
      total += std::vector<double>{4, 4, 1, 1, 1, 1, 1, 1}[i];
    EXPECT_EQ(total, 7);
    EXPECT_EQ(batch.size(), 4u);
  }
  std::set<size_t> all;
  for (const std::vector<size_t> &batch : batches)
    all.insert(batch.begin(), batch.end());
  EXPECT_EQ(all.size(), 8u);
  // More programs than kernels: the extra batches stay empty.
  EXPECT_EQ(balancedBatches({3, 1}, 4)[0], std::vector<size_t>{0});
}
