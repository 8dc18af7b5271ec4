//===- StandardOutput.cpp - checked writes to standard output -------------===//

#include "StandardOutput.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>
#include <streambuf>
#include <unistd.h>

namespace moec::driver {
namespace {

/// A buffered stream over file descriptor 1 that keeps the errno of its
/// first failed write and discards everything after it.
class CheckedBuffer : public std::streambuf {
public:
  CheckedBuffer() { setp(buffer, buffer + sizeof buffer); }
  int error() const { return firstError; }

protected:
  int_type overflow(int_type c) override {
    if (!drain())
      return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain() ? 0 : -1; }

private:
  bool drain() {
    const char *p = pbase();
    size_t size = static_cast<size_t>(pptr() - pbase());
    setp(buffer, buffer + sizeof buffer);
    while (size > 0 && firstError == 0) {
      ssize_t n = ::write(STDOUT_FILENO, p, size);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        firstError = n < 0 ? errno : EIO;
        break;
      }
      p += n;
      size -= static_cast<size_t>(n);
    }
    return firstError == 0;
  }

  char buffer[1 << 14];
  int firstError = 0;
};

/// Never destroyed: std::cout is flushed at exit, after function-local
/// statics are gone.
CheckedBuffer &checkedBuffer() {
  static CheckedBuffer *buffer = new CheckedBuffer;
  return *buffer;
}

} // namespace

void installCheckedStandardOutput() {
  std::signal(SIGPIPE, SIG_IGN);
  // A file-size limit then fails the write (EFBIG) instead of killing moec
  // half-way through an output.
  std::signal(SIGXFSZ, SIG_IGN);
  std::cout.rdbuf(&checkedBuffer());
}

std::string standardOutputError() {
  std::cout.flush();
  int error = checkedBuffer().error();
  if (error == 0 || error == EPIPE)
    return "";
  return std::string("standard output: write failed: ") + std::strerror(error);
}

} // namespace moec::driver
