//===- JsonParse.cpp - parsing untrusted JSON with a depth limit ----------===//

#include "JsonParse.h"

#include <utility>
#include <vector>

namespace moec::detail {

namespace {

using json = nlohmann::json;

/// A SAX handler that builds the document: `open` holds the arrays and
/// objects not yet closed, innermost last. Pointers into them stay valid:
/// a container gets no new element while one of its children is open.
class DepthLimitedBuilder {
public:
  DepthLimitedBuilder(json &root, int maxDepth)
      : root(root), maxDepth(maxDepth) {}

  bool null() { return put(nullptr); }
  bool boolean(bool value) { return put(value); }
  bool number_integer(json::number_integer_t value) { return put(value); }
  bool number_unsigned(json::number_unsigned_t value) { return put(value); }
  bool number_float(json::number_float_t value, const json::string_t &) {
    return put(value);
  }
  bool string(json::string_t &value) { return put(std::move(value)); }
  bool binary(json::binary_t &value) {
    return put(json::binary(std::move(value)));
  }
  bool start_object(std::size_t) { return enter(json::object()); }
  bool start_array(std::size_t) { return enter(json::array()); }
  bool key(json::string_t &name) {
    member = &(*open.back())[std::move(name)];
    return true;
  }
  bool end_object() { return leave(); }
  bool end_array() { return leave(); }
  template <typename Exception>
  bool parse_error(std::size_t, const std::string &, const Exception &error) {
    throw error;
  }

private:
  template <typename Value> bool put(Value &&value) {
    place(std::forward<Value>(value));
    return true;
  }
  /// Stores `value` where the parser is and returns where it went.
  template <typename Value> json *place(Value &&value) {
    if (open.empty()) {
      root = json(std::forward<Value>(value));
      return &root;
    }
    if (open.back()->is_array()) {
      open.back()->emplace_back(std::forward<Value>(value));
      return &open.back()->back();
    }
    *member = json(std::forward<Value>(value));
    return member;
  }
  bool enter(json container) {
    if (static_cast<int>(open.size()) >= maxDepth)
      return false;
    open.push_back(place(std::move(container)));
    return true;
  }
  bool leave() {
    open.pop_back();
    return true;
  }

  json &root;
  int maxDepth;
  std::vector<json *> open;
  json *member = nullptr;
};

} // namespace

std::optional<json> parseJsonNoDeeperThan(const std::string &text,
                                          int maxDepth) {
  json document;
  DepthLimitedBuilder builder(document, maxDepth);
  if (!json::sax_parse(text, &builder))
    return std::nullopt; // only a refused depth stops the parse early
  return std::optional<json>(std::move(document));
}

} // namespace moec::detail
