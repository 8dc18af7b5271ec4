//===- JsonReaderTest.cpp - the paths of JsonReader's errors --------------===//
//
// A reader finds its value's path only when a read fails, by searching the
// document; these cases pin the paths it finds.
//
//===----------------------------------------------------------------------===//

#include "JsonReader.h"
#include "ErrorOf.h"

#include <gtest/gtest.h>

using namespace moec;
using moec::detail::JsonReader;
using moec::test::errorOf;

namespace {

const nlohmann::json &document() {
  static const nlohmann::json doc = nlohmann::json::parse(R"({
    "programs": {"f": {"steps": [{"in": [1, 2]}, {"in": [3, "x"]}]}},
    "a": {"b": [[0, 1], [2, {"c": true}]]},
    "version": 2
  })");
  return doc;
}

} // namespace

TEST(JsonReader, ReadsValuesThroughFieldsAndIndices) {
  std::string origin = "model.json";
  JsonReader root(document(), origin);
  JsonReader steps = root.field("programs").field("f").field("steps");
  EXPECT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps.at(1).field("in").at(0).integer(), 3);
  EXPECT_TRUE(root.field("a").field("b").at(1).at(1).field("c").boolean());
  EXPECT_EQ(root.intField("version"), 2);
}

TEST(JsonReader, AFailureNamesTheValuesPath) {
  std::string origin = "model.json";
  JsonReader root(document(), origin);
  EXPECT_EQ(errorOf([&] {
              root.field("programs")
                  .field("f")
                  .field("steps")
                  .at(1)
                  .field("in")
                  .at(1)
                  .integer();
            }),
            "model.json: programs.f.steps[1].in[1]: expected an integer, got "
            "\"x\"");
  EXPECT_EQ(errorOf([&] {
              root.field("a").field("b").at(1).at(1).field("c").string();
            }),
            "model.json: a.b[1][1].c: expected a string, got true");
  EXPECT_EQ(errorOf([&] { root.field("a").field("b").at(2); }),
            "model.json: a.b: index 2 is out of range (2 entries)");
  EXPECT_EQ(errorOf([&] { root.field("a").field("d"); }),
            "model.json: a: missing field 'd'");
  EXPECT_EQ(errorOf([&] { root.field("version").integer(3, 9); }),
            "model.json: version: 2 is outside [3, 9]");
}

TEST(JsonReader, TheRootHasNoPath) {
  std::string origin = "model.json";
  JsonReader root(document(), origin);
  EXPECT_EQ(errorOf([&] { root.array(); }),
            "model.json: expected an array, got "
            "{\"a\":{\"b\":[[0,1],[2,{\"c\":true}]]},\"pr...");
}

TEST(JsonReader, ACopiedReaderKeepsItsPath) {
  std::string origin = "model.json";
  JsonReader root(document(), origin);
  JsonReader in =
      root.field("programs").field("f").field("steps").at(0).field("in");
  JsonReader second = in.at(1);
  EXPECT_EQ(errorOf([&] { second.string(); }),
            "model.json: programs.f.steps[0].in[1]: expected a string, got 2");
}
