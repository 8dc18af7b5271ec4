//===- JsonReader.h - validated reads from untrusted JSON -------*- C++ -*-===//
//
// Bundles come from disk and may be damaged or hand-edited. Every read goes
// through a JsonReader that knows its path inside the document, so a bad
// field yields "bundle.json: programs.train_step.steps[3].in[1]: expected an
// integer, got \"x\"" instead of a crash. The path is found only when a
// read fails, by searching the document for the value: a reader is three
// pointers, and the 80,000 values of a large bundle are read without
// building 80,000 path strings.
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
  /// Reads `document`, called `origin` in messages. Both must outlive
  /// every reader taken from this one.
  JsonReader(const nlohmann::json &document, const std::string &origin)
      : value(&document), root(&document), origin(&origin) {}
  JsonReader(const nlohmann::json &&, const std::string &) = delete;
  JsonReader(const nlohmann::json &, const std::string &&) = delete;

  const nlohmann::json &json() const { return *value; }

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
  JsonReader(const nlohmann::json &value, const JsonReader &from)
      : value(&value), root(from.root), origin(from.origin) {}
  /// Where the value sits in the document: "programs.f.steps[3].in[1]".
  std::string path() const;
  std::string describe() const;

  const nlohmann::json *value;
  const nlohmann::json *root;
  const std::string *origin;
};

} // namespace moec::detail

#endif // MOEC_RUNTIME_JSONREADER_H
