//===- EmuDevice.cpp - generated CUDA kernels run on the CPU --------------===//
//
// The bundle's kernels are built into a few shared objects at the first
// prepare(): each holds the device library and a fixed slice of the kernels
// (sorted by name), so that the compilers run in parallel and a rebuilt
// bundle with the same kernels hits the cache.
//
//===----------------------------------------------------------------------===//

#include "emu/EmuDevice.h"
#include "KernelStatus.h"
#include "LaunchShape.h"
#include "cuda/KernelSource.h"
#include "moec/Error.h"
#include "moec/support/DeviceLibrary.h"
#include "moec/support/Stopwatch.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <thread>

namespace moec::detail::emu {

using moec::emu::EmuLaunchConfig;
using moec::emu::EmuModule;
using moec::emu::KernelParams;

namespace {

/// Kernels per shared object: small enough that two compilers share the
/// work of a model, large enough that the library is parsed few times.
constexpr size_t kKernelsPerModule = 24;

unsigned environmentCount(const char *name) {
  const char *value = std::getenv(name);
  if (!value || !*value)
    return 0;
  char *end = nullptr;
  unsigned long n = std::strtoul(value, &end, 10);
  if (*end != '\0' || n > 4096)
    throw Error(fmt::format("${} is '{}'; expected a count from 0 to 4096",
                            name, value));
  return static_cast<unsigned>(n);
}

unsigned orCores(unsigned n) {
  return n ? n : std::max(1u, std::thread::hardware_concurrency());
}

class EmuBuffer : public DeviceBuffer {
public:
  EmuBuffer(DType dtype, const Shape &shape)
      : DeviceBuffer(dtype, shape),
        bytes(static_cast<size_t>(numElements(shape)) * dtypeSize(dtype)) {
    if (bytes == 0)
      return;
    // 64-byte alignment, as cuMemAlloc gives at least 256: vector loads
    // of any width are aligned.
    size_t rounded = (bytes + 63) / 64 * 64;
    data = static_cast<std::byte *>(std::aligned_alloc(64, rounded));
    if (!data)
      throw Error(fmt::format("emu: cannot allocate {} bytes for a {} {} "
                              "buffer",
                              bytes, dtypeName(dtype), shapeString(shape)));
    std::memset(data, 0, rounded);
  }
  /// A view of `of`'s storage, which must outlive it.
  EmuBuffer(const EmuBuffer &of, const Shape &shape)
      : DeviceBuffer(of.dtype, shape), bytes(of.bytes), data(of.data),
        owned(false) {}
  ~EmuBuffer() override {
    if (owned)
      std::free(data);
  }
  EmuBuffer(const EmuBuffer &) = delete;
  EmuBuffer &operator=(const EmuBuffer &) = delete;

  size_t bytes;
  std::byte *data = nullptr;
  bool owned = true;
};

EmuBuffer &emuBuffer(DeviceBuffer &b) { return static_cast<EmuBuffer &>(b); }
const EmuBuffer &emuBuffer(const DeviceBuffer &b) {
  return static_cast<const EmuBuffer &>(b);
}

class EmuDevice : public Device {
public:
  explicit EmuDevice(const EmuDeviceOptions &options)
      : options(options), hostThreads(orCores(options.hostThreads)) {}

  std::string name() const override { return "emu"; }
  bool runsGroups() const override { return true; }

  void setBundle(const BundleData &b) override {
    checkDeviceLibrary(b);
    bundle = &b;
  }

  std::unique_ptr<DeviceBuffer> allocate(DType dtype,
                                         const Shape &shape) override {
    return std::make_unique<EmuBuffer>(dtype, shape);
  }

  std::unique_ptr<DeviceBuffer> alias(DeviceBuffer &of,
                                      const Shape &shape) override {
    if (numElements(shape) != numElements(of.shape))
      throw Error(fmt::format("emu: cannot view a {} buffer as {}",
                              shapeString(of.shape), shapeString(shape)));
    return std::make_unique<EmuBuffer>(emuBuffer(of), shape);
  }

  void upload(DeviceBuffer &dst, const Tensor &src) override {
    checkSameLayout(dst, src.dtype(), src.shape(), "upload");
    EmuBuffer &b = emuBuffer(dst);
    if (b.bytes)
      std::memcpy(b.data, src.raw(), b.bytes);
  }

  Tensor download(const DeviceBuffer &src) override {
    const EmuBuffer &b = emuBuffer(src);
    Tensor t(b.dtype, b.shape);
    if (b.bytes)
      std::memcpy(t.raw(), b.data, b.bytes);
    return t;
  }

  void copy(DeviceBuffer &dst, const DeviceBuffer &src) override {
    checkSameLayout(dst, src.dtype, src.shape, "copy");
    EmuBuffer &to = emuBuffer(dst);
    if (to.bytes)
      std::memcpy(to.data, emuBuffer(src).data, to.bytes);
  }

  void prepare(const ProgramDesc &program) override;
  void run(const ProgramDesc &program, const SymbolValues &symbols,
           const std::vector<DeviceBuffer *> &buffers) override;

private:
  /// Builds (or finds in the cache) every kernel of the bundle.
  void buildKernels();

  EmuDeviceOptions options;
  unsigned hostThreads;
  const BundleData *bundle = nullptr;
  /// What the kernels report (KernelStatus.h); read after each run.
  KernelStatusWords status;
  bool built = false;
  std::vector<EmuModule> modules;
  /// The module exporting each kernel.
  std::map<std::string, const EmuModule *> kernels;
};

void EmuDevice::buildKernels() {
  std::vector<const KernelDesc *> all;
  for (const auto &[name, kernel] : bundle->kernels)
    all.push_back(&kernel);
  const size_t count = (all.size() + kKernelsPerModule - 1) / kKernelsPerModule;
  std::vector<std::string> sources(count);
  for (size_t m = 0; m < count; ++m) {
    std::string &unit = sources[m];
    if (options.deviceLibrary.empty())
      unit = deviceLibrarySource();
    else
      unit = options.deviceLibrary;
    for (size_t k = m * kKernelsPerModule;
         k < std::min(all.size(), (m + 1) * kKernelsPerModule); ++k) {
      unit += '\n';
      unit += all[k]->source;
    }
  }
  // Compile in parallel; report the first failure in module order.
  std::vector<std::optional<EmuModule>> loaded(count);
  std::vector<std::exception_ptr> errors(count);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t m = next++; m < count; m = next++) {
      try {
        loaded[m] = EmuModule::load(
            sources[m], fmt::format("kernels-{}-of-{}", m + 1, count),
            options.build);
      } catch (...) {
        errors[m] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  const unsigned jobs =
      std::min<unsigned>(orCores(options.compileJobs), unsigned(count));
  for (unsigned j = 1; j < jobs; ++j)
    threads.emplace_back(worker);
  worker();
  for (std::thread &t : threads)
    t.join();
  for (std::exception_ptr &e : errors)
    if (e)
      std::rethrow_exception(e);
  modules.reserve(count);
  for (std::optional<EmuModule> &m : loaded)
    modules.push_back(std::move(*m));
  for (size_t k = 0; k < all.size(); ++k)
    kernels[all[k]->name] = &modules[k / kKernelsPerModule];
  built = true;
}

void EmuDevice::prepare(const ProgramDesc &program) {
  if (program.groups.empty())
    throw Error(fmt::format("program '{}' has no generated kernels, so the "
                            "emu device cannot run it; compile the model "
                            "with CUDA code generation or use --device cpu",
                            program.name));
  if (!bundle)
    throw Error(fmt::format("internal error: the emu device was given no "
                            "bundle before preparing program '{}'",
                            program.name));
  if (!built)
    buildKernels();
  for (size_t g = 0; g < program.groups.size(); ++g)
    for (const LaunchDesc &launch : program.groups[g].launches) {
      auto it = kernels.find(launch.kernel);
      if (it == kernels.end() || !it->second->hasKernel(launch.kernel))
        throw launchError(program, g, launch,
                          "the kernel is not in the bundle's emu build");
    }
}

void EmuDevice::run(const ProgramDesc &program, const SymbolValues &symbols,
                    const std::vector<DeviceBuffer *> &buffers) {
  const size_t firstGrad = profiling ? firstGradientStep(program) : 0;
  status = KernelStatusWords(); // a launch that threw may have reported
  int64_t tag = 0;              // KernelStatusWords::launch
  for (size_t g = 0; g < program.groups.size(); ++g)
    for (const LaunchDesc &launch : program.groups[g].launches) {
      ++tag;
      LaunchShape shape = resolveLaunch(program, g, launch, symbols);
      if (shape.empty())
        continue;
      KernelParams params;
      EmuLaunchConfig config;
      config.grid = shape.grid;
      config.block = shape.block;
      config.sharedBytes = static_cast<uint64_t>(launch.sharedBytes);
      config.hostThreads = hostThreads;
      config.bufferBytes.assign(launch.buffers.size(), 0);
      for (size_t i = 0; i < launch.buffers.size(); ++i) {
        int64_t id = launch.buffers[i];
        if (id < 0)
          continue;
        if (size_t(id) >= buffers.size() || !buffers[id])
          throw launchError(program, g, launch,
                            fmt::format("buffer {} has no storage", id));
        EmuBuffer &b = emuBuffer(*buffers[id]);
        params.buffers[i] = b.data;
        config.bufferBytes[i] = b.bytes;
      }
      std::copy(shape.scalars.begin(), shape.scalars.end(), params.scalars);
      params.status = &status;
      params.launchTag = tag;
      auto start = std::chrono::steady_clock::now();
      try {
        kernels.at(launch.kernel)->launch(launch.kernel, config, params);
      } catch (const Error &e) {
        throw launchError(program, g, launch, e.what());
      }
      if (profiling)
        recordLaunch(program, g, launch.kernel, firstGrad,
                     support::secondsSince(start));
    }
  if (std::optional<Error> error = kernelStatusError(program, symbols, status))
    throw *error;
}

} // namespace

EmuDeviceOptions emuOptionsFromEnvironment() {
  EmuDeviceOptions options;
  const char *check = std::getenv("MOEC_EMU_CHECK");
  options.build.check = check && *check && std::strcmp(check, "0") != 0;
  options.hostThreads = environmentCount("MOEC_EMU_THREADS");
  options.compileJobs = environmentCount("MOEC_EMU_JOBS");
  return options;
}

std::unique_ptr<Device> createEmuDevice(const EmuDeviceOptions &options) {
  return std::make_unique<EmuDevice>(options);
}

} // namespace moec::detail::emu
