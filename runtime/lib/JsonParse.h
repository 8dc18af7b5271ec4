//===- JsonParse.h - parsing untrusted JSON with a depth limit --*- C++ -*-===//
//
// nlohmann::json parses any depth but prints, compares and destroys
// recursively, so a deeply nested file would overflow the stack later. Its
// callback parser can refuse depth, at the price of a call per value (a
// third of a large bundle's parse); this builds the same document from the
// parser's events and counts depth on the way.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_JSONPARSE_H
#define MOEC_RUNTIME_JSONPARSE_H

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace moec::detail {

/// The document in `text`, or nothing when its arrays and objects nest
/// deeper than `maxDepth`. Throws nlohmann::json::parse_error for text that
/// is not JSON, as nlohmann::json::parse does.
std::optional<nlohmann::json> parseJsonNoDeeperThan(const std::string &text,
                                                    int maxDepth);

} // namespace moec::detail

#endif // MOEC_RUNTIME_JSONPARSE_H
