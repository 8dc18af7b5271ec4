//===- ScopedEnv.h - an environment variable set for a scope ---*- C++ -*-===//

#ifndef MOEC_TEST_UNIT_SCOPEDENV_H
#define MOEC_TEST_UNIT_SCOPEDENV_H

#include <cstdlib>
#include <optional>
#include <string>

namespace moec::test {

/// Sets (or, with nullopt, unsets) an environment variable for a scope, and
/// gives it back its value (or its absence) at the end, even when the scope
/// is left by an exception.
class ScopedEnv {
public:
  ScopedEnv(const char *nameIn, std::optional<std::string> value)
      : name(nameIn) {
    if (const char *old = std::getenv(nameIn))
      saved = old;
    if (value)
      ::setenv(nameIn, value->c_str(), 1);
    else
      ::unsetenv(nameIn);
  }
  ~ScopedEnv() {
    if (saved)
      ::setenv(name.c_str(), saved->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
  ScopedEnv(const ScopedEnv &) = delete;
  ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
  std::string name;
  std::optional<std::string> saved;
};

} // namespace moec::test

#endif // MOEC_TEST_UNIT_SCOPEDENV_H
