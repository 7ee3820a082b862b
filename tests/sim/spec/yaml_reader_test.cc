// Tests of the strict YAML reader: types, units, plausibility, maps and nesting limits.
#include "sim/spec/yaml_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "spec_test_util.h"

namespace moesim {
namespace {

using ::testing::HasSubstr;
using testing::input_error_of;

// The value of key `key` in a one-key document "key: <text>".
YamlValue value_of(const std::string& text) {
  const YamlValue root = parse_yaml_text("v: " + text + "\n", "t.yaml");
  return root.as_map({"v"}).require("v");
}

TEST(YamlReaderTest, IntegersParseStrictly) {
  EXPECT_EQ(value_of("768").as_int(1, 1000), 768);
  EXPECT_THAT(input_error_of([] { value_of("\"768\"").as_int(1, 1000); }),
              HasSubstr("t.yaml:1:4: v: expected an integer, found quoted string \"768\""));
  EXPECT_THAT(input_error_of([] { value_of("7.5").as_int(1, 1000); }),
              HasSubstr("expected an integer"));
  EXPECT_THAT(input_error_of([] { value_of("0x10").as_int(1, 1000); }),
              HasSubstr("expected an integer"));
  EXPECT_THAT(input_error_of([] { value_of("0").as_int(1, 1000); }),
              HasSubstr("must be positive (>= 1), found 0"));
  EXPECT_THAT(input_error_of([] { value_of("2000").as_int(1, 1000); }),
              HasSubstr("must be in [1, 1000], found 2000"));
  EXPECT_THAT(input_error_of([] { value_of("99999999999999999999").as_int(1, 1000); }),
              HasSubstr("expected an integer"));
  EXPECT_THAT(input_error_of([] { value_of("[1, 2]").as_int(1, 1000); }),
              HasSubstr("expected an integer, found a list"));
}

TEST(YamlReaderTest, DoublesRejectNonFinite) {
  EXPECT_DOUBLE_EQ(value_of("0.5").as_double(0, 1, true), 0.5);
  for (const char* bad : {".nan", ".NaN", ".inf", "-.inf", "+.Inf", "nan", "inf"}) {
    EXPECT_THAT(input_error_of([bad] { value_of(bad).as_double(-1e9, 1e9); }),
                HasSubstr("must be a finite number")) << bad;
  }
  EXPECT_THAT(input_error_of([] { value_of("1e999").as_double(0, 1); }), HasSubstr("out of range"));
  EXPECT_THAT(input_error_of([] { value_of("0").as_double(0, 1, true); }),
              HasSubstr("must be in (0, 1], found 0"));
  EXPECT_THAT(input_error_of([] { value_of("1.5x").as_double(0, 1); }),
              HasSubstr("expected a number"));
}

TEST(YamlReaderTest, BoolsAndStrings) {
  EXPECT_TRUE(value_of("true").as_bool());
  EXPECT_FALSE(value_of("false").as_bool());
  EXPECT_THAT(input_error_of([] { value_of("yes").as_bool(); }), HasSubstr("expected true or false"));
  EXPECT_THAT(input_error_of([] { value_of("\"true\"").as_bool(); }), HasSubstr("quoted"));
  EXPECT_EQ(value_of("\"a b\"").as_string(), "a b");
  EXPECT_THAT(input_error_of([] { value_of("{a: 1}").as_string(); }),
              HasSubstr("expected a string, found a map"));
  EXPECT_THAT(input_error_of([] { value_of("\"\"").as_name(); }), HasSubstr("must not be empty"));
}

TEST(YamlReaderTest, NullValueIsReportedAtItsKey) {
  const std::string msg = input_error_of([] {
    parse_yaml_text("a: 1\nv:\nb: 2\n", "t.yaml").as_map({"a", "v", "b"}).require("v").as_int(0, 9);
  });
  EXPECT_THAT(msg, HasSubstr("t.yaml:2:1:"));
  EXPECT_THAT(msg, HasSubstr("v: expected an integer, found no value (null)"));
}

TEST(YamlReaderTest, Sequences) {
  const auto seq = value_of("[1, 2, 3]").as_sequence();
  ASSERT_EQ(seq.size(), 3u);
  EXPECT_EQ(seq[2].as_int(0, 9), 3);
  EXPECT_EQ(seq[2].key_path(), "v[2]");
  EXPECT_THAT(input_error_of([] { value_of("1").as_sequence(); }), HasSubstr("expected a list"));
}

TEST(YamlReaderTest, SizesTimesRates) {
  EXPECT_EQ(value_of("40 GiB").as_size_bytes(1), 40 * kGiB);
  EXPECT_EQ(value_of("141 GB").as_size_bytes(1), 141'000'000'000);
  EXPECT_EQ(value_of("1.5KB").as_size_bytes(1), 1500);
  EXPECT_EQ(value_of("4 us").as_time(1'000'000), 4000);
  EXPECT_EQ(value_of("2.5 ms").as_time(1'000'000'000), 2'500'000);
  EXPECT_EQ(value_of("0 ns").as_time(10), 0);
  EXPECT_DOUBLE_EQ(value_of("25 GB/s").as_bandwidth({1e9, 1e12}), 25e9);
  EXPECT_DOUBLE_EQ(value_of("200 Gb/s").as_bandwidth({1e9, 1e12}), 25e9);
  EXPECT_DOUBLE_EQ(value_of("200 Gbit/s").as_bandwidth({1e9, 1e12}), 25e9);
  EXPECT_DOUBLE_EQ(value_of("1 GiB/s").as_bandwidth({1e8, 1e12}), 1073741824.0);
  EXPECT_DOUBLE_EQ(value_of("19.5 TFLOP/s").as_flop_rate({1e11, 1e17}), 19.5e12);
  EXPECT_DOUBLE_EQ(value_of("1 PFLOP/s").as_flop_rate({1e11, 1e17}), 1e15);
}

TEST(YamlReaderTest, QuantityNeedsAUnit) {
  const std::string msg = input_error_of([] { value_of("1555").as_bandwidth({1e9, 1e13}); });
  EXPECT_THAT(msg, HasSubstr("t.yaml:1:4: v: needs a unit, e.g. '25 GB/s'; accepted units: B/s"));
  EXPECT_THAT(msg, HasSubstr("Gb/s"));
  EXPECT_THAT(input_error_of([] { value_of("40").as_size_bytes(1); }),
              HasSubstr("needs a unit, e.g. '40 GiB'; accepted units: B, KB, MB, GB, TB, KiB"));
  EXPECT_THAT(input_error_of([] { value_of("4").as_time(1000000); }), HasSubstr("needs a unit"));
  EXPECT_THAT(input_error_of([] { value_of("19.5").as_flop_rate({1, 1e18}); }),
              HasSubstr("needs a unit"));
}

TEST(YamlReaderTest, UnknownUnitListsAccepted) {
  const std::string msg = input_error_of([] { value_of("25 GB/sec").as_bandwidth({1e9, 1e13}); });
  EXPECT_THAT(msg, HasSubstr("t.yaml:1:4: v: unknown unit 'GB/sec'"));
  EXPECT_THAT(msg, HasSubstr("accepted units: B/s, kB/s"));
  EXPECT_THAT(input_error_of([] { value_of("40 gb").as_size_bytes(1); }),
              HasSubstr("unknown unit 'gb'"));
  EXPECT_THAT(input_error_of([] { value_of("3 sec").as_time(1000000000); }),
              HasSubstr("unknown unit 'sec' in '3 sec'; accepted units: ns, us, ms, s"));
  EXPECT_THAT(input_error_of([] { value_of("GB/s").as_bandwidth({1e9, 1e13}); }),
              HasSubstr("expected a bandwidth like '25 GB/s'"));
}

TEST(YamlReaderTest, NonFiniteAndNegativeQuantities) {
  EXPECT_THAT(input_error_of([] { value_of("inf GB/s").as_bandwidth({1e9, 1e13}); }),
              HasSubstr("finite"));
  EXPECT_THAT(input_error_of([] { value_of("nan us").as_time(1000000); }), HasSubstr("finite"));
  EXPECT_THAT(input_error_of([] { value_of("-3 us").as_time(1000000); }),
              HasSubstr("must not be negative"));
  EXPECT_THAT(input_error_of([] { value_of("0 GB/s").as_bandwidth({1e9, 1e13}); }),
              HasSubstr("must be positive"));
  EXPECT_THAT(input_error_of([] { value_of("-1 GiB").as_size_bytes(1); }),
              HasSubstr("must be at least 1 B"));
  EXPECT_THAT(input_error_of([] { value_of("0 GB").as_size_bytes(1); }),
              HasSubstr("must be at least 1 B"));
  EXPECT_THAT(input_error_of([] { value_of("1e30 TB").as_size_bytes(1); }),
              HasSubstr("size too large"));
}

TEST(YamlReaderTest, BitsBytesConfusionIsNamed) {
  // A 200 Gb/s NIC written as 200 GB/s: 8x too fast for a network link.
  const PlausibleRange nic{0.1e9, 150e9};
  std::string msg = input_error_of([&] { value_of("400 GB/s").as_bandwidth(nic); });
  EXPECT_THAT(msg, HasSubstr("t.yaml:1:4: v:"));
  EXPECT_THAT(msg, HasSubstr("did you mean Gb/s instead of GB/s?"));
  // HBM bandwidth written in bits: 8x too slow.
  const PlausibleRange hbm{50e9, 50e12};
  msg = input_error_of([&] { value_of("200 Gb/s").as_bandwidth(hbm); });
  EXPECT_THAT(msg, HasSubstr("did you mean GB/s instead of Gb/s?"));
  // Far outside either way: the range is named instead.
  msg = input_error_of([&] { value_of("5 MB/s").as_bandwidth(hbm); });
  EXPECT_THAT(msg, HasSubstr("outside the plausible range is 50 GB/s to 50000 GB/s"));
  EXPECT_THAT(input_error_of([] { value_of("5 GFLOP/s").as_flop_rate({1e11, 1e17}); }),
              HasSubstr("outside the plausible range"));
}

TEST(YamlReaderTest, DuplicateKeyNamesBothPositions) {
  const std::string msg = input_error_of([] {
    parse_yaml_text("a: 1\nb: 2\n  # comment\na: 3\n", "t.yaml").as_map({"a", "b"});
  });
  EXPECT_THAT(msg, HasSubstr("t.yaml:4:1: a: duplicate key 'a' (first defined at line 1:1)"));
}

TEST(YamlReaderTest, DuplicateKeyInNestedMapHasKeyPath) {
  const std::string msg = input_error_of([] {
    const YamlValue root = parse_yaml_text("link:\n  bandwidth: 1\n  bandwidth: 2\n", "t.yaml");
    root.as_map({"link"}).require("link").as_map({"bandwidth"});
  });
  EXPECT_THAT(msg, HasSubstr("t.yaml:3:3: link.bandwidth: duplicate key 'bandwidth'"));
}

TEST(YamlReaderTest, UnknownKeySuggestsClosest) {
  const std::string msg = input_error_of([] {
    parse_yaml_text("d_model: 1\nd_modle: 2\n", "t.yaml").as_map({"d_model", "d_ffn"});
  });
  EXPECT_THAT(msg, HasSubstr("t.yaml:2:1: unknown key 'd_modle' (did you mean 'd_model'?); "
                             "allowed keys: d_model, d_ffn"));
  const std::string far = input_error_of([] {
    parse_yaml_text("zzzzzzzz: 2\n", "t.yaml").as_map({"d_model", "d_ffn"});
  });
  EXPECT_THAT(far, HasSubstr("unknown key 'zzzzzzzz'; allowed keys"));
  EXPECT_THAT(far, ::testing::Not(HasSubstr("did you mean")));
}

TEST(YamlReaderTest, RequireNamesMissingKey) {
  EXPECT_THAT(input_error_of([] {
                parse_yaml_text("a: 1\n", "t.yaml").as_map({"a", "b"}).require("b");
              }),
              HasSubstr("t.yaml:1:1: missing required key 'b'"));
  EXPECT_THAT(input_error_of([] { parse_yaml_text("[1]\n", "t.yaml").as_map({"a"}); }),
              HasSubstr("expected a map with keys a, found a list"));
}

TEST(YamlReaderTest, SyntaxErrorHasPosition) {
  const std::string msg =
      input_error_of([] { parse_yaml_text("a: 1\nb: [1, 2\nc: 3\n", "t.yaml"); });
  EXPECT_THAT(msg, ::testing::ContainsRegex("t\\.yaml:[0-9]+:[0-9]+: YAML syntax error"));
  EXPECT_THAT(input_error_of([] { parse_yaml_text("a: b: c\n", "t.yaml"); }),
              HasSubstr("YAML syntax error"));
}

TEST(YamlReaderTest, DeepFlowNestingRejectedBeforeParsing) {
  const std::string deep = "a: " + std::string(10000, '[') + std::string(10000, ']') + "\n";
  const std::string msg = input_error_of([&] { parse_yaml_text(deep, "t.yaml"); });
  // The 33rd bracket, in column 3 + 33.
  EXPECT_THAT(msg, HasSubstr("t.yaml:1:36: nesting deeper than 32"));
  const std::string maps = "a: " + std::string(100000, '{');
  EXPECT_THAT(input_error_of([&] { parse_yaml_text(maps, "t.yaml"); }), HasSubstr("nesting"));
  // Brackets inside quotes and comments do not count.
  const std::string quoted = "a: '" + std::string(100, '[') + "'\n# " + std::string(100, '{') +
                             "\nb: \"" + std::string(100, '[') + "\"\n";
  EXPECT_NO_THROW(parse_yaml_text(quoted, "t.yaml"));
  // An apostrophe inside a plain scalar does not hide the brackets after it.
  const std::string apostrophe = "a: NVIDIA's " + std::string(40, '[') + "\n";
  EXPECT_THAT(input_error_of([&] { parse_yaml_text(apostrophe, "t.yaml"); }),
              HasSubstr("nesting deeper than 32"));
}

TEST(YamlReaderTest, DeepBlockNestingRejectedAfterParsing) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += std::string(2 * static_cast<std::size_t>(i), ' ') + "k:\n";
  text += std::string(80, ' ') + "v: 1\n";
  EXPECT_THAT(input_error_of([&] { parse_yaml_text(text, "t.yaml"); }),
              HasSubstr("nesting deeper than 32 levels"));
}

TEST(YamlReaderTest, OneDocumentPerFile) {
  EXPECT_THAT(input_error_of([] { parse_yaml_text("a: 1\n---\nb: 2\n", "t.yaml"); }),
              HasSubstr("t.yaml:2:1: a file holds one YAML document"));
  EXPECT_THAT(input_error_of([] { parse_yaml_text("", "t.yaml"); }), HasSubstr("empty file"));
}

TEST(YamlReaderTest, StrayTopLevelCommaTerminates) {
  // yaml-cpp's LoadAll loops forever on this input (found by fuzzing the loader).
  EXPECT_THAT(input_error_of([] { parse_yaml_text(",# x\na: 1\n", "t.yaml"); }),
              HasSubstr("t.yaml:"));
  EXPECT_THAT(input_error_of([] { parse_yaml_text("]\n", "t.yaml"); }), HasSubstr("t.yaml"));
}

TEST(YamlReaderTest, MissingFileNamesPath) {
  EXPECT_THAT(input_error_of([] { parse_yaml_file("/nonexistent/dir/x.yaml"); }),
              HasSubstr("cannot open file '/nonexistent/dir/x.yaml'"));
}

TEST(YamlReaderTest, EditDistance) {
  EXPECT_EQ(edit_distance("d_modle", "d_model"), 2);
  EXPECT_EQ(edit_distance("", "abc"), 3);
  EXPECT_EQ(edit_distance("top_k", "top_k"), 0);
}

}  // namespace
}  // namespace moesim
