//===- CudaDevice.cpp - generated kernels on an NVIDIA GPU ----------------===//
//
// Every buffer is its own allocation (the plan already shares storage
// between buffers whose lifetimes do not overlap). Host transfers go
// through the stream and wait for it, so the Device calls are synchronous;
// a program's launches are asynchronous and run() waits once at its end.
//
//===----------------------------------------------------------------------===//

#include "CudaDevice.h"
#include "CublasLt.h"
#include "CudaDriver.h"
#include "KernelCache.h"
#include "KernelParams.h"
#include "KernelSource.h"
#include "KernelStatus.h"
#include "LaunchShape.h"
#include "Precompile.h"
#include "ToolkitLibraries.h"
#include "moec/Error.h"
#include "moec/support/Stopwatch.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <set>

namespace moec::detail::cuda {

namespace {

/// Launches need no attribute up to this much shared memory, static and
/// dynamic together: the driver's default dynamic limit is this less the
/// kernel's static shared memory (used when the driver does not say).
constexpr int64_t kDefaultDynamicShared = 48 * 1024;

bool environmentFlag(const char *name, bool fallback) {
  const char *value = std::getenv(name);
  if (!value || !*value)
    return fallback;
  return std::strcmp(value, "0") != 0;
}

/// The GPU, its primary context and the device's stream. Buffers share it
/// with the device, so that memory is freed before the context is released.
struct Gpu {
  const CudaDriver &driver;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  std::string name;
  int major = 0, minor = 0;
  int multiprocessors = 0;
  int maxSharedOptin = 0;
  int maxThreadsPerBlock = 0;
  int maxGrid[3] = {0, 0, 0};

  Gpu() : driver(CudaDriver::get()) {
    int count = 0;
    driver.check(driver.cuDeviceGetCount(&count), "cuDeviceGetCount");
    if (count == 0)
      throw Error("the CUDA driver found no GPU; use --device cpu or --device "
                  "emu");
    driver.check(driver.cuDeviceGet(&device, 0), "cuDeviceGet");
    char text[256] = {0};
    driver.check(driver.cuDeviceGetName(text, sizeof(text) - 1, device),
                 "cuDeviceGetName");
    name = text;
    major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    multiprocessors = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    maxSharedOptin =
        attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    maxThreadsPerBlock = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    maxGrid[0] = attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
    maxGrid[1] = attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
    maxGrid[2] = attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
    if (major < 8)
      throw Error(fmt::format("the GPU '{}' has compute capability {}.{}; "
                              "moec's kernels need 8.0 (Ampere) or newer; use "
                              "--device cpu or --device emu",
                              name, major, minor));
    driver.check(driver.cuDevicePrimaryCtxRetain(&context, device),
                 "cuDevicePrimaryCtxRetain");
    try {
      makeCurrent();
      driver.check(driver.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING),
                   "cuStreamCreate");
    } catch (...) {
      driver.cuDevicePrimaryCtxRelease(device);
      throw;
    }
  }

  ~Gpu() {
    // Nothing to report to in a destructor; a failure here means the
    // context is already gone.
    driver.cuCtxSetCurrent(context);
    driver.cuStreamDestroy(stream);
    driver.cuDevicePrimaryCtxRelease(device);
  }

  Gpu(const Gpu &) = delete;
  Gpu &operator=(const Gpu &) = delete;

  int attribute(int which) const {
    int value = 0;
    driver.check(driver.cuDeviceGetAttribute(&value, which, device),
                 "cuDeviceGetAttribute");
    return value;
  }

  /// The calling thread may differ from the one that made the device.
  void makeCurrent() const {
    driver.check(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent");
  }

  void synchronize() const {
    driver.check(driver.cuStreamSynchronize(stream), "cuStreamSynchronize");
  }
};

class CudaBuffer : public DeviceBuffer {
public:
  CudaBuffer(std::shared_ptr<Gpu> gpu, DType dtype, const Shape &shape)
      : DeviceBuffer(dtype, shape), gpu(std::move(gpu)),
        bytes(static_cast<size_t>(numElements(shape)) * dtypeSize(dtype)) {}
  ~CudaBuffer() override {
    if (pointer && owned) {
      gpu->driver.cuCtxSetCurrent(gpu->context);
      gpu->driver.cuMemFree(pointer);
    }
  }

  std::shared_ptr<Gpu> gpu;
  size_t bytes;
  CUdeviceptr pointer = 0;
  /// False for a view of another buffer's memory.
  bool owned = true;
};

CudaBuffer &cudaBuffer(DeviceBuffer &b) { return static_cast<CudaBuffer &>(b); }
const CudaBuffer &cudaBuffer(const DeviceBuffer &b) {
  return static_cast<const CudaBuffer &>(b);
}

/// A kernel loaded into the context; its module is in
/// CudaDeviceImpl::modules.
struct LoadedKernel {
  CUfunction function = nullptr;
  int staticShared = 0;
  /// The dynamic shared memory the function may use (its attribute).
  int64_t dynamicLimit = 0;
  /// The largest block it can run (its __launch_bounds__ and registers);
  /// 0 when the driver does not say.
  int64_t maxThreads = 0;
};

/// What graph replay remembers about one program.
struct ProgramGraph {
  bool seen = false;
  SymbolValues symbols;
  std::vector<CUdeviceptr> pointers;
  CUgraphExec exec = nullptr;
  /// A capture or its instantiation failed: the program runs kernel by
  /// kernel from then on.
  bool uncapturable = false;
};

class CudaDeviceImpl : public CudaDevice {
public:
  CudaDeviceImpl()
      : gpu(std::make_shared<Gpu>()),
        archName(fmt::format("sm_{}{}", gpu->major, gpu->minor)),
        useGraphs(environmentFlag("MOEC_CUDA_GRAPHS", true)),
        syncEachLaunch(environmentFlag("MOEC_CUDA_SYNC", false)) {
    // Fail now, not at the first program, when kernels cannot be compiled.
    Nvrtc::get();
    status = allocate(DType::I32, {4});
    resetStatus();
  }

  ~CudaDeviceImpl() override {
    const CudaDriver &d = gpu->driver;
    d.cuCtxSetCurrent(gpu->context);
    d.cuStreamSynchronize(gpu->stream);
    for (auto &[program, graph] : graphs)
      if (graph.exec)
        d.cuGraphExecDestroy(graph.exec);
    for (auto &[cubin, module] : modules)
      d.cuModuleUnload(module);
  }

  std::string name() const override { return "cuda"; }
  bool runsGroups() const override { return true; }
  const std::string &arch() const override { return archName; }
  void setBundle(const BundleData &b) override {
    checkDeviceLibrary(b);
    bundle = &b;
  }

  std::unique_ptr<DeviceBuffer> allocate(DType dtype,
                                         const Shape &shape) override {
    auto buffer = std::make_unique<CudaBuffer>(gpu, dtype, shape);
    if (buffer->bytes == 0)
      return buffer;
    const CudaDriver &d = gpu->driver;
    gpu->makeCurrent();
    CUresult result = d.cuMemAlloc(&buffer->pointer, buffer->bytes);
    if (result != CUDA_SUCCESS)
      throw Error(fmt::format("cannot allocate {} bytes on the GPU for a {} {} "
                              "buffer: cuMemAlloc failed: {}",
                              buffer->bytes, dtypeName(dtype),
                              shapeString(shape), d.errorText(result)));
    d.check(d.cuMemsetD8Async(buffer->pointer, 0, buffer->bytes, gpu->stream),
            "cuMemsetD8Async");
    gpu->synchronize();
    return buffer;
  }

  std::unique_ptr<DeviceBuffer> alias(DeviceBuffer &of,
                                      const Shape &shape) override {
    const CudaBuffer &viewed = cudaBuffer(of);
    auto buffer = std::make_unique<CudaBuffer>(gpu, of.dtype, shape);
    if (buffer->bytes != viewed.bytes)
      throw Error(fmt::format("cannot view a {}-byte GPU buffer as {}",
                              viewed.bytes, shapeString(shape)));
    buffer->pointer = viewed.pointer;
    buffer->owned = false;
    return buffer;
  }

  void upload(DeviceBuffer &dst, const Tensor &src) override {
    checkSameLayout(dst, src.dtype(), src.shape(), "upload");
    CudaBuffer &b = cudaBuffer(dst);
    if (b.bytes == 0)
      return;
    const CudaDriver &d = gpu->driver;
    gpu->makeCurrent();
    d.check(d.cuMemcpyHtoDAsync(b.pointer, src.raw(), b.bytes, gpu->stream),
            "cuMemcpyHtoDAsync");
    // The host tensor may go as soon as we return.
    gpu->synchronize();
  }

  Tensor download(const DeviceBuffer &src) override {
    const CudaBuffer &b = cudaBuffer(src);
    Tensor t(b.dtype, b.shape);
    if (b.bytes == 0)
      return t;
    const CudaDriver &d = gpu->driver;
    gpu->makeCurrent();
    d.check(d.cuMemcpyDtoHAsync(t.raw(), b.pointer, b.bytes, gpu->stream),
            "cuMemcpyDtoHAsync");
    gpu->synchronize();
    return t;
  }

  void copy(DeviceBuffer &dst, const DeviceBuffer &src) override {
    checkSameLayout(dst, src.dtype, src.shape, "copy");
    CudaBuffer &to = cudaBuffer(dst);
    if (to.bytes == 0)
      return;
    const CudaDriver &d = gpu->driver;
    gpu->makeCurrent();
    d.check(d.cuMemcpyDtoDAsync(to.pointer, cudaBuffer(src).pointer, to.bytes,
                                gpu->stream),
            "cuMemcpyDtoDAsync");
    gpu->synchronize();
  }

  void prepare(const ProgramDesc &program) override;
  void run(const ProgramDesc &program, const SymbolValues &symbols,
           const std::vector<DeviceBuffer *> &buffers) override;
  void forget(const ProgramDesc &program) override {
    auto it = graphs.find(&program);
    if (it == graphs.end())
      return;
    // Unchecked, as in the destructor: callers forget while unwinding.
    if (it->second.exec) {
      gpu->driver.cuCtxSetCurrent(gpu->context);
      gpu->driver.cuGraphExecDestroy(it->second.exec);
    }
    graphs.erase(it);
  }

private:
  /// Loads the program's kernels that are not loaded yet, compiling those
  /// the kernel cache lacks on every hardware thread.
  void loadMissing(const ProgramDesc &program);
  /// The loaded kernel; `program` launches it (for errors).
  LoadedKernel &loaded(const ProgramDesc &program, const std::string &kernel);
  /// Loads `compiled`'s module unless it is loaded (kernels compiled
  /// together share one) and finds the kernel in it.
  void load(const ProgramDesc &program, const CompiledKernel &compiled);
  /// Launches `program` (kernel by kernel or as a CUDA graph) and waits:
  /// run() without its cleanup after a failure.
  void launchAndWait(const ProgramDesc &program, const SymbolValues &symbols,
                     const std::vector<DeviceBuffer *> &buffers);
  /// Launches every kernel of `program` (timed: one at a time) and waits.
  void runKernelByKernel(const ProgramDesc &program,
                         const SymbolValues &symbols,
                         const std::vector<DeviceBuffer *> &buffers,
                         bool timed);
  /// Launches every group of `program` on the stream.
  void launchAll(const ProgramDesc &program, const SymbolValues &symbols,
                 const std::vector<DeviceBuffer *> &buffers, bool timed);
  CUgraphExec capture(const ProgramDesc &program, const SymbolValues &symbols,
                      const std::vector<DeviceBuffer *> &buffers);
  /// Waits for the stream; a failure names the program and, when known,
  /// the kernel. Then throws what the kernels reported (KernelStatus.h).
  void finish(const ProgramDesc &program, const SymbolValues &symbols,
              const std::string &where);
  /// Sets the status words to "nothing reported".
  void resetStatus();
  /// Computes the launch's GEMM with cuBLASLt when the plan chose it and
  /// the library is there; false when the kernel must run instead.
  bool runLibraryGemm(const ProgramDesc &program, size_t group,
                      const LaunchDesc &launch, const SymbolValues &symbols,
                      const std::vector<DeviceBuffer *> &buffers,
                      const KernelParams &params);

  std::shared_ptr<Gpu> gpu;
  /// The KernelStatusWords every launch may report through, and the host
  /// copy each run reads back.
  std::unique_ptr<DeviceBuffer> status;
  KernelStatusWords reported;
  std::string archName;
  bool useGraphs;
  bool syncEachLaunch;
  const BundleData *bundle = nullptr;
  std::map<std::string, LoadedKernel> kernels;
  /// Loaded modules; the key keeps the CUBIN alive.
  std::map<Cubin, CUmodule> modules;
  std::map<const ProgramDesc *, ProgramGraph> graphs;
  /// cuBLASLt, made at the first library GEMM; none when it cannot load.
  std::unique_ptr<GemmRunner> gemms;
  bool gemmsTried = false;
};

bool CudaDeviceImpl::runLibraryGemm(const ProgramDesc &program, size_t group,
                                    const LaunchDesc &launch,
                                    const SymbolValues &symbols,
                                    const std::vector<DeviceBuffer *> &buffers,
                                    const KernelParams &params) {
  if (!launch.gemm || !launch.gemm->library)
    return false;
  if (!gemmsTried) {
    gemmsTried = true;
    // A library that loads but cannot start (a driver it does not accept)
    // costs speed, not correctness: the kernels compute the same.
    if (const CublasLt *library = CublasLt::get()) {
      try {
        gemms = std::make_unique<GemmRunner>(*library, gpu->driver);
      } catch (const Error &e) {
        fmt::print(stderr,
                   "moec: warning: cuBLASLt ({}) cannot start: {}; dense "
                   "GEMMs run on moec's own kernels\n",
                   library->library(), e.what());
      }
    }
  }
  if (!gemms)
    return false;
  const GemmDesc &g = *launch.gemm;
  GemmCall call;
  auto size = [&](const DimExpr &d) {
    return evaluateLaunchSize(program, group, launch, d, symbols,
                              "the GEMM size");
  };
  call.m = size(g.m);
  call.n = size(g.n);
  call.k = size(g.k);
  // An empty product is the kernel's: it writes zeros (and the bias).
  if (call.m <= 0 || call.n <= 0 || call.k <= 0)
    return false;
  call.in = program.buffers[launch.buffers[g.a.arg]].dtype;
  call.out = program.buffers[launch.buffers[g.d]].dtype;
  call.a = params.buffers[g.a.arg];
  call.b = params.buffers[g.b.arg];
  call.d = params.buffers[g.d];
  call.bias = g.bias >= 0 ? params.buffers[g.bias] : nullptr;
  auto elements = [&](int arg) -> int64_t {
    const DeviceBuffer *buffer = buffers[launch.buffers[arg]];
    return int64_t(cudaBuffer(*buffer).bytes / dtypeSize(buffer->dtype));
  };
  call.aElements = elements(g.a.arg);
  call.bElements = elements(g.b.arg);
  call.dElements = elements(g.d);
  call.biasElements = g.bias >= 0 ? elements(g.bias) : 0;
  if (std::string overrun = gemmOverrun(g, call); !overrun.empty())
    throw launchError(program, group, launch,
                      fmt::format("the bundle's GEMM record (m {}, n {}, k {}) "
                                  "does not fit its buffers: {}",
                                  call.m, call.n, call.k, overrun));
  try {
    return gemms->run(g, call, gpu->stream);
  } catch (const Error &e) {
    throw launchError(program, group, launch, e.what());
  }
}

LoadedKernel &CudaDeviceImpl::loaded(const ProgramDesc &program,
                                     const std::string &kernel) {
  if (auto it = kernels.find(kernel); it != kernels.end())
    return it->second;
  throw Error(fmt::format("program '{}' launches kernel '{}', which the "
                          "bundle does not define",
                          program.name, kernel));
}

/// Why a CUBIN the driver refuses may have been refused: NVRTC of a newer
/// CUDA major than the driver compiled it ("" when not so).
std::string nvrtcNewerThanDriver(const CudaDriver &d) {
  int driver = 0;
  if (d.cuDriverGetVersion(&driver) != CUDA_SUCCESS || driver <= 0)
    return "";
  auto [major, minor] = Nvrtc::get().version();
  if (major <= driver / 1000)
    return "";
  return fmt::format("; NVRTC {}.{} compiled it, newer than the CUDA {}.{} "
                     "the driver supports: {}",
                     major, minor, driver / 1000, driver % 1000 / 10,
                     nvrtcForDriverAdvice(driver / 1000));
}

void CudaDeviceImpl::load(const ProgramDesc &program,
                          const CompiledKernel &compiled) {
  const CudaDriver &d = gpu->driver;
  auto [at, added] = modules.emplace(compiled.cubin, nullptr);
  if (added) {
    CUresult result = d.cuModuleLoadData(&at->second, compiled.cubin->data());
    if (result != CUDA_SUCCESS) {
      modules.erase(at);
      throw Error(fmt::format("program '{}': loading kernel '{}' ({} CUBIN) "
                              "failed: cuModuleLoadData: {}{}",
                              program.name, compiled.name, archName,
                              d.errorText(result), nvrtcNewerThanDriver(d)));
    }
  }
  LoadedKernel kernel;
  kernel.staticShared = std::max(0, compiled.usage.sharedBytes);
  CUresult result = d.cuModuleGetFunction(&kernel.function, at->second,
                                          compiled.name.c_str());
  if (result != CUDA_SUCCESS)
    throw Error(fmt::format("program '{}': the CUBIN of kernel '{}' has no "
                            "function of that name (it must be extern \"C\"): "
                            "cuModuleGetFunction: {}",
                            program.name, compiled.name, d.errorText(result)));
  // The driver knows both sizes for certain; the ptxas log may not say.
  int value = 0;
  if (d.cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                           kernel.function) == CUDA_SUCCESS)
    kernel.staticShared = value;
  kernel.dynamicLimit =
      d.cuFuncGetAttribute(&value,
                           CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                           kernel.function) == CUDA_SUCCESS
          ? value
          : std::max<int64_t>(0, kDefaultDynamicShared - kernel.staticShared);
  if (d.cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                           kernel.function) == CUDA_SUCCESS)
    kernel.maxThreads = value;
  kernels.emplace(compiled.name, kernel);
}

void CudaDeviceImpl::loadMissing(const ProgramDesc &program) {
  std::vector<const KernelDesc *> missing;
  std::set<std::string> seen;
  for (const GroupDesc &group : program.groups)
    for (const LaunchDesc &launch : group.launches) {
      if (kernels.count(launch.kernel) || !seen.insert(launch.kernel).second)
        continue;
      auto desc = bundle->kernels.find(launch.kernel);
      if (desc != bundle->kernels.end()) // loaded() reports a missing one
        missing.push_back(&desc->second);
    }
  for (const CompiledKernel &compiled : fetchOrCompile(missing, archName))
    load(program, compiled);
}

void CudaDeviceImpl::prepare(const ProgramDesc &program) {
  if (program.groups.empty())
    throw Error(fmt::format("program '{}' has no generated kernels, so the "
                            "cuda device cannot run it; compile the model "
                            "with CUDA code generation or use --device cpu",
                            program.name));
  if (!bundle)
    throw Error(fmt::format("internal error: the cuda device was given no "
                            "bundle before preparing program '{}'",
                            program.name));
  gpu->makeCurrent();
  loadMissing(program);
  for (size_t g = 0; g < program.groups.size(); ++g)
    for (const LaunchDesc &launch : program.groups[g].launches) {
      auto fail = [&](const std::string &what) {
        return launchError(program, g, launch, what);
      };
      if (launch.buffers.size() > size_t(kMaxKernelBuffers) ||
          launch.scalars.size() > size_t(kMaxKernelScalars))
        throw fail(fmt::format("{} buffers and {} scalars, more than the "
                               "kernel ABI's {} and {}",
                               launch.buffers.size(), launch.scalars.size(),
                               kMaxKernelBuffers, kMaxKernelScalars));
      for (int64_t id : launch.buffers)
        if (id >= int64_t(program.buffers.size()))
          throw fail(fmt::format("buffer {} does not exist", id));
      int64_t threads = launch.block[0] * launch.block[1] * launch.block[2];
      if (launch.block[0] < 1 || launch.block[1] < 1 || launch.block[2] < 1 ||
          threads > gpu->maxThreadsPerBlock)
        throw fail(fmt::format("a block of {}x{}x{} threads; the GPU allows "
                               "at most {} per block",
                               launch.block[0], launch.block[1],
                               launch.block[2], gpu->maxThreadsPerBlock));
      LoadedKernel &kernel = loaded(program, launch.kernel);
      if (kernel.maxThreads > 0 && threads > kernel.maxThreads)
        throw fail(fmt::format("a block of {} threads; the kernel runs at "
                               "most {} per block (its __launch_bounds__ or "
                               "its registers)",
                               threads, kernel.maxThreads));
      if (kernel.staticShared + launch.sharedBytes > gpu->maxSharedOptin)
        throw fail(fmt::format("{} bytes of static and {} of dynamic shared "
                               "memory; the GPU '{}' allows {} per block",
                               kernel.staticShared, launch.sharedBytes,
                               gpu->name, gpu->maxSharedOptin));
      if (launch.sharedBytes > kernel.dynamicLimit) {
        const CudaDriver &d = gpu->driver;
        CUresult result = d.cuFuncSetAttribute(
            kernel.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            static_cast<int>(launch.sharedBytes));
        if (result != CUDA_SUCCESS)
          throw fail(fmt::format("allowing {} bytes of dynamic shared memory "
                                 "failed: cuFuncSetAttribute: {}",
                                 launch.sharedBytes, d.errorText(result)));
        kernel.dynamicLimit = launch.sharedBytes;
      }
    }
}

void CudaDeviceImpl::launchAll(const ProgramDesc &program,
                               const SymbolValues &symbols,
                               const std::vector<DeviceBuffer *> &buffers,
                               bool timed) {
  const CudaDriver &d = gpu->driver;
  const size_t firstGrad = timed ? firstGradientStep(program) : 0;
  void *statusWords = reinterpret_cast<void *>(cudaBuffer(*status).pointer);
  int64_t tag = 0; // KernelStatusWords::launch
  for (size_t g = 0; g < program.groups.size(); ++g)
    for (const LaunchDesc &launch : program.groups[g].launches) {
      ++tag;
      auto fail = [&](const std::string &what) {
        return launchError(program, g, launch, what);
      };
      LaunchShape shape =
          resolveLaunch(program, g, launch, symbols,
                        {gpu->maxGrid[0], gpu->maxGrid[1], gpu->maxGrid[2]});
      if (shape.empty())
        continue;
      const auto &grid = shape.grid;
      KernelParams params; // zeroed by its initialisers: no padding
      for (size_t i = 0; i < launch.buffers.size(); ++i) {
        int64_t id = launch.buffers[i];
        if (id < 0)
          continue;
        if (size_t(id) >= buffers.size() || !buffers[id])
          throw fail(fmt::format("buffer {} has no storage", id));
        params.buffers[i] =
            reinterpret_cast<void *>(cudaBuffer(*buffers[id]).pointer);
      }
      std::copy(shape.scalars.begin(), shape.scalars.end(), params.scalars);
      params.status = statusWords;
      params.launchTag = tag;
      void *args[] = {&params};
      auto start = std::chrono::steady_clock::now();
      bool library =
          runLibraryGemm(program, g, launch, symbols, buffers, params);
      CUresult result =
          library ? CUDA_SUCCESS
                  : d.cuLaunchKernel(kernels.at(launch.kernel).function,
                                     grid[0], grid[1], grid[2],
                                     static_cast<unsigned>(launch.block[0]),
                                     static_cast<unsigned>(launch.block[1]),
                                     static_cast<unsigned>(launch.block[2]),
                                     static_cast<unsigned>(launch.sharedBytes),
                                     gpu->stream, args, nullptr);
      if (result != CUDA_SUCCESS)
        throw fail(fmt::format("cuLaunchKernel failed: {} (grid {}x{}x{}, "
                               "block {}x{}x{}, {} bytes dynamic shared)",
                               d.errorText(result), grid[0], grid[1], grid[2],
                               launch.block[0], launch.block[1],
                               launch.block[2], launch.sharedBytes));
      if (timed || syncEachLaunch) {
        result = d.cuStreamSynchronize(gpu->stream);
        if (result != CUDA_SUCCESS)
          throw fail(fmt::format("the kernel failed on the GPU: {}",
                                 d.errorText(result)));
      }
      if (timed)
        recordLaunch(program, g,
                     library ? launch.kernel + " (cuBLASLt)" : launch.kernel,
                     firstGrad, support::secondsSince(start));
    }
}

CUgraphExec
CudaDeviceImpl::capture(const ProgramDesc &program, const SymbolValues &symbols,
                        const std::vector<DeviceBuffer *> &buffers) {
  const CudaDriver &d = gpu->driver;
  d.check(
      d.cuStreamBeginCapture(gpu->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
      "cuStreamBeginCapture");
  CUgraph graph = nullptr;
  try {
    launchAll(program, symbols, buffers, /*timed=*/false);
  } catch (...) {
    // Leave the stream usable: a capture must be ended.
    if (d.cuStreamEndCapture(gpu->stream, &graph) == CUDA_SUCCESS && graph)
      d.cuGraphDestroy(graph);
    throw;
  }
  CUresult result = d.cuStreamEndCapture(gpu->stream, &graph);
  if (result != CUDA_SUCCESS)
    throw Error(fmt::format("program '{}': capturing a CUDA graph failed: "
                            "cuStreamEndCapture: {}",
                            program.name, d.errorText(result)));
  CUgraphExec exec = nullptr;
  result = d.cuGraphInstantiateWithFlags(&exec, graph, 0);
  d.cuGraphDestroy(graph);
  if (result != CUDA_SUCCESS)
    throw Error(fmt::format("program '{}': instantiating its CUDA graph "
                            "failed: cuGraphInstantiateWithFlags: {}",
                            program.name, d.errorText(result)));
  return exec;
}

void CudaDeviceImpl::resetStatus() {
  const CudaDriver &d = gpu->driver;
  const KernelStatusWords none;
  d.check(d.cuMemcpyHtoDAsync(cudaBuffer(*status).pointer, &none, sizeof none,
                              gpu->stream),
          "cuMemcpyHtoDAsync");
  gpu->synchronize();
}

void CudaDeviceImpl::finish(const ProgramDesc &program,
                            const SymbolValues &symbols,
                            const std::string &where) {
  auto start = std::chrono::steady_clock::now();
  // Behind the program's kernels in the stream: one wait for both.
  CUresult result = gpu->driver.cuMemcpyDtoHAsync(
      &reported, cudaBuffer(*status).pointer, sizeof reported, gpu->stream);
  if (result == CUDA_SUCCESS)
    result = gpu->driver.cuStreamSynchronize(gpu->stream);
  waited += support::secondsSince(start);
  if (result != CUDA_SUCCESS)
    throw Error(fmt::format("program '{}': {} failed on the GPU: {}; run with "
                            "MOEC_CUDA_SYNC=1 to find the kernel",
                            program.name, where,
                            gpu->driver.errorText(result)));
  if (std::optional<Error> error =
          kernelStatusError(program, symbols, reported)) {
    resetStatus();
    throw *error;
  }
}

void CudaDeviceImpl::run(const ProgramDesc &program,
                         const SymbolValues &symbols,
                         const std::vector<DeviceBuffer *> &buffers) {
  gpu->makeCurrent();
  try {
    launchAndWait(program, symbols, buffers);
  } catch (...) {
    // A launch that failed after a kernel reported leaves the report for
    // the next run; clear it (in stream order, behind what was queued).
    // When the GPU has failed, that fails too, and the first error stands.
    try {
      resetStatus();
    } catch (const Error &) {
    }
    throw;
  }
}

void CudaDeviceImpl::runKernelByKernel(
    const ProgramDesc &program, const SymbolValues &symbols,
    const std::vector<DeviceBuffer *> &buffers, bool timed) {
  launchAll(program, symbols, buffers, timed);
  finish(program, symbols, "a kernel");
}

void CudaDeviceImpl::launchAndWait(const ProgramDesc &program,
                                   const SymbolValues &symbols,
                                   const std::vector<DeviceBuffer *> &buffers) {
  if (profiling || syncEachLaunch || !useGraphs)
    return runKernelByKernel(program, symbols, buffers, profiling);
  ProgramGraph &graph = graphs[&program];
  if (graph.uncapturable)
    return runKernelByKernel(program, symbols, buffers, false);
  // Replay a graph when the sizes and every buffer address are those of the
  // last run; capture it on the second such run, so that a program run once
  // costs no capture.
  std::vector<CUdeviceptr> pointers(buffers.size(), 0);
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i])
      pointers[i] = cudaBuffer(*buffers[i]).pointer;
  const CudaDriver &d = gpu->driver;
  if (!graph.seen || graph.symbols != symbols || graph.pointers != pointers) {
    if (graph.exec)
      d.cuGraphExecDestroy(graph.exec);
    graph.seen = true;
    graph.symbols = symbols;
    graph.pointers = std::move(pointers);
    graph.exec = nullptr;
    return runKernelByKernel(program, symbols, buffers, false);
  }
  if (!graph.exec) {
    std::string refused;
    try {
      graph.exec = capture(program, symbols, buffers);
    } catch (const Error &e) {
      refused = e.what();
    }
    if (!graph.exec) {
      // Graphs save host time only: a program the driver cannot capture (a
      // library kernel, a driver's limit) runs kernel by kernel from now
      // on. A launch error the capture met recurs here and stops the run
      // instead, leaving graphs on.
      runKernelByKernel(program, symbols, buffers, false);
      graph.uncapturable = true;
      fmt::print(stderr,
                 "moec: warning: {}; the program runs kernel by kernel\n",
                 refused);
      return;
    }
  }
  if (CUresult result = d.cuGraphLaunch(graph.exec, gpu->stream);
      result != CUDA_SUCCESS)
    throw Error(fmt::format("program '{}': replaying its CUDA graph failed: "
                            "cuGraphLaunch: {}; set MOEC_CUDA_GRAPHS=0 to run "
                            "without graphs",
                            program.name, d.errorText(result)));
  finish(program, symbols, "a kernel (replayed from a CUDA graph)");
}

} // namespace

std::unique_ptr<CudaDevice> createCudaDevice() {
  return std::make_unique<CudaDeviceImpl>();
}

} // namespace moec::detail::cuda
