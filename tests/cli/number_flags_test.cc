// Unit tests of the strict numeric flag values (sim/cli/number_flags.h).
#include "sim/cli/number_flags.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/core/error.h"

namespace {

using moesim::cli::integer_rule;
using moesim::cli::number_rule;
using moesim::cli::parse_integer_flag;

std::string rule_of(std::string text, std::uint64_t min, std::uint64_t max) { return integer_rule(text, min, max); }

TEST(NumberFlags, AcceptsDecimalIntegersInRangeAndRewritesThemPlainly) {
  std::string text = "010";  // strtoll would read octal 8
  EXPECT_EQ(integer_rule(text, 1, 100), "");
  EXPECT_EQ(text, "10");
  EXPECT_EQ(rule_of("18446744073709551615", 0, UINT64_MAX), "");
  EXPECT_EQ(parse_integer_flag("--gpus", "64", 1, 64), 64u);
}

TEST(NumberFlags, RefusesASignInsteadOfWrappingIt) {
  EXPECT_EQ(rule_of("-1", 0, INT64_MAX), "-1 is negative; it must be in [0, 9223372036854775807]");
  EXPECT_EQ(rule_of("+5", 0, 10), "'+5' is not an integer in [0, 10] (decimal digits, no sign)");
}

TEST(NumberFlags, NamesTheLimitOfAnOverflow) {
  EXPECT_EQ(rule_of("4611686018427387904", 1, std::uint64_t{1} << 40),
            "4611686018427387904 is outside [1, 1099511627776]");
  EXPECT_EQ(rule_of("99999999999999999999999", 1, 10), "99999999999999999999999 is outside [1, 10]");
  EXPECT_EQ(rule_of("0", 1, 10), "0 is outside [1, 10]");
}

TEST(NumberFlags, RefusesWhatIsNotADecimalInteger) {
  for (const char* bad : {"", "0x10", "1e3", "1.5", " 4", "4 ", "four"})
    EXPECT_EQ(rule_of(bad, 0, 10), "'" + std::string(bad) + "' is not an integer in [0, 10] (decimal digits, no sign)");
}

TEST(NumberFlags, ParseNamesTheFlag) {
  try {
    parse_integer_flag("--ranks", "-2", 0, 8);
    FAIL() << "no error";
  } catch (const moesim::InputError& e) {
    EXPECT_EQ(std::string(e.what()), "--ranks: -2 is negative; it must be in [0, 8]");
  }
}

TEST(NumberFlags, NumbersMustBeFiniteAndInRange) {
  EXPECT_EQ(number_rule("2.5", 0, 1e9), "");
  EXPECT_EQ(number_rule("1e3", 0, 1e9), "");
  EXPECT_EQ(number_rule("nan", 0, 1e9), "nan is not a finite number; it must be in [0, 1000000000]");
  EXPECT_EQ(number_rule("-inf", 0, 1e9), "-inf is not a finite number; it must be in [0, 1000000000]");
  EXPECT_EQ(number_rule("-1", 0, 1e9), "-1 is outside [0, 1000000000]");
  EXPECT_EQ(number_rule("1e400", 0, 1e9), "1e400 is outside [0, 1000000000]");
  EXPECT_EQ(number_rule("0", 0, 10000, true), "0 is outside (0, 10000]");
  EXPECT_EQ(number_rule("0.001", 0, 10000, true), "");
  EXPECT_EQ(number_rule("ten", 0, 1), "'ten' is not a number in [0, 1]");
  EXPECT_EQ(number_rule("0x10", 0, 100), "'0x10' is not a number in [0, 100]");
}

}  // namespace
