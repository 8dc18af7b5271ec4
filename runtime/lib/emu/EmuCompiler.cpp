//===- EmuCompiler.cpp - generated CUDA built for the host ----------------===//
//
// Cache layout, in one directory: prelude-<hash>.h (the prelude the kernels
// were built with) and, per translation unit, <name>-<key>.cu (the source),
// .so (the library) and .key (what it was built from, and the library's
// SHA-256). A cached library is used only when its .key, source and prelude
// match byte for byte and the library still has the recorded hash, so a
// hash collision or a damaged file costs a rebuild but never runs the wrong
// code.
//
//===----------------------------------------------------------------------===//

#include "emu/EmuCompiler.h"

#include "KernelCacheFiles.h"
#include "Sha256.h"
#include "moec/Error.h"
#include "moec/Files.h"

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <mutex>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>
#include <unordered_map>

extern char **environ;

namespace moec::emu {

using detail::fileStem;
using detail::kernelCacheDirectory;
using detail::sha256Hex;

namespace {

#include "emu/EmuPrelude.inc"

/// The C struct moec_emu_launch of the prelude (launcher_abi.h), field for
/// field.
struct LaunchAbi {
  unsigned version;
  unsigned flags;
  unsigned grid[3];
  unsigned block[3];
  unsigned hostThreads;
  unsigned reserved;
  unsigned long long sharedBytes;
  unsigned long long stackBytes;
  unsigned long long bufferBytes[kMaxKernelBuffers];
};
static_assert(offsetof(LaunchAbi, sharedBytes) == 40 &&
                  offsetof(LaunchAbi, bufferBytes) == 56 &&
                  sizeof(LaunchAbi) == 56 + 8 * kMaxKernelBuffers,
              "layout of moec_emu_launch in runtime/device/emu/launcher_abi.h");
constexpr unsigned kAbiVersion = 1; // MOEC_EMU_ABI_VERSION

using LaunchFn = int (*)(const LaunchAbi *, const KernelParams *, char *,
                         unsigned long);

constexpr size_t kMaxSourceBytes = size_t(1) << 30;

/// A short content hash for file names and keys: 16 hex digits of SHA-256.
std::string shortHash(const std::string &text) {
  return sha256Hex(text).substr(0, 16);
}

std::string getEnv(const char *name) {
  const char *value = std::getenv(name);
  return value ? value : "";
}

struct ProcessResult {
  int exitStatus; // -1: killed by a signal
  std::string output;
};

/// The environment the host compiler runs in: ours, with a default PATH
/// when there is none (`env -i moec ...`), since the compiler driver looks
/// up its assembler and linker there.
std::vector<char *> compilerEnvironment(std::string &pathEntry) {
  std::vector<char *> env;
  bool hasPath = false;
  for (char **e = environ; *e; ++e) {
    hasPath = hasPath || std::strncmp(*e, "PATH=", 5) == 0;
    env.push_back(*e);
  }
  if (!hasPath) {
    pathEntry = "PATH=/usr/local/bin:/usr/bin:/bin";
    env.push_back(pathEntry.data());
  }
  env.push_back(nullptr);
  return env;
}

/// Runs `argv` (looked up in PATH) with stdout and stderr captured.
ProcessResult runProcess(const std::vector<std::string> &argv) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw Error(
        fmt::format("emu: cannot create a pipe: {}", std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  std::vector<char *> args;
  for (const std::string &arg : argv)
    args.push_back(const_cast<char *>(arg.c_str()));
  args.push_back(nullptr);
  std::string pathEntry;
  std::vector<char *> env = compilerEnvironment(pathEntry);
  pid_t pid;
  int spawned =
      posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (spawned != 0) {
    ::close(fds[0]);
    throw Error(fmt::format("emu: cannot run '{}': {}; set $MOEC_EMU_CXX to "
                            "a C++17 compiler",
                            argv[0], std::strerror(spawned)));
  }
  ProcessResult result{0, ""};
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    if (result.output.size() < (size_t(1) << 22))
      result.output.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exitStatus = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

/// `compiler --version`, once per compiler per process.
std::string compilerIdentity(const std::string &compiler) {
  static std::mutex mutex;
  static std::map<std::string, std::string> known;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(compiler);
  if (it != known.end())
    return it->second;
  ProcessResult result = runProcess({compiler, "--version"});
  if (result.exitStatus != 0)
    throw Error(fmt::format("emu: '{} --version' failed (exit status {}): {}",
                            compiler, result.exitStatus, result.output));
  return known[compiler] = result.output;
}

/// The first lines of a compiler log: the first errors are the useful ones.
std::string trimLog(const std::string &log) {
  constexpr size_t kMaxLines = 60, kMaxChars = 8000;
  size_t lines = 0, end = 0;
  while (end < log.size() && lines < kMaxLines && end < kMaxChars) {
    size_t next = log.find('\n', end);
    end = next == std::string::npos ? log.size() : next + 1;
    ++lines;
  }
  end = std::min(end, kMaxChars);
  std::string trimmed = log.substr(0, end);
  if (end < log.size())
    trimmed += fmt::format("[... {} more bytes of compiler output]\n",
                           log.size() - end);
  return trimmed;
}

/// The SHA-256 of a file's contents, or "" when it cannot be read.
std::string fileHash(const std::string &path) {
  try {
    return sha256Hex(readRegularFile(path, kMaxSourceBytes));
  } catch (const Error &) {
    return "";
  }
}

bool fileEquals(const std::string &path, const std::string &expected) {
  std::error_code ec;
  if (std::filesystem::file_size(path, ec) != expected.size() || ec)
    return false;
  try {
    return readRegularFile(path, kMaxSourceBytes) == expected;
  } catch (const Error &) {
    return false;
  }
}

/// Serializes builds of one cache entry within this process.
std::shared_ptr<std::mutex> entryMutex(const std::string &path) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<std::mutex>> entries;
  std::lock_guard<std::mutex> lock(mutex);
  auto &entry = entries[path];
  if (!entry)
    entry = std::make_shared<std::mutex>();
  return entry;
}

std::string compileCommandText(const std::vector<std::string> &argv) {
  std::string text;
  for (const std::string &arg : argv)
    text += (text.empty() ? "" : " ") + arg;
  return text;
}

} // namespace

const std::string &emuPrelude() {
  static const std::string text(
      reinterpret_cast<const char *>(kEmuPreludeBytes),
      sizeof kEmuPreludeBytes - 1);
  return text;
}

std::string defaultEmuCacheDir() { return kernelCacheDirectory("emu"); }

struct EmuModule::Impl {
  std::string libraryPath, sourcePath;
  bool fromCache = false;
  void *handle = nullptr;
  mutable std::mutex mutex;
  mutable std::unordered_map<std::string, LaunchFn> launchers;

  ~Impl() {
    if (handle)
      ::dlclose(handle);
  }

  /// The launcher of `kernel`, or null.
  LaunchFn find(const std::string &kernel) const {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = launchers.find(kernel);
    if (it != launchers.end())
      return it->second;
    std::string symbol = "moec_emu_launch_" + kernel;
    auto fn = reinterpret_cast<LaunchFn>(::dlsym(handle, symbol.c_str()));
    if (fn)
      launchers.emplace(kernel, fn);
    return fn;
  }
};

EmuModule::EmuModule(std::shared_ptr<const Impl> impl)
    : impl(std::move(impl)) {}

EmuModule EmuModule::load(const std::string &source, const std::string &name,
                          const EmuOptions &options) {
  std::string compiler = options.compiler;
  if (compiler.empty())
    compiler = getEnv("MOEC_EMU_CXX");
  if (compiler.empty())
    compiler = "c++";
  std::string dir =
      options.cacheDir.empty() ? defaultEmuCacheDir() : options.cacheDir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw Error(fmt::format("emu: cannot create the kernel cache directory "
                            "'{}': {}; set $MOEC_CACHE_DIR to a writable one",
                            dir, ec.message()));

  const std::string &prelude = emuPrelude();
  // Hidden visibility: kernel libraries export only their launchers, so
  // two loaded libraries never interpose each other's prelude.
  // Line tables only (-g1): backtraces name the kernel's source lines, and
  // the compile takes about a quarter less time than with -g's variables
  // (MOEC_EMU_CXXFLAGS="-O0 -g" for stepping through a kernel in gdb).
  std::vector<std::string> flags = {
      "-std=c++17", "-g1", "-fPIC", "-shared", "-fvisibility=hidden",
      "-pthread", "-DMOEC_EMU",
      // The kernel ABI's buffer count (moec/support/MoeDefs.h).
      fmt::format("-DMOEC_EMU_MAX_BUFFERS={}", kMaxKernelBuffers)};
  if (!options.optimization.empty())
    flags.insert(flags.begin() + 1, options.optimization);
  if (options.check)
    flags.push_back("-DMOEC_EMU_CHECK");
  if (options.check && !options.trackShared)
    flags.push_back("-DMOEC_EMU_UNTRACKED_SHARED");
  for (const std::string &flag : options.extraFlags)
    flags.push_back(flag);
  // Last, so that they override the rest.
  std::istringstream userFlags(getEnv("MOEC_EMU_CXXFLAGS"));
  for (std::string flag; userFlags >> flag;)
    flags.push_back(flag);

  std::string key = fmt::format(
      "moec-emu-cache 1\ncompiler: {}\nversion: {}\nflags: {}\nprelude: {} "
      "{}\nsource: {} {}\n",
      compiler, compilerIdentity(compiler), compileCommandText(flags),
      shortHash(prelude), prelude.size(), shortHash(source), source.size());
  std::string stem = fmt::format("{}/{}-{}", dir, fileStem(name),
                                 shortHash(key));
  std::string preludePath =
      fmt::format("{}/prelude-{}.h", dir, shortHash(prelude));
  auto impl = std::make_shared<Impl>();
  impl->sourcePath = stem + ".cu";
  impl->libraryPath = stem + ".so";

  std::shared_ptr<std::mutex> entry = entryMutex(stem);
  std::lock_guard<std::mutex> lock(*entry);
  // The index (.key) records the library's own hash, so that a damaged or
  // truncated library is rebuilt, never loaded.
  auto indexFor = [&](const std::string &libraryHash) {
    return key + "library: " + libraryHash + "\n";
  };
  bool cached = std::filesystem::exists(impl->libraryPath, ec) &&
                fileEquals(impl->sourcePath, source) &&
                fileEquals(preludePath, prelude) &&
                fileEquals(stem + ".key",
                           indexFor(fileHash(impl->libraryPath)));
  if (cached) {
    impl->handle = ::dlopen(impl->libraryPath.c_str(), RTLD_NOW | RTLD_LOCAL);
    impl->fromCache = impl->handle != nullptr;
    // A damaged cached library is rebuilt below.
  }
  if (!impl->handle) {
    if (!fileEquals(preludePath, prelude))
      writeFile(preludePath, prelude);
    writeFile(impl->sourcePath, source);
    static std::atomic<uint64_t> counter{0};
    std::string temporary =
        fmt::format("{}.so.tmp.{}.{}", stem, ::getpid(), counter++);
    std::vector<std::string> argv = {compiler};
    argv.insert(argv.end(), flags.begin(), flags.end());
    for (const char *arg : {"-include", preludePath.c_str(), "-x", "c++",
                            impl->sourcePath.c_str(), "-x", "none", "-o",
                            temporary.c_str(), "-lboost_context"})
      argv.push_back(arg);
    ProcessResult result = runProcess(argv);
    if (result.exitStatus != 0) {
      ::unlink(temporary.c_str());
      throw Error(fmt::format(
          "emu: compiling '{}' failed (exit status {}):\n{}the source is "
          "saved as {}\ncommand: {}",
          name, result.exitStatus, trimLog(result.output), impl->sourcePath,
          compileCommandText(argv)));
    }
    if (::rename(temporary.c_str(), impl->libraryPath.c_str()) != 0) {
      int error = errno;
      ::unlink(temporary.c_str());
      throw Error(fmt::format("emu: cannot move the compiled '{}' to '{}': {}",
                              name, impl->libraryPath, std::strerror(error)));
    }
    writeFile(stem + ".key", indexFor(fileHash(impl->libraryPath)));
    impl->handle = ::dlopen(impl->libraryPath.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!impl->handle)
      throw Error(fmt::format("emu: cannot load '{}' built from {}: {}",
                              impl->libraryPath, impl->sourcePath,
                              ::dlerror()));
  }
  return EmuModule(std::move(impl));
}

void EmuModule::launch(const std::string &kernel, const EmuLaunchConfig &config,
                       const KernelParams &params) const {
  LaunchFn fn = impl->find(kernel);
  if (!fn)
    throw Error(fmt::format("emu: {} has no kernel '{}' (no "
                            "MOEC_EMU_EXPORT_KERNEL({}) in {})",
                            impl->libraryPath, kernel, kernel,
                            impl->sourcePath));
  if (config.bufferBytes.size() > static_cast<size_t>(kMaxKernelBuffers))
    throw Error(fmt::format("emu: launch of '{}' gives {} buffer sizes; a "
                            "kernel has at most {} buffers",
                            kernel, config.bufferBytes.size(),
                            kMaxKernelBuffers));
  LaunchAbi abi{};
  abi.version = kAbiVersion;
  for (int i = 0; i < 3; ++i) {
    abi.grid[i] = config.grid[i];
    abi.block[i] = config.block[i];
  }
  abi.hostThreads = config.hostThreads;
  abi.sharedBytes = config.sharedBytes;
  abi.stackBytes = config.stackBytes;
  for (size_t i = 0; i < config.bufferBytes.size(); ++i)
    abi.bufferBytes[i] = config.bufferBytes[i];
  char error[8192] = "";
  if (fn(&abi, &params, error, sizeof error) != 0)
    throw Error(fmt::format("emu: {}", error));
}

bool EmuModule::hasKernel(const std::string &kernel) const {
  return impl->find(kernel) != nullptr;
}

bool EmuModule::fromCache() const { return impl->fromCache; }

const std::string &EmuModule::libraryPath() const { return impl->libraryPath; }

const std::string &EmuModule::sourcePath() const { return impl->sourcePath; }

} // namespace moec::emu
