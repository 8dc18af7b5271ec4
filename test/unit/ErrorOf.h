//===- ErrorOf.h - the message of the error a call throws -------*- C++ -*-===//

#ifndef MOEC_TEST_UNIT_ERROROF_H
#define MOEC_TEST_UNIT_ERROROF_H

#include "moec/Error.h"

#include <functional>
#include <string>

namespace moec::test {

/// The message of the moec::Error that `f` throws, or "(no error)".
inline std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  return "(no error)";
}

} // namespace moec::test

#endif // MOEC_TEST_UNIT_ERROROF_H
