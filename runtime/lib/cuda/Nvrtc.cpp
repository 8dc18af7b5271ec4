//===- Nvrtc.cpp - CUDA C++ to CUBIN at run time --------------------------===//
//
// The option set follows nvFuser's NVRTC path: C++17, CUBIN straight for
// the exact architecture, line info for profilers, and ptxas -v so that the
// log reports registers and spills. No CUDA header is included: the few
// NVRTC types are declared here and every function comes from dlsym.
//
//===----------------------------------------------------------------------===//

#include "Nvrtc.h"
#include "KernelCacheFiles.h"
#include "PtxEntry.h"
#include "ToolkitLibraries.h"
#include "moec/Error.h"
#include "moec/Files.h"
#include "moec/support/GpuArch.h"
#include "moec/support/Stopwatch.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <dlfcn.h>
#include <fmt/format.h>
#include <mutex>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace moec::detail::cuda {

namespace {

// nvrtc.h: nvrtcResult is an int-sized enum, nvrtcProgram an opaque pointer.
using NvrtcResult = int;
struct NvrtcProgramImpl;
using NvrtcProgram = NvrtcProgramImpl *;
constexpr NvrtcResult kNvrtcSuccess = 0;

} // namespace

struct NvrtcApi {
  void *library = nullptr;
  const char *(*getErrorString)(NvrtcResult) = nullptr;
  NvrtcResult (*version)(int *, int *) = nullptr;
  NvrtcResult (*getNumSupportedArchs)(int *) = nullptr;
  NvrtcResult (*getSupportedArchs)(int *) = nullptr;
  NvrtcResult (*createProgram)(NvrtcProgram *, const char *, const char *, int,
                               const char *const *,
                               const char *const *) = nullptr;
  NvrtcResult (*destroyProgram)(NvrtcProgram *) = nullptr;
  NvrtcResult (*compileProgram)(NvrtcProgram, int,
                                const char *const *) = nullptr;
  NvrtcResult (*getPTXSize)(NvrtcProgram, size_t *) = nullptr;
  NvrtcResult (*getPTX)(NvrtcProgram, char *) = nullptr;
  NvrtcResult (*getCUBINSize)(NvrtcProgram, size_t *) = nullptr;
  NvrtcResult (*getCUBIN)(NvrtcProgram, char *) = nullptr;
  NvrtcResult (*getProgramLogSize)(NvrtcProgram, size_t *) = nullptr;
  NvrtcResult (*getProgramLog)(NvrtcProgram, char *) = nullptr;

  std::string errorText(NvrtcResult result) const {
    const char *text = getErrorString ? getErrorString(result) : nullptr;
    return text ? text : fmt::format("NVRTC error {}", result);
  }
  void check(NvrtcResult result, const char *call) const {
    if (result != kNvrtcSuccess)
      throw Error(fmt::format("{} failed: {}", call, errorText(result)));
  }
};

namespace {

/// Resolves `symbol` into `fn`; throws when the library lacks it.
template <typename Fn>
void resolve(void *library, const char *symbol, Fn &fn, const std::string &path,
             bool required = true) {
  fn = reinterpret_cast<Fn>(::dlsym(library, symbol));
  if (!fn && required)
    throw Error(fmt::format("'{}' is not a usable NVRTC library: it has no "
                            "{}; point $MOEC_NVRTC_LIBRARY at libnvrtc.so of "
                            "CUDA 12 or 13",
                            path, symbol));
}

/// Destroys its program on every path out of a scope.
class Program {
public:
  explicit Program(const NvrtcApi &api) : api(api) {}
  ~Program() {
    if (handle)
      api.destroyProgram(&handle);
  }
  Program(const Program &) = delete;
  Program &operator=(const Program &) = delete;

  NvrtcProgram handle = nullptr;

private:
  const NvrtcApi &api;
};

/// NVRTC's log for `program`, without the terminating NUL and trailing
/// blank lines.
std::string programLog(const NvrtcApi &api, NvrtcProgram program) {
  size_t size = 0;
  api.check(api.getProgramLogSize(program, &size), "nvrtcGetProgramLogSize");
  std::string log(size, '\0');
  if (size > 0)
    api.check(api.getProgramLog(program, log.data()), "nvrtcGetProgramLog");
  while (!log.empty() && (log.back() == '\0' ||
                          std::isspace(static_cast<unsigned char>(log.back()))))
    log.pop_back();
  return log;
}

/// The PTX of a compiled program; empty when NVRTC kept none.
std::string programPtx(const NvrtcApi &api, NvrtcProgram program) {
  size_t size = 0;
  if (api.getPTXSize(program, &size) != kNvrtcSuccess || size <= 1)
    return "";
  std::string ptx(size, '\0');
  api.check(api.getPTX(program, ptx.data()), "nvrtcGetPTX");
  while (!ptx.empty() && ptx.back() == '\0')
    ptx.pop_back();
  return ptx;
}

std::string programCubin(const NvrtcApi &api, NvrtcProgram program) {
  size_t size = 0;
  api.check(api.getCUBINSize(program, &size), "nvrtcGetCUBINSize");
  std::string cubin(size, '\0');
  if (size > 0)
    api.check(api.getCUBIN(program, cubin.data()), "nvrtcGetCUBIN");
  return cubin;
}

/// Saves the translation unit that failed so that users can open it; falls
/// back to the temporary directory. Returns the path, or an empty string
/// and the reason in `why`.
std::string saveFailedSource(std::string dir, const std::string &name,
                             const std::string &source, std::string &why) {
  if (dir.empty())
    dir = kernelCacheDirectory("cuda") + "/failed";
  const char *tmp = std::getenv("TMPDIR");
  std::string fallback =
      fmt::format("{}/moec-{}/failed", tmp && *tmp ? tmp : "/tmp", ::getuid());
  for (const std::string &candidate : {dir, fallback}) {
    if (candidate.empty())
      continue;
    std::string path = candidate + "/" + fileStem(name) + ".cu";
    std::string problem = makeDirectories(candidate);
    if (problem.empty()) {
      try {
        writeFile(path, {{source.data(), source.size()}});
        return path;
      } catch (const Error &e) {
        problem = e.what();
      }
    }
    why += (why.empty() ? "" : "; ") + problem;
  }
  return "";
}

std::unique_ptr<NvrtcApi> openLibrary(std::string &path) {
  std::vector<std::string> candidates;
  const char *override = std::getenv("MOEC_NVRTC_LIBRARY");
  if (override && *override)
    candidates = {override};
  else
    candidates = toolkitLibraryCandidates(
        "libnvrtc.so", installedDriverCudaMajor(), /*unversioned=*/true);
  std::vector<std::string> failures;
  auto api = std::make_unique<NvrtcApi>();
  for (const std::string &candidate : candidates) {
    api->library = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api->library) {
      path = candidate;
      break;
    }
    const char *error = ::dlerror();
    failures.push_back(error ? error : candidate + ": cannot be loaded");
  }
  if (!api->library) {
    if (override && *override)
      throw Error(fmt::format("NVRTC could not be loaded from "
                              "$MOEC_NVRTC_LIBRARY ('{}'): {}; point it at "
                              "libnvrtc.so of a CUDA 12 or 13 toolkit, or "
                              "unset it",
                              override, failures.front()));
    throw Error(fmt::format("NVRTC (libnvrtc.so) could not be loaded, so "
                            "CUDA kernels cannot be compiled ({}); install "
                            "the CUDA toolkit 12 or 13, or set "
                            "$MOEC_NVRTC_LIBRARY to its libnvrtc.so; without "
                            "it use --device cpu or --device emu",
                            fmt::join(failures, "; ")));
  }
  resolve(api->library, "nvrtcGetErrorString", api->getErrorString, path);
  resolve(api->library, "nvrtcVersion", api->version, path);
  resolve(api->library, "nvrtcGetNumSupportedArchs", api->getNumSupportedArchs,
          path, /*required=*/false);
  resolve(api->library, "nvrtcGetSupportedArchs", api->getSupportedArchs, path,
          /*required=*/false);
  resolve(api->library, "nvrtcCreateProgram", api->createProgram, path);
  resolve(api->library, "nvrtcDestroyProgram", api->destroyProgram, path);
  resolve(api->library, "nvrtcCompileProgram", api->compileProgram, path);
  resolve(api->library, "nvrtcGetPTXSize", api->getPTXSize, path);
  resolve(api->library, "nvrtcGetPTX", api->getPTX, path);
  resolve(api->library, "nvrtcGetCUBINSize", api->getCUBINSize, path);
  resolve(api->library, "nvrtcGetCUBIN", api->getCUBIN, path);
  resolve(api->library, "nvrtcGetProgramLogSize", api->getProgramLogSize, path);
  resolve(api->library, "nvrtcGetProgramLog", api->getProgramLog, path);
  // The file the loader actually picked, for messages and the identity.
  Dl_info info;
  if (::dladdr(reinterpret_cast<void *>(api->version), &info) && info.dli_fname)
    path = info.dli_fname;
  return api;
}

} // namespace

int archNumber(const std::string &arch) {
  std::optional<int> number = support::archNumber(arch);
  if (!number)
    throw Error(fmt::format("'{}' is not a CUDA architecture; write it as "
                            "sm_80, sm_90, ...",
                            arch));
  return *number;
}

Nvrtc::Nvrtc(std::unique_ptr<NvrtcApi> apiIn, std::string path)
    : api(std::move(apiIn)), libraryPath(std::move(path)) {
  api->check(api->version(&major, &minor), "nvrtcVersion");
  struct stat st;
  long long bytes = ::stat(libraryPath.c_str(), &st) == 0 ? st.st_size : -1;
  identityText = fmt::format("{}.{} ({} bytes)", major, minor, bytes);
  int count = 0;
  if (api->getNumSupportedArchs && api->getSupportedArchs &&
      api->getNumSupportedArchs(&count) == kNvrtcSuccess && count > 0) {
    archs.resize(count);
    if (api->getSupportedArchs(archs.data()) != kNvrtcSuccess)
      archs.clear();
  }
}

// The library stays loaded: kernels and NVRTC's own state may outlive us.
Nvrtc::~Nvrtc() = default;

const Nvrtc &Nvrtc::get() {
  static std::mutex mutex;
  static std::unique_ptr<Nvrtc> instance;
  std::lock_guard<std::mutex> lock(mutex);
  if (!instance)
    instance = load();
  return *instance;
}

std::unique_ptr<Nvrtc> Nvrtc::load() {
  std::string path;
  std::unique_ptr<NvrtcApi> api = openLibrary(path);
  return std::unique_ptr<Nvrtc>(new Nvrtc(std::move(api), std::move(path)));
}

std::pair<int, int> Nvrtc::version() const { return {major, minor}; }

std::vector<std::string> Nvrtc::options(const std::string &arch) const {
  std::vector<std::string> result = {
      "--std=c++17",
      "--gpu-architecture=" + arch,
      "-default-device",
      "--fmad=true",
      "-lineinfo",
      "-DNDEBUG",
      "--ptxas-options=-v",
      // "declared but never referenced": the device library is included
      // whole into every kernel.
      "--diag-suppress=177",
  };
  // NVRTC 12.9 has a cache of its own; moec's is the one that counts.
  if (major > 12 || (major == 12 && minor >= 9))
    result.push_back("--no-cache");
  for (std::string &option : optionsFromEnvironment())
    result.push_back(std::move(option));
  return result;
}

std::vector<std::string> Nvrtc::optionsFromEnvironment() {
  std::vector<std::string> options;
  const char *text = std::getenv("MOEC_NVRTC_OPTIONS");
  std::istringstream words(text ? text : "");
  for (std::string word; words >> word;)
    options.push_back(word);
  return options;
}

CompiledKernel Nvrtc::compile(const std::string &source,
                              const std::string &name, const std::string &arch,
                              bool wantPtx,
                              const std::string &failedDir) const {
  return std::move(
      compileTogether(source, {name}, arch, wantPtx, failedDir)[0]);
}

std::vector<CompiledKernel> Nvrtc::compileTogether(
    const std::string &source, const std::vector<std::string> &names,
    const std::string &arch, bool wantPtx, const std::string &failedDir) const {
  if (names.empty())
    throw Error("internal error: an NVRTC program with no kernels");
  int number = archNumber(arch);
  if (!archs.empty() &&
      std::find(archs.begin(), archs.end(), number) == archs.end())
    throw Error(fmt::format("NVRTC {}.{} ({}) cannot compile for {}; it "
                            "supports sm_{}; install a CUDA toolkit that does "
                            "and point $MOEC_NVRTC_LIBRARY at its libnvrtc.so",
                            major, minor, libraryPath, arch,
                            fmt::join(archs, ", sm_")));
  auto start = std::chrono::steady_clock::now();
  const std::string &first = names.front();
  std::string programName = first + ".cu";
  std::string what = names.size() == 1
                         ? fmt::format("kernel '{}'", first)
                         : fmt::format("the {} kernels '{}'", names.size(),
                                       fmt::join(names, "', '"));

  auto run = [&](const std::vector<std::string> &opts, Program &program,
                 std::string &log) {
    api->check(api->createProgram(&program.handle, source.c_str(),
                                  programName.c_str(), 0, nullptr, nullptr),
               "nvrtcCreateProgram");
    std::vector<const char *> argv;
    for (const std::string &o : opts)
      argv.push_back(o.c_str());
    NvrtcResult result = api->compileProgram(
        program.handle, static_cast<int>(argv.size()), argv.data());
    log = programLog(*api, program.handle);
    if (result == kNvrtcSuccess)
      return;
    std::string why;
    std::string saved = saveFailedSource(failedDir, first, source, why);
    std::vector<std::string> extra = optionsFromEnvironment();
    throw Error(fmt::format(
        "NVRTC {}.{} could not compile {} for {} ({}):\n{}\n{}{}", major, minor,
        what, arch, api->errorText(result), log,
        saved.empty()
            ? fmt::format("(the translation unit could not be saved: {})", why)
            : fmt::format("The whole translation unit is saved in {}", saved),
        extra.empty() ? ""
                      : fmt::format("\n(with MOEC_NVRTC_OPTIONS: {})",
                                    fmt::join(extra, " "))));
  };

  std::string cubin, ptx, log;
  {
    Program program(*api);
    run(options(arch), program, log);
    cubin = programCubin(*api, program.handle);
    if (wantPtx)
      ptx = programPtx(*api, program.handle);
  }
  if (cubin.empty())
    throw Error(fmt::format("NVRTC {}.{} compiled {} for {} but produced no "
                            "CUBIN",
                            major, minor, what, arch));
  // Older NVRTCs keep no PTX when compiling for a real architecture.
  if (wantPtx && ptx.empty()) {
    std::vector<std::string> opts = options(arch);
    for (std::string &o : opts)
      if (o.rfind("--gpu-architecture=", 0) == 0)
        o = "--gpu-architecture=compute_" + arch.substr(3);
    Program program(*api);
    std::string ptxLog;
    run(opts, program, ptxLog);
    ptx = programPtx(*api, program.handle);
  }
  // Each kernel keeps its own part of the module; a program of one kernel
  // (or of a whole bundle under one name, as cudaPtx compiles it) is that
  // part already.
  std::vector<std::string> ptxOf;
  if (wantPtx && names.size() > 1)
    ptxOf = entryPtx(ptx, names);
  double seconds = support::secondsSince(start);
  auto shared = std::make_shared<const std::string>(std::move(cubin));
  std::vector<CompiledKernel> kernels(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    CompiledKernel &kernel = kernels[i];
    kernel.name = names[i];
    kernel.arch = arch;
    kernel.cubin = shared;
    kernel.ptx = ptxOf.empty() ? ptx : std::move(ptxOf[i]);
    kernel.log = log;
    kernel.usage = parsePtxasLog(log, names[i]);
    kernel.seconds = seconds / static_cast<double>(names.size());
  }
  return kernels;
}

} // namespace moec::detail::cuda
