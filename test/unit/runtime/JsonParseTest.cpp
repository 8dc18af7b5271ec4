//===- JsonParseTest.cpp - the depth-limited JSON parser ------------------===//
//
// parseJsonNoDeeperThan must build exactly the document nlohmann's own
// parser builds, and refuse only nesting past its limit.
//
//===----------------------------------------------------------------------===//

#include "JsonParse.h"

#include <gtest/gtest.h>

using moec::detail::parseJsonNoDeeperThan;
using nlohmann::json;

namespace {

std::string nested(int depth) {
  return std::string(depth, '[') + "7" + std::string(depth, ']');
}

} // namespace

TEST(JsonParse, BuildsTheDocumentNlohmannBuilds) {
  const std::string text = R"({
    "programs": {"f": {"steps": [{"in": [1, 2]}, {"in": [3, "x"], "e": {}}]}},
    "numbers": [-5, 18446744073709551615, 2.5e-3, -0.0, 1e300, 0],
    "text": ["", "tab\there", "\u00e9\ud83d\ude00", "quote \" slash \\"],
    "flags": [true, false, null, [], [[]], {"a": {"b": [{}]}}],
    "twice": 1, "twice": 2
  })";
  std::optional<json> parsed = parseJsonNoDeeperThan(text, 64);
  ASSERT_TRUE(parsed.has_value());
  json expected = json::parse(text);
  EXPECT_EQ(*parsed, expected);
  EXPECT_EQ((*parsed)["twice"], 2); // the last of a repeated key
  EXPECT_TRUE((*parsed)["numbers"][1].is_number_unsigned());
  EXPECT_TRUE((*parsed)["numbers"][0].is_number_integer());
  EXPECT_EQ((*parsed)["text"][2].get<std::string>(),
            "\xc3\xa9\xf0\x9f\x98\x80");
}

TEST(JsonParse, ReadsAScalarDocument) {
  EXPECT_EQ(parseJsonNoDeeperThan("  42 ", 1), json(42));
  EXPECT_EQ(parseJsonNoDeeperThan(R"("moec")", 0), json("moec"));
}

TEST(JsonParse, RefusesNestingPastItsLimitOnly) {
  std::optional<json> atLimit = parseJsonNoDeeperThan(nested(64), 64);
  ASSERT_TRUE(atLimit.has_value());
  EXPECT_EQ(*atLimit, json::parse(nested(64)));
  EXPECT_FALSE(parseJsonNoDeeperThan(nested(65), 64).has_value());
  EXPECT_FALSE(parseJsonNoDeeperThan(R"({"a": [{"b": [1]}]})", 3).has_value());
  EXPECT_TRUE(parseJsonNoDeeperThan(R"({"a": [{"b": 1}]})", 3).has_value());
  // Far past the limit: refused without recursing (the stack would not hold
  // a document this deep).
  EXPECT_FALSE(parseJsonNoDeeperThan(nested(300000), 64).has_value());
}

TEST(JsonParse, ThrowsNlohmannsErrorForBadText) {
  for (const char *bad :
       {"", "{", "[1,]", R"({"a" 1})", "[1] x", "tru", R"(["\x"])"})
    EXPECT_THROW(parseJsonNoDeeperThan(bad, 64), json::parse_error) << bad;
}
