//===- SymbolicDimTest.cpp - one symbolic dimension for compiler and runtime //

#include "moec/support/SymbolicDim.h"

#include <gtest/gtest.h>

using moec::support::SymbolicDim;
using moec::support::SymbolValues;

namespace {

std::string canonical(const char *text) {
  std::optional<SymbolicDim> d = SymbolicDim::parse(text);
  return d ? d->str() : "<invalid>";
}

TEST(SymbolicDim, ParsesAndPrintsCanonically) {
  EXPECT_EQ(canonical("128"), "128");
  EXPECT_EQ(canonical("B"), "B");
  EXPECT_EQ(canonical("S*2*B"), "2*B*S");
  EXPECT_EQ(canonical("B*B"), "B^2");
  EXPECT_EQ(canonical("B^2*B"), "B^3");
  EXPECT_EQ(canonical("1*B"), "B");
  EXPECT_EQ(canonical("0*B"), "0");
  EXPECT_EQ(canonical("  2 * B\t* S "), "2*B*S");
  EXPECT_EQ(canonical("?"), "?");
  EXPECT_EQ(canonical("n_tokens2"), "n_tokens2");
}

TEST(SymbolicDim, RejectsMalformedText) {
  for (const char *bad : {"", " ", "*", "B*", "*B", "B**S", "-1", "2B",
                          "B^", "B^0", "B^-1", "B^65", "_B", "B+S", "B S",
                          "?*B", "1.5"})
    EXPECT_EQ(canonical(bad), "<invalid>") << "'" << bad << "'";
}

TEST(SymbolicDim, RejectsOverflowInsteadOfWrapping) {
  EXPECT_EQ(canonical("9223372036854775807"), "9223372036854775807");
  EXPECT_EQ(canonical("9223372036854775808"), "<invalid>");
  EXPECT_EQ(canonical("999999999999999*999999999999999"), "<invalid>");
  EXPECT_EQ(canonical("99999999999999999999999*B"), "<invalid>");
  EXPECT_EQ(canonical("B^40*B^40"), "<invalid>");
  // A product that overflows is unknown, never a wrapped number.
  SymbolicDim big(int64_t(1) << 40);
  EXPECT_TRUE((big * big).isUnknown());
  // Evaluation reports overflow instead of wrapping.
  SymbolicDim b2 = *SymbolicDim::parse("B^2");
  EXPECT_EQ(b2.evaluate({{"B", int64_t(1) << 31}}), int64_t(1) << 62);
  EXPECT_EQ(b2.evaluate({{"B", int64_t(1) << 32}}), std::nullopt);
}

TEST(SymbolicDim, MultipliesAndCompares) {
  SymbolicDim tokens = SymbolicDim::symbol("B") * SymbolicDim::symbol("S");
  SymbolicDim routed = tokens * SymbolicDim(2);
  EXPECT_EQ(routed.str(), "2*B*S");
  EXPECT_EQ(routed, *SymbolicDim::parse("S*B*2"));
  EXPECT_NE(routed, tokens);
  EXPECT_TRUE(SymbolicDim(7).isStatic());
  EXPECT_FALSE(routed.isStatic());
  EXPECT_EQ(SymbolicDim::symbol("B").asSymbol(), "B");
  EXPECT_EQ(routed.asSymbol(), std::nullopt);
  // Unknown is contagious and equals nothing.
  SymbolicDim unknown = SymbolicDim::unknown();
  EXPECT_TRUE((unknown * routed).isUnknown());
  EXPECT_NE(unknown, unknown);
}

TEST(SymbolicDim, EvaluatesWithBoundSymbols) {
  SymbolicDim d = *SymbolicDim::parse("2*B*S");
  SymbolValues values{{"B", 3}, {"S", 5}};
  EXPECT_EQ(d.evaluate(values), 30);
  EXPECT_EQ(d.evaluate({{"B", 3}}), std::nullopt);
  EXPECT_EQ(SymbolicDim::unknown().evaluate(values), std::nullopt);
  EXPECT_EQ(SymbolicDim(11).evaluate({}), 11);
}

} // namespace
