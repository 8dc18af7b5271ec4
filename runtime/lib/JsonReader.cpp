//===- JsonReader.cpp - validated reads from untrusted JSON ---------------===//

#include "JsonReader.h"

#include <fmt/format.h>

namespace moec::detail {
namespace {

/// Appends the path from `node` to `target` (an address inside `node`) and
/// says whether it found it. The parser bounds the depth.
bool findPath(const nlohmann::json &node, const nlohmann::json *target,
              std::string &path) {
  if (&node == target)
    return true;
  size_t length = path.size();
  if (node.is_object()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!path.empty())
        path += '.';
      path += it.key();
      if (findPath(*it, target, path))
        return true;
      path.resize(length);
    }
  } else if (node.is_array()) {
    for (size_t i = 0; i < node.size(); ++i) {
      path += fmt::format("[{}]", i);
      if (findPath(node[i], target, path))
        return true;
      path.resize(length);
    }
  }
  return false;
}

} // namespace

std::string JsonReader::path() const {
  std::string path;
  findPath(*root, value, path);
  return path;
}

void JsonReader::fail(const std::string &message) const {
  std::string where = path();
  throw Error(fmt::format("{}: {}{}", *origin,
                          where.empty() ? "" : where + ": ", message));
}

std::string JsonReader::describe() const {
  std::string text = value->dump();
  if (text.size() > 40)
    text = text.substr(0, 37) + "...";
  return text;
}

bool JsonReader::has(const std::string &key) const {
  return value->is_object() && value->contains(key);
}

JsonReader JsonReader::field(const std::string &key) const {
  object();
  auto it = value->find(key);
  if (it == value->end())
    fail(fmt::format("missing field '{}'", key));
  return JsonReader(*it, *this);
}

JsonReader JsonReader::at(size_t index) const {
  array();
  if (index >= value->size())
    fail(fmt::format("index {} is out of range ({} entries)", index,
                     value->size()));
  return JsonReader((*value)[index], *this);
}

const JsonReader &JsonReader::object() const {
  if (!value->is_object())
    fail("expected an object, got " + describe());
  return *this;
}

const JsonReader &JsonReader::array() const {
  if (!value->is_array())
    fail("expected an array, got " + describe());
  return *this;
}

size_t JsonReader::size() const {
  if (!value->is_array() && !value->is_object())
    fail("expected an array or object, got " + describe());
  return value->size();
}

std::string JsonReader::string() const {
  if (!value->is_string())
    fail("expected a string, got " + describe());
  return value->get<std::string>();
}

int64_t JsonReader::integer() const {
  if (!value->is_number_integer())
    fail("expected an integer, got " + describe());
  if (value->is_number_unsigned() &&
      value->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    fail("integer " + describe() + " is too large");
  return value->get<int64_t>();
}

int64_t JsonReader::integer(int64_t min, int64_t max) const {
  int64_t v = integer();
  if (v < min || v > max)
    fail(fmt::format("{} is outside [{}, {}]", v, min, max));
  return v;
}

double JsonReader::number() const {
  if (!value->is_number())
    fail("expected a number, got " + describe());
  return value->get<double>();
}

bool JsonReader::boolean() const {
  if (!value->is_boolean())
    fail("expected true or false, got " + describe());
  return value->get<bool>();
}

} // namespace moec::detail
