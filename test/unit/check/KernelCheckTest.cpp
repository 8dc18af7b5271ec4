//===- KernelCheckTest.cpp - every example's kernels on the emu device ----===//
//
// Every spec in examples/ (and in test/unit/check/specs, for what no
// example uses) is compiled and each of its generated kernels is run on
// the emu device and compared with the cpu device, buffer by buffer
// (moec/KernelCheck.h). A new example or a new kernel is checked without
// anyone writing a test for it; a kernel no comparison exercised fails.
//
//===----------------------------------------------------------------------===//

#include "BundleData.h"
#include "KernelCheck.h"
#include "emu/EmuDevice.h"
#include "Examples.h"
#include "moec/Compiler.h"
#include "moec/Error.h"
#include "moec/KernelCheck.h"

#include <algorithm>
#include <gtest/gtest.h>
#include <iostream>
#include <tuple>

using namespace moec;

namespace {

/// A checked spec compiled with the dtype it names (dtype empty) or with
/// bf16 storage, and with its f32_matmul or the one named.
struct Case {
  test::SpecFile spec;
  std::string dtype;
  std::string f32Matmul = "";
  std::string name() const {
    std::string n = dtype.empty() ? spec.name : spec.name + "_" + dtype;
    return f32Matmul.empty() ? n : n + "_" + f32Matmul;
  }
};

void PrintTo(const Case &c, std::ostream *os) { *os << c.name(); }

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const test::SpecFile &spec : test::checkedSpecs())
    for (const char *dtype : {"", "bf16"})
      all.push_back({spec, dtype});
  return all;
}

/// Every example in f32 again, on the tensor cores: tf32 and 3xTF32.
std::vector<Case> tf32Cases() {
  std::vector<Case> all;
  for (const test::SpecFile &spec : test::specsIn(MOEC_SOURCE_DIR "/examples"))
    for (const char *f32Matmul : {"tf32", "tf32x3"})
      all.push_back({spec, "", f32Matmul});
  return all;
}

Bundle compileCase(const Case &c) {
  CompileOptions options;
  options.dtype = c.dtype;
  options.f32Matmul = c.f32Matmul;
  return compileFile(c.spec.path, options);
}

/// Every comparison passed, every program ran (forward, loss, backward,
/// train_step, decode) and every kernel the bundle defines was exercised.
void expectPassedAndCovered(const KernelCheckReport &report,
                            const Bundle &bundle) {
  EXPECT_TRUE(report.passed()) << report.format();
  EXPECT_TRUE(report.uncovered.empty()) << report.format();
  EXPECT_EQ(report.covered.size(), bundle.internals().kernels.size());
  std::cout << report.format();
}

/// Checks every kernel of `bundle` on the emu device against the cpu.
KernelCheckReport matchTheCpuDevice(const Bundle &bundle) {
  KernelCheckOptions options;
  options.device = "emu";
  KernelCheckReport report = checkKernels(bundle, options);
  expectPassedAndCovered(report, bundle);
  return report;
}

class ExampleKernels : public ::testing::TestWithParam<Case> {};

// Every kernel against the cpu device, on the emu device's checking build:
// bounds-checked global memory, tracked shared memory and strict warp
// masks, so an out-of-bounds access or a read of shared memory no thread
// wrote fails the launch, naming the kernel, block and thread. (The plain
// build computes the same values; the tf32 cases below and the emu session
// tests run it.)
TEST_P(ExampleKernels, MatchTheCpuDeviceUnderEmuChecks) {
  Bundle bundle = compileCase(GetParam());
  detail::emu::EmuDeviceOptions emu = detail::emu::emuOptionsFromEnvironment();
  emu.build.check = true;
  std::unique_ptr<detail::Device> cpu = detail::createDevice("cpu");
  std::unique_ptr<detail::Device> device = detail::emu::createEmuDevice(emu);
  device->setBundle(bundle.internals());
  expectPassedAndCovered(
      detail::checkKernels(bundle.internals(), *cpu, *device, {}), bundle);
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleKernels,
                         ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name(); });

class Tf32ExampleKernels : public ::testing::TestWithParam<Case> {};

// With tf32 the GEMM groups are held to tf32Tolerance (the expert
// gradients to tf32RecomputeTolerance), and their errors
// show that they multiply in tf32 (above what fp32 FMA leaves); with
// tf32x3 every group meets f32's tolerance.
TEST_P(Tf32ExampleKernels, MatchTheCpuDevice) {
  const Case &c = GetParam();
  Bundle bundle = compileCase(c);
  KernelCheckReport report = matchTheCpuDevice(bundle);
  const KernelCheckOptions defaults;
  double tf32Error = 0;
  int tf32Groups = 0;
  for (const BufferComparison &b : report.comparisons) {
    if (b.dtype != DType::F32)
      continue;
    if (c.f32Matmul == "tf32x3") {
      EXPECT_EQ(b.tolerance, defaults.f32Tolerance) << b.op;
    }
    if (b.tolerance == defaults.tf32Tolerance ||
        b.tolerance == defaults.tf32RecomputeTolerance) {
      ++tf32Groups;
      tf32Error = std::max(tf32Error, b.error);
    }
  }
  if (c.f32Matmul == "tf32") {
    EXPECT_GT(tf32Groups, 0) << "no group multiplies in tf32";
    EXPECT_GT(tf32Error, defaults.f32Tolerance)
        << "tf32 GEMMs as accurate as fp32 ones: are they tf32?";
  }
  std::string split;
  for (const auto &[name, kernel] : bundle.internals().kernels)
    if (kernel.source.find("moec::gemmTile3xTf32<") != std::string::npos)
      split = name;
  EXPECT_EQ(split.empty(), c.f32Matmul != "tf32x3") << split;
}

INSTANTIATE_TEST_SUITE_P(Examples, Tf32ExampleKernels,
                         ::testing::ValuesIn(tf32Cases()),
                         [](const auto &info) { return info.param.name(); });

TEST(KernelCheck, FindsEveryExample) {
  // The examples this project ships; a glob that finds nothing would make
  // the suite above vacuous.
  std::vector<std::string> specs = test::exampleSpecs();
  for (const char *name : {"glu_moe_lm", "moe_lm", "switch_lm"})
    EXPECT_NE(std::find(specs.begin(), specs.end(), name), specs.end())
        << name;
  std::vector<test::SpecFile> checked = test::checkedSpecs();
  EXPECT_TRUE(std::any_of(checked.begin(), checked.end(),
                          [](auto &spec) { return spec.name == "rope_lm"; }));
}

TEST(KernelCheck, OtherSizesAndSeeds) {
  // One token per sequence, and a batch whose token count fills no tile.
  Bundle bundle = compileFile(MOEC_SOURCE_DIR "/examples/moe_lm.moe");
  for (auto [batch, seq, seed] :
       {std::tuple<int64_t, int64_t, uint64_t>{3, 1, 5}, {5, 61, 9}}) {
    KernelCheckOptions options;
    options.batch = batch;
    options.seqLen = seq;
    options.seed = seed;
    options.programs = {"train_step", "forward"};
    KernelCheckReport report = checkKernels(bundle, options);
    EXPECT_TRUE(report.passed())
        << "B=" << batch << " S=" << seq << "\n"
        << report.format();
  }
}

TEST(KernelCheck, ElementCountsThatFillNoVector) {
  // d 36 with 15 tokens: every elementwise group's N is 4 more than a
  // multiple of 8, so its kernels run the 16-byte path and the last 4
  // elements one by one, in f32 and in bf16.
  std::string source =
      moec::readSpecFile(MOEC_SOURCE_DIR "/examples/moe_lm.moe");
  size_t at = source.find("let d = 128");
  ASSERT_NE(at, std::string::npos);
  source.replace(at, 11, "let d = 36");
  for (const char *dtype : {"f32", "bf16"}) {
    CompileOptions compile;
    compile.dtype = dtype;
    Bundle bundle = compileSource(source, "moe_lm_d36.moe",
                                  MOEC_SOURCE_DIR "/examples", compile);
    KernelCheckOptions options;
    options.batch = 3;
    options.seqLen = 5;
    options.programs = {"train_step", "forward"};
    KernelCheckReport report = checkKernels(bundle, options);
    EXPECT_TRUE(report.passed()) << dtype << "\n" << report.format();
  }
}

/// The emu device, recording which programs it ran and was told to
/// forget.
class ForgetRecorder : public detail::Device {
public:
  explicit ForgetRecorder(std::unique_ptr<detail::Device> inner)
      : inner(std::move(inner)) {}
  std::string name() const override { return inner->name(); }
  std::unique_ptr<detail::DeviceBuffer> allocate(DType dtype,
                                                 const Shape &shape) override {
    return inner->allocate(dtype, shape);
  }
  std::unique_ptr<detail::DeviceBuffer> alias(detail::DeviceBuffer &of,
                                              const Shape &shape) override {
    return inner->alias(of, shape);
  }
  void upload(detail::DeviceBuffer &dst, const Tensor &src) override {
    inner->upload(dst, src);
  }
  Tensor download(const detail::DeviceBuffer &src) override {
    return inner->download(src);
  }
  void copy(detail::DeviceBuffer &dst,
            const detail::DeviceBuffer &src) override {
    inner->copy(dst, src);
  }
  void setBundle(const detail::BundleData &bundle) override {
    inner->setBundle(bundle);
  }
  void prepare(const detail::ProgramDesc &program) override {
    inner->prepare(program);
  }
  void run(const detail::ProgramDesc &program,
           const detail::SymbolValues &symbols,
           const std::vector<detail::DeviceBuffer *> &buffers) override {
    events.push_back({"run", &program});
    inner->run(program, symbols, buffers);
  }
  void forget(const detail::ProgramDesc &program) override {
    events.push_back({"forget", &program});
    inner->forget(program);
  }
  bool runsGroups() const override { return inner->runsGroups(); }

  std::vector<std::pair<std::string, const detail::ProgramDesc *>> events;

private:
  std::unique_ptr<detail::Device> inner;
};

// The check runs each fused group as a program of its own, on its stack;
// the next group's may take the same address, so the device must forget
// each one (the cuda device keeps CUDA graphs by program address).
TEST(KernelCheck, TheDeviceForgetsEachGroupsProgram) {
  Bundle bundle = compileFile(MOEC_SOURCE_DIR "/examples/moe_lm.moe");
  std::unique_ptr<detail::Device> cpu = detail::createDevice("cpu");
  ForgetRecorder device(
      detail::emu::createEmuDevice(detail::emu::emuOptionsFromEnvironment()));
  device.setBundle(bundle.internals());
  KernelCheckOptions options;
  options.programs = {"forward"};
  detail::checkKernels(bundle.internals(), *cpu, device, options);
  const size_t groups = bundle.internals().programs.at("forward").groups.size();
  ASSERT_GE(groups, 3u);
  ASSERT_EQ(device.events.size(), 2 * groups);
  for (size_t i = 0; i < device.events.size(); i += 2) {
    EXPECT_EQ(device.events[i].first, "run") << i;
    EXPECT_EQ(device.events[i + 1].first, "forget") << i;
    EXPECT_EQ(device.events[i + 1].second, device.events[i].second) << i;
  }
}

TEST(KernelCheck, RejectsDevicesWithoutKernels) {
  Bundle bundle = compileFile(MOEC_SOURCE_DIR "/examples/moe_lm.moe");
  KernelCheckOptions options;
  options.device = "cpu";
  try {
    checkKernels(bundle, options);
    FAIL() << "the cpu device was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("runs no generated kernels"),
              std::string::npos)
        << e.what();
  }
}

} // namespace
