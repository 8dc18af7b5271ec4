//===- MemoryFile.h - fuzz input as a file path -----------------*- C++ -*-===//
//
// Some readers take only a path. A memfd reached through /proc/self/fd is a
// regular file that never touches the disk, so each run costs a write, not
// a file creation.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TEST_FUZZ_MEMORYFILE_H
#define MOEC_TEST_FUZZ_MEMORYFILE_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace moec::fuzz {

class MemoryFile {
public:
  explicit MemoryFile(const char *name) : fd(::memfd_create(name, 0)) {
    if (fd < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    filePath = "/proc/self/fd/" + std::to_string(fd);
  }

  /// Replaces the contents with `data`.
  void assign(const uint8_t *data, size_t size) {
    if (::ftruncate(fd, 0) != 0 ||
        (size > 0 && ::pwrite(fd, data, size, 0) != ssize_t(size))) {
      std::perror("memfd write");
      std::abort();
    }
  }

  const std::string &path() const { return filePath; }

private:
  int fd;
  std::string filePath;
};

} // namespace moec::fuzz

#endif // MOEC_TEST_FUZZ_MEMORYFILE_H
