//===- AtomicFile.cpp - whole-file reads and atomic writes ----------------===//

#include "AtomicFile.h"
#include "moec/Error.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

namespace moec::detail {

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
  bool close() {
    int result = ::close(fd);
    fd = -1;
    return result == 0;
  }

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

/// A sibling of `path` no other writer uses, so concurrent writers never
/// clobber each other's temporaries.
std::string temporaryPath(const std::string &path) {
  static std::atomic<uint64_t> counter{0};
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return fmt::format("{}.{}.tmp.{}.{}", dir, base, ::getpid(), counter++);
}

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

} // namespace

void writeFileAtomically(const std::string &path,
                         const std::vector<ByteChunk> &chunks) {
  std::string temp = temporaryPath(path);
  Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
  if (fd.get() < 0)
    throw Error(fmt::format("{}: cannot create the temporary file '{}': {}",
                            path, temp, errnoText()));
  try {
    for (const ByteChunk &chunk : chunks)
      writeAll(fd.get(), chunk.data, chunk.size, temp);
    if (::fsync(fd.get()) != 0)
      throw Error(fmt::format("{}: fsync failed: {}", temp, errnoText()));
    if (!fd.close())
      throw Error(fmt::format("{}: close failed: {}", temp, errnoText()));
    if (::rename(temp.c_str(), path.c_str()) != 0)
      throw Error(fmt::format("{}: cannot rename the temporary file '{}' over "
                              "it: {}",
                              path, temp, errnoText()));
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
  // Without this the rename itself may not survive a crash.
  std::string dir = directoryOf(path);
  Fd dirFd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dirFd.get() < 0 || ::fsync(dirFd.get()) != 0)
    throw Error(fmt::format("{}: the file was written, but flushing its "
                            "directory '{}' failed, so it may not survive a "
                            "crash: {}",
                            path, dir, errnoText()));
}

std::string readWholeFile(const std::string &path, size_t maxBytes) {
  // Non-blocking, so that a FIFO is refused as not a regular file
  // instead of waiting for a writer.
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0)
    throw Error(fmt::format("{}: cannot open: {}", path, errnoText()));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    throw Error(fmt::format("{}: cannot stat: {}", path, errnoText()));
  if (!S_ISREG(st.st_mode))
    throw Error(fmt::format("{}: not a regular file", path));
  if (static_cast<uint64_t>(st.st_size) > maxBytes)
    throw Error(fmt::format("{}: the file is {} bytes, more than the {} this "
                            "reader accepts",
                            path, st.st_size, maxBytes));
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::read(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw Error(fmt::format("{}: read failed: {}", path, errnoText()));
    if (n == 0)
      break;
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

} // namespace moec::detail
