//===- KernelCacheFiles.cpp - where compiled kernels are kept -------------===//

#include "KernelCacheFiles.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

namespace moec::detail {

namespace {

std::string environment(const char *name) {
  const char *value = std::getenv(name);
  return value ? value : "";
}

} // namespace

std::string kernelCacheDirectory(std::string_view device) {
  std::string root;
  if (std::string dir = environment("MOEC_CACHE_DIR"); !dir.empty())
    root = dir;
  else if (std::string dir = environment("XDG_CACHE_HOME"); !dir.empty())
    root = dir + "/moec";
  else if (std::string home = environment("HOME"); !home.empty())
    root = home + "/.cache/moec";
  else
    root = fmt::format("/tmp/moec-cache-{}", ::getuid());
  return root + "/" + std::string(device);
}

std::string makeDirectories(const std::string &path) {
  if (path.empty())
    return "no directory given";
  // Create each prefix in turn; EEXIST is fine as long as it is a directory.
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    std::string prefix = path.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      return fmt::format("cannot create '{}': {}", prefix,
                         std::strerror(errno));
    if (slash == std::string::npos)
      break;
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return fmt::format("cannot stat '{}': {}", path, std::strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return fmt::format("'{}' is not a directory", path);
  return "";
}

std::string fileStem(const std::string &name) {
  std::string stem = name.empty() ? "kernel" : name.substr(0, 100);
  for (char &c : stem)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' &&
        c != '.')
      c = '_';
  return stem;
}

} // namespace moec::detail
