//===- JsonReader.h - validated reads from untrusted JSON -------*- C++ -*-===//
//
// Bundles come from disk and may be damaged or hand-edited. Every read goes
// through a JsonReader that knows its path inside the document, so a bad
// field yields "bundle.json: programs.train_step.steps[3].in[1]: expected an
// integer, got \"x\"" instead of a crash.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_JSONREADER_H
#define MOEC_RUNTIME_JSONREADER_H

#include "moec/Error.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace moec::detail {

class JsonReader {
public:
  JsonReader(const nlohmann::json &value, std::string origin,
             std::string path = "")
      : value(value), origin(std::move(origin)), path(std::move(path)) {}

  const nlohmann::json &json() const { return value; }
  const std::string &where() const { return path; }

  [[noreturn]] void fail(const std::string &message) const;

  bool has(const std::string &key) const;
  JsonReader field(const std::string &key) const;
  JsonReader at(size_t index) const;

  /// *this, after checking that it is an object (array).
  const JsonReader &object() const;
  const JsonReader &array() const;
  size_t size() const;
  std::string string() const;
  int64_t integer() const;
  int64_t integer(int64_t min, int64_t max) const;
  double number() const;
  bool boolean() const;

  std::string stringField(const std::string &key) const {
    return field(key).string();
  }
  int64_t intField(const std::string &key) const {
    return field(key).integer();
  }

private:
  std::string describe() const;
  const nlohmann::json &value;
  std::string origin;
  std::string path;
};

} // namespace moec::detail

#endif // MOEC_RUNTIME_JSONREADER_H
