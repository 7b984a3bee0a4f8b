#include "pipeline/config/section.hh"

#include <gtest/gtest.h>

namespace rawpipe {
namespace {

ConfigSection parse(std::string_view text) {
  auto r = ConfigSection::parse_string(text, "test.toml");
  EXPECT_TRUE(r) << r.message();
  return std::move(r).value();
}

TEST(ConfigSection, SyntaxErrorNamesFileLineAndColumn) {
  auto r = ConfigSection::parse_string("a = 1\nb = = 2\n", "bad.toml");
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("bad.toml:2:"), std::string::npos) << r.message();
}

TEST(ConfigSection, UnknownKeyIsRejectedWithItsLine) {
  auto root = parse("[pool]\ncount = 10\ncuont = 11\n");
  auto pool = root.table("pool");
  ASSERT_TRUE(pool);
  EXPECT_EQ(pool->integer("count", 1, 100), 10);
  Status s = pool->finish();
  ASSERT_FALSE(s.is_ok());
  // Without declared keys, the keys the reader asked for are the candidates.
  EXPECT_EQ(s.message(), "test.toml:3:1: [pool]: unknown key 'cuont' (did you mean \"count\"?)");
}

TEST(ConfigSection, WrongTypeNamesKeyAndExpectation) {
  auto root = parse("\n\nrate = \"fast\"\n");
  root.number("rate", 0, 1e9);
  Status s = root.finish();
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message(), "test.toml:3: top level: key 'rate': expected a number from 0 to 1000000000, got a string");
}

TEST(ConfigSection, OutOfRangeAndMissingRequired) {
  auto root = parse("count = 0\n");
  root.integer("count", 1, 10);
  root.string("name");
  Status s = root.finish();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("key 'count': expected an integer from 1 to 10, got 0"), std::string::npos);
  // Every error, one per line.
  EXPECT_NE(s.message().find("\ntest.toml:1: top level: key 'name': expected a string, got nothing"), std::string::npos);
}

TEST(ConfigSection, ChoiceListsTheAlternatives) {
  auto root = parse("mode = \"fats\"\n");
  root.choice("mode", {"fast", "timed"}, "fast");
  EXPECT_EQ(root.finish().message(), "test.toml:1: top level: key 'mode': expected one of \"fast\", \"timed\", got \"fats\" (did you mean \"fast\"?)");
}

TEST(ConfigSection, TableArraysAndTuples) {
  auto root = parse("[[ports]]\nname = \"a\"\nimix = [[64, 7], [1500, 1]]\n[[ports]]\nname = \"b\"\n");
  auto ports = root.table_array("ports");
  ASSERT_EQ(ports.size(), 2u);
  EXPECT_EQ(ports[0].string("name"), "a");
  auto imix = ports[0].integer_tuples("imix", 2, 0, 10000);
  ASSERT_EQ(imix.size(), 2u);
  EXPECT_EQ(imix[1][0], 1500);
  EXPECT_EQ(ports[1].string("name"), "b");
  EXPECT_TRUE(ports[0].finish().is_ok());
  EXPECT_TRUE(ports[1].finish().is_ok());
  EXPECT_EQ(ports[1].label(), "ports[1]");
  EXPECT_TRUE(root.finish().is_ok());
}

TEST(ConfigSection, DefaultsApplyOnlyWhenAbsent) {
  auto root = parse("x = 5\n");
  EXPECT_EQ(root.integer("x", 0, 10, 7), 5);
  EXPECT_EQ(root.integer("y", 0, 10, 7), 7);
  EXPECT_EQ(root.boolean("z", true), true);
  EXPECT_TRUE(root.finish().is_ok());
}

}  // namespace
}  // namespace rawpipe
