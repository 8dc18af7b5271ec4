//===- Files.cpp - reading inputs and writing outputs safely --------------===//

#include "moec/Files.h"
#include "moec/Error.h"

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

namespace moec {

namespace {

std::string errnoText() { return std::strerror(errno); }

/// Closes its descriptor on every path out of a scope.
class Fd {
public:
  explicit Fd(int fd) : fd(fd) {}
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  int get() const { return fd; }

private:
  int fd;
};

void writeAll(int fd, const void *data, size_t size, const std::string &what) {
  const char *p = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      throw Error(fmt::format("{}: write failed: {}", what, errnoText()));
    p += n;
    size -= static_cast<size_t>(n);
  }
}

/// One read(): the bytes read, 0 at the end of the file; retries
/// interrupted reads and throws on errors.
size_t readSome(int fd, void *data, size_t size, const std::string &what) {
  for (;;) {
    ssize_t n = ::read(fd, data, size);
    if (n >= 0)
      return static_cast<size_t>(n);
    if (errno != EINTR)
      throw Error(fmt::format("{}: read failed: {}", what, errnoText()));
  }
}

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string baseNameOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// The prefix of every temporary of `target`: ".NAME.tmp.".
std::string temporaryPrefix(const std::string &target) {
  return "." + baseNameOf(target) + ".tmp.";
}

/// A sibling of `target` no other writer uses ("DIR/.NAME.tmp.PID.N"), so
/// concurrent writers never clobber each other's temporaries.
std::string temporaryPath(const std::string &target) {
  static std::atomic<uint64_t> counter{0};
  std::string dir = directoryOf(target);
  return fmt::format("{}/{}{}.{}", dir, temporaryPrefix(target), ::getpid(),
                     counter++);
}

/// Removes the temporaries of `target` whose writer is gone (a save killed
/// part-way), so they do not pile up beside the output.
void removeStaleTemporaries(const std::string &target) {
  std::string dir = directoryOf(target);
  std::string prefix = temporaryPrefix(target);
  DIR *stream = ::opendir(dir.c_str());
  if (!stream)
    return;
  while (const dirent *entry = ::readdir(stream)) {
    std::string name = entry->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0)
      continue;
    // The writer's process id, then ".N".
    const char *digits = name.c_str() + prefix.size();
    char *end = nullptr;
    long pid = std::strtol(digits, &end, 10);
    if (end == digits || *end != '.' || pid <= 0 || pid > INT_MAX ||
        pid == ::getpid())
      continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      ::unlink((dir + "/" + name).c_str());
  }
  ::closedir(stream);
}

/// `path` with its chain of symbolic links followed, so that a link's target
/// is replaced rather than the link; a dangling link yields the path it
/// points to.
std::string followLinks(const std::string &path) {
  std::string current = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st;
    if (::lstat(current.c_str(), &st) != 0 || !S_ISLNK(st.st_mode))
      return current;
    std::string link(PATH_MAX, '\0');
    ssize_t n = ::readlink(current.c_str(), link.data(), link.size());
    if (n < 0)
      throw Error(fmt::format("{}: cannot read the symbolic link: {}", path,
                              errnoText()));
    link.resize(static_cast<size_t>(n));
    current = link.front() == '/' ? link : directoryOf(current) + "/" + link;
  }
  throw Error(fmt::format("{}: too many levels of symbolic links", path));
}

/// What a file is, for messages.
const char *kindOf(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

} // namespace

OutputFile::OutputFile(const std::string &path, bool append)
    : requested(path) {
  if (path.empty())
    throw Error("an output file needs a non-empty path");
  struct stat st;
  bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
    // Written through. Non-blocking, so a FIFO nobody reads is refused
    // rather than waited on; then blocking again for the writes.
    fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
      throw Error(fmt::format("{}: cannot open for writing: {}", path,
                              errno == ENXIO ? "no process is reading the FIFO"
                                             : errnoText()));
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    target = path;
    return;
  }
  if (exists && !S_ISREG(st.st_mode))
    throw Error(fmt::format("{}: refusing to replace it: it is {}", path,
                            kindOf(st.st_mode)));
  target = followLinks(path);
  removeStaleTemporaries(target);
  temporary = temporaryPath(target);
  fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
              0666);
  if (fd < 0)
    throw Error(fmt::format("{}: cannot create the temporary file '{}': {}",
                            path, temporary, errnoText()));
  try {
    // A replaced file keeps its permissions.
    if (exists && ::fchmod(fd, st.st_mode & 07777) != 0)
      throw Error(fmt::format("{}: cannot set the permissions of '{}': {}",
                              path, temporary, errnoText()));
    if (append && exists) {
      Fd old(::open(target.c_str(), O_RDONLY | O_CLOEXEC));
      if (old.get() < 0)
        throw Error(fmt::format("{}: cannot read it to append: {}", path,
                                errnoText()));
      char buffer[1 << 16];
      while (size_t n = readSome(old.get(), buffer, sizeof buffer, path))
        writeAll(fd, buffer, n, path);
    }
  } catch (...) {
    ::close(fd);
    ::unlink(temporary.c_str());
    throw;
  }
}

OutputFile::~OutputFile() {
  if (committed)
    return;
  if (fd >= 0)
    ::close(fd);
  if (!temporary.empty())
    ::unlink(temporary.c_str());
}

void OutputFile::write(const void *data, size_t size) {
  if (committed)
    throw Error(fmt::format("{}: written after it was committed", requested));
  writeAll(fd, data, size, requested);
}

void OutputFile::commit() {
  if (committed)
    return;
  if (temporary.empty()) {
    int result = ::close(fd);
    fd = -1;
    committed = true;
    if (result != 0)
      throw Error(fmt::format("{}: close failed: {}", requested, errnoText()));
    return;
  }
  if (::fsync(fd) != 0)
    throw Error(fmt::format("{}: fsync of '{}' failed: {}", requested,
                            temporary, errnoText()));
  int closed = ::close(fd);
  fd = -1;
  if (closed != 0)
    throw Error(fmt::format("{}: close of '{}' failed: {}", requested,
                            temporary, errnoText()));
  if (::rename(temporary.c_str(), target.c_str()) != 0)
    throw Error(fmt::format("{}: cannot rename the temporary file '{}' over "
                            "it: {}",
                            requested, temporary, errnoText()));
  committed = true;
  // Without this the rename itself may not survive a crash.
  std::string dir = directoryOf(target);
  Fd dirFd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dirFd.get() < 0 || ::fsync(dirFd.get()) != 0)
    throw Error(fmt::format("{}: the file was written, but flushing its "
                            "directory '{}' failed, so it may not survive a "
                            "crash: {}",
                            requested, dir, errnoText()));
}

void writeFile(const std::string &path, std::string_view text) {
  OutputFile out(path);
  out.write(text);
  out.commit();
}

void writeFile(const std::string &path, const std::vector<ByteChunk> &chunks) {
  OutputFile out(path);
  for (const ByteChunk &chunk : chunks)
    out.write(chunk.data, chunk.size);
  out.commit();
}

std::string readRegularFile(const std::string &path, size_t maxBytes) {
  // Non-blocking, so that a FIFO is refused as not a regular file
  // instead of waiting for a writer.
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0)
    throw Error(fmt::format("{}: cannot open: {}", path, errnoText()));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    throw Error(fmt::format("{}: cannot stat: {}", path, errnoText()));
  if (S_ISFIFO(st.st_mode))
    throw Error(fmt::format("{}: not a regular file (a pipe: process "
                            "substitution cannot be read; save it to a file "
                            "first)",
                            path));
  if (!S_ISREG(st.st_mode))
    throw Error(fmt::format("{}: {}", path, kindOf(st.st_mode)));
  if (static_cast<uint64_t>(st.st_size) > maxBytes)
    throw Error(fmt::format("{}: the file is {} bytes, more than the {} this "
                            "reader accepts",
                            path, st.st_size, maxBytes));
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    size_t n = readSome(fd.get(), text.data() + done, text.size() - done, path);
    if (n == 0)
      break;
    done += n;
  }
  text.resize(done);
  return text;
}

namespace {

/// Which file a path names: its device and inode when it exists, otherwise
/// its canonical directory and name.
struct FileIdentity {
  bool exists = false;
  bool characterDevice = false;
  dev_t device = 0;
  ino_t inode = 0;
  std::string canonical;

  bool sameAs(const FileIdentity &other) const {
    if (exists != other.exists)
      return false;
    return exists ? device == other.device && inode == other.inode
                  : canonical == other.canonical;
  }
};

FileIdentity identify(const std::string &path) {
  FileIdentity id;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    id.exists = true;
    id.characterDevice = S_ISCHR(st.st_mode);
    id.device = st.st_dev;
    id.inode = st.st_ino;
    return id;
  }
  std::string target = followLinks(path);
  char *dir = ::realpath(directoryOf(target).c_str(), nullptr);
  id.canonical = (dir ? std::string(dir) : directoryOf(target)) + "/" +
                 baseNameOf(target);
  std::free(dir);
  return id;
}

bool ignored(const NamedPath &p) { return p.path.empty() || p.path == "-"; }

} // namespace

void checkOutputsAreDistinct(const std::vector<NamedPath> &inputs,
                             const std::vector<NamedPath> &outputs) {
  std::vector<FileIdentity> seen;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath &out = outputs[i];
    FileIdentity id = ignored(out) ? FileIdentity() : identify(out.path);
    seen.push_back(id);
    if (ignored(out) || id.characterDevice)
      continue;
    for (const NamedPath &in : inputs)
      if (!ignored(in) && id.sameAs(identify(in.path)))
        throw Error(fmt::format("{} '{}' is the same file as {} '{}'; "
                                "refusing to overwrite an input",
                                out.role, out.path, in.role, in.path));
    for (size_t j = 0; j < i; ++j)
      if (!ignored(outputs[j]) && id.sameAs(seen[j]))
        throw Error(fmt::format("{} '{}' and {} '{}' are the same file",
                                outputs[j].role, outputs[j].path, out.role,
                                out.path));
  }
}

} // namespace moec
