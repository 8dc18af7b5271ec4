//===- FakeCudaDriver.cpp - a host-memory stand-in for libcuda ------------===//
//
// Exports the driver entry points moec resolves, under their versioned
// names, plus cuGetProcAddress_v2 so that the lookup path moec prefers is
// the one exercised. Device pointers are host pointers. An A100-like device:
// compute capability 8.0, 163 KiB opt-in shared memory per block.
//
//===----------------------------------------------------------------------===//

#include "FakeCudaDriver.h"
#include "KernelParams.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

using moec::fake::Launch;
using moec::fake::State;

namespace {

using CUresult = int;
constexpr CUresult kSuccess = 0;
constexpr CUresult kInvalidValue = 1;
constexpr CUresult kInvalidImage = 200;
constexpr CUresult kNotFound = 500;
constexpr CUresult kIllegalAddress = 700;

struct Function {
  std::string name;
};
/// Owns its functions, as a real module does: unloading frees them.
struct Module {
  int id;
  /// A copy of the image: its string tables name the functions it holds.
  std::string image;
  std::vector<std::unique_ptr<Function>> functions;
};

/// The bytes of an ELF64 image: its section headers come last.
size_t elfSize(const unsigned char *image) {
  auto read = [&](int at, int bytes) {
    uint64_t value = 0;
    for (int i = 0; i < bytes; ++i)
      value |= uint64_t(image[at + i]) << (8 * i);
    return value;
  };
  return read(0x28, 8) + read(0x3c, 2) * read(0x3a, 2);
}

struct Graph {
  std::vector<Launch> launches;
};

State state;
/// bench/host_overhead.sh sets MOEC_FAKE_CUDA_KEEP_LAUNCHES=0: thousands of
/// steps would otherwise time the growth of state.launches, not moec.
const bool keepLaunches = [] {
  const char *value = std::getenv("MOEC_FAKE_CUDA_KEEP_LAUNCHES");
  return !value || std::strcmp(value, "0") != 0;
}();
bool capturing = false;
std::vector<Launch> captured;
int contextTag, streamTag;

void *fakeContext() { return &contextTag; }
void *fakeStream() { return &streamTag; }

} // namespace

extern "C" {

State *fakeCudaState() { return &state; }

CUresult cuGetErrorName(CUresult error, const char **text) {
  switch (error) {
  case kSuccess:
    *text = "CUDA_SUCCESS";
    return kSuccess;
  case kInvalidValue:
    *text = "CUDA_ERROR_INVALID_VALUE";
    return kSuccess;
  case kIllegalAddress:
    *text = "CUDA_ERROR_ILLEGAL_ADDRESS";
    return kSuccess;
  case kInvalidImage:
    *text = "CUDA_ERROR_INVALID_IMAGE";
    return kSuccess;
  case kNotFound:
    *text = "CUDA_ERROR_NOT_FOUND";
    return kSuccess;
  }
  return kInvalidValue;
}

CUresult cuGetErrorString(CUresult error, const char **text) {
  *text = error == kIllegalAddress ? "an illegal memory access was encountered"
                                   : "fake driver error";
  return kSuccess;
}

CUresult cuInit(unsigned) { return kSuccess; }
CUresult cuDriverGetVersion(int *version) {
  *version = fakeCudaState()->driverVersion;
  return kSuccess;
}
CUresult cuDeviceGetCount(int *count) {
  *count = 1;
  return kSuccess;
}
CUresult cuDeviceGet(int *device, int ordinal) {
  *device = ordinal;
  return ordinal == 0 ? kSuccess : kInvalidValue;
}

CUresult cuDeviceGetAttribute(int *value, int attribute, int) {
  switch (attribute) {
  case 1: // max threads per block
    *value = 1024;
    return kSuccess;
  case 5: // max grid x, y, z
    *value = 2147483647;
    return kSuccess;
  case 6:
  case 7:
    *value = 65535;
    return kSuccess;
  case 16: // multiprocessors
    *value = 108;
    return kSuccess;
  case 75: // compute capability
    *value = 8;
    return kSuccess;
  case 76:
    *value = 0;
    return kSuccess;
  case 97: // max shared memory per block, opt-in
    *value = 166912;
    return kSuccess;
  }
  return kInvalidValue;
}

CUresult cuDeviceGetName(char *name, int length, int) {
  std::strncpy(name, "Fake A100", static_cast<size_t>(length));
  return kSuccess;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, int) {
  *bytes = size_t{40} << 30;
  return kSuccess;
}

CUresult cuDevicePrimaryCtxRetain(void **context, int) {
  *context = fakeContext();
  return kSuccess;
}
CUresult cuDevicePrimaryCtxRelease_v2(int) { return kSuccess; }
CUresult cuCtxSetCurrent(void *context) {
  return context == fakeContext() ? kSuccess : kInvalidValue;
}

CUresult cuModuleLoadData(void **module, const void *image) {
  if (state.failModuleLoad)
    return kInvalidImage;
  if (std::memcmp(image,
                  "\x7f"
                  "ELF",
                  4) != 0)
    return kInvalidImage;
  const auto *bytes = static_cast<const unsigned char *>(image);
  *module = new Module{
      static_cast<int>(++state.modulesLoaded),
      std::string(reinterpret_cast<const char *>(bytes), elfSize(bytes)),
      {}};
  return kSuccess;
}

CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
  // Every test kernel's name starts with "moek_", and a module holds only
  // the kernels its image names (several when compiled together).
  Module &m = *static_cast<Module *>(module);
  if (std::strncmp(name, "moek_", 5) != 0 ||
      m.image.find(std::string(1, '\0') + name + std::string(1, '\0')) ==
          std::string::npos)
    return kNotFound;
  auto &functions = m.functions;
  functions.push_back(std::make_unique<Function>(Function{name}));
  *function = functions.back().get();
  return kSuccess;
}

CUresult cuModuleUnload(void *module) {
  delete static_cast<Module *>(module);
  ++state.modulesUnloaded;
  return kSuccess;
}

int staticSharedOf(const std::string &name) {
  auto it = state.staticShared.find(name);
  return it == state.staticShared.end() ? 0 : it->second;
}

/// The function's dynamic shared memory limit: as set, else the driver's
/// default, 48 KiB less its static shared memory.
int dynamicSharedLimitOf(const std::string &name) {
  auto it = state.dynamicSharedLimit.find(name);
  return it != state.dynamicSharedLimit.end()
             ? it->second
             : 48 * 1024 - staticSharedOf(name);
}

CUresult cuFuncGetAttribute(int *value, int attribute, void *function) {
  const std::string &name = static_cast<Function *>(function)->name;
  if (attribute == 0) {
    auto it = state.maxThreads.find(name);
    *value = it == state.maxThreads.end() ? 1024 : it->second;
  } else if (attribute == 1)
    *value = staticSharedOf(name);
  else if (attribute == 8)
    *value = dynamicSharedLimitOf(name);
  else
    return kInvalidValue;
  return kSuccess;
}

CUresult cuFuncSetAttribute(void *function, int attribute, int value) {
  if (attribute != 8 || value > 166912)
    return kInvalidValue;
  state.dynamicSharedLimit[static_cast<Function *>(function)->name] = value;
  return kSuccess;
}

/// What a launch of `name` with parameters `bytes` does to memory: only the
/// status report State::reportFrom asks for.
void execute(const std::string &name, const uint8_t *bytes) {
  if (name != state.reportFrom)
    return;
  moec::detail::KernelParams p;
  std::memcpy(&p, bytes, sizeof p);
  auto *words = static_cast<uint32_t *>(p.status);
  if (!words)
    return;
  if (words[0] == 0)
    words[0] = static_cast<uint32_t>(p.launchTag);
  if (words[0] != static_cast<uint32_t>(p.launchTag))
    return;
  words[1] = 1; // kStatusRouterLogits
  words[2] = std::min(words[2], state.reportItem);
}

CUresult cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz,
                        unsigned bx, unsigned by, unsigned bz, unsigned shared,
                        void *, void **params, void **) {
  const std::string &name = static_cast<Function *>(function)->name;
  if (name == state.failLaunchOf)
    return kInvalidValue;
  if (static_cast<int>(shared) > dynamicSharedLimitOf(name))
    return kInvalidValue;
  const uint8_t *bytes = static_cast<const uint8_t *>(params[0]);
  if (!capturing)
    execute(name, bytes);
  if (!capturing && !keepLaunches)
    return kSuccess;
  Launch launch{name, {gx, gy, gz}, {bx, by, bz}, shared, {}, false};
  launch.params.assign(bytes, bytes + sizeof(moec::detail::KernelParams));
  (capturing ? captured : state.launches).push_back(std::move(launch));
  return kSuccess;
}

CUresult cuMemAlloc_v2(unsigned long long *pointer, size_t bytes) {
  if (bytes == 0)
    return kInvalidValue;
  void *memory = std::malloc(bytes);
  // Real allocations are not zeroed either.
  std::memset(memory, 0xab, bytes);
  *pointer = reinterpret_cast<unsigned long long>(memory);
  ++state.liveAllocations;
  return kSuccess;
}

CUresult cuMemFree_v2(unsigned long long pointer) {
  std::free(reinterpret_cast<void *>(pointer));
  --state.liveAllocations;
  return kSuccess;
}

CUresult cuMemcpyHtoD_v2(unsigned long long dst, const void *src,
                         size_t bytes) {
  std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
  return kSuccess;
}
CUresult cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t bytes) {
  std::memcpy(dst, reinterpret_cast<void *>(src), bytes);
  return kSuccess;
}
CUresult cuMemcpyHtoDAsync_v2(unsigned long long dst, const void *src,
                              size_t bytes, void *) {
  return cuMemcpyHtoD_v2(dst, src, bytes);
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, unsigned long long src, size_t bytes,
                              void *) {
  return cuMemcpyDtoH_v2(dst, src, bytes);
}
CUresult cuMemcpyDtoDAsync_v2(unsigned long long dst, unsigned long long src,
                              size_t bytes, void *) {
  std::memcpy(reinterpret_cast<void *>(dst), reinterpret_cast<void *>(src),
              bytes);
  return kSuccess;
}
CUresult cuMemsetD8Async(unsigned long long dst, unsigned char value,
                         size_t bytes, void *) {
  std::memset(reinterpret_cast<void *>(dst), value, bytes);
  return kSuccess;
}

CUresult cuStreamCreate(void **stream, unsigned) {
  *stream = fakeStream();
  return kSuccess;
}
CUresult cuStreamSynchronize(void *) {
  if (capturing)
    return kInvalidValue;
  if (state.failNextSynchronize) {
    state.failNextSynchronize = false;
    return kIllegalAddress;
  }
  return kSuccess;
}
CUresult cuStreamDestroy_v2(void *) { return kSuccess; }

CUresult cuStreamBeginCapture_v2(void *, int mode) {
  if (capturing || mode != 1)
    return kInvalidValue;
  capturing = true;
  captured.clear();
  return kSuccess;
}
CUresult cuStreamEndCapture(void *, void **graph) {
  if (!capturing)
    return kInvalidValue;
  capturing = false;
  *graph = new Graph{std::move(captured)};
  ++state.captures;
  return kSuccess;
}
CUresult cuGraphInstantiateWithFlags(void **exec, void *graph,
                                     unsigned long long) {
  if (state.failInstantiate)
    return kInvalidValue;
  *exec = new Graph(*static_cast<Graph *>(graph));
  return kSuccess;
}
CUresult cuGraphLaunch(void *exec, void *) {
  ++state.graphLaunches;
  for (const Launch &launch : static_cast<Graph *>(exec)->launches)
    execute(launch.kernel, launch.params.data());
  if (!keepLaunches)
    return kSuccess;
  for (Launch launch : static_cast<Graph *>(exec)->launches) {
    launch.fromGraph = true;
    state.launches.push_back(std::move(launch));
  }
  return kSuccess;
}
CUresult cuGraphExecDestroy(void *exec) {
  delete static_cast<Graph *>(exec);
  return kSuccess;
}
CUresult cuGraphDestroy(void *graph) {
  delete static_cast<Graph *>(graph);
  return kSuccess;
}

/// The CUDA 12 lookup: base names, answered with the versioned functions.
CUresult cuGetProcAddress_v2(const char *symbol, void **function, int version,
                             unsigned long long flags, int *status) {
  ++state.procAddressLookups;
  struct Entry {
    const char *name;
    void *function;
  };
  static const Entry table[] = {
      {"cuGetErrorName", (void *)&cuGetErrorName},
      {"cuGetErrorString", (void *)&cuGetErrorString},
      {"cuInit", (void *)&cuInit},
      {"cuDriverGetVersion", (void *)&cuDriverGetVersion},
      {"cuDeviceGetCount", (void *)&cuDeviceGetCount},
      {"cuDeviceGet", (void *)&cuDeviceGet},
      {"cuDeviceGetAttribute", (void *)&cuDeviceGetAttribute},
      {"cuDeviceGetName", (void *)&cuDeviceGetName},
      {"cuDeviceTotalMem", (void *)&cuDeviceTotalMem_v2},
      {"cuDevicePrimaryCtxRetain", (void *)&cuDevicePrimaryCtxRetain},
      {"cuDevicePrimaryCtxRelease", (void *)&cuDevicePrimaryCtxRelease_v2},
      {"cuCtxSetCurrent", (void *)&cuCtxSetCurrent},
      {"cuModuleLoadData", (void *)&cuModuleLoadData},
      {"cuModuleGetFunction", (void *)&cuModuleGetFunction},
      {"cuModuleUnload", (void *)&cuModuleUnload},
      {"cuFuncGetAttribute", (void *)&cuFuncGetAttribute},
      {"cuFuncSetAttribute", (void *)&cuFuncSetAttribute},
      {"cuLaunchKernel", (void *)&cuLaunchKernel},
      {"cuMemAlloc", (void *)&cuMemAlloc_v2},
      {"cuMemFree", (void *)&cuMemFree_v2},
      {"cuMemcpyHtoD", (void *)&cuMemcpyHtoD_v2},
      {"cuMemcpyDtoH", (void *)&cuMemcpyDtoH_v2},
      {"cuMemcpyHtoDAsync", (void *)&cuMemcpyHtoDAsync_v2},
      {"cuMemcpyDtoHAsync", (void *)&cuMemcpyDtoHAsync_v2},
      {"cuMemcpyDtoDAsync", (void *)&cuMemcpyDtoDAsync_v2},
      {"cuMemsetD8Async", (void *)&cuMemsetD8Async},
      {"cuStreamCreate", (void *)&cuStreamCreate},
      {"cuStreamSynchronize", (void *)&cuStreamSynchronize},
      {"cuStreamDestroy", (void *)&cuStreamDestroy_v2},
      {"cuStreamBeginCapture", (void *)&cuStreamBeginCapture_v2},
      {"cuStreamEndCapture", (void *)&cuStreamEndCapture},
      {"cuGraphInstantiateWithFlags", (void *)&cuGraphInstantiateWithFlags},
      {"cuGraphLaunch", (void *)&cuGraphLaunch},
      {"cuGraphExecDestroy", (void *)&cuGraphExecDestroy},
      {"cuGraphDestroy", (void *)&cuGraphDestroy},
  };
  if (version != 12000 || flags != 0)
    return kInvalidValue;
  for (const Entry &entry : table)
    if (std::strcmp(entry.name, symbol) == 0) {
      *function = entry.function;
      *status = 0;
      return kSuccess;
    }
  *status = 1;
  return kNotFound;
}

} // extern "C"
