//===- Error.h - the runtime's error type ----------------------*- C++ -*-===//
//
// Every failure the runtime reports is a moec::Error whose message says what
// failed (naming the file and field where there is one) and, where it can,
// what to do about it.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_ERROR_H
#define MOEC_ERROR_H

#include <stdexcept>
#include <string>

namespace moec {

class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message) : std::runtime_error(message) {}
};

} // namespace moec

#endif // MOEC_ERROR_H
