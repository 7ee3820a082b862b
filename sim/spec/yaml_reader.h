// Strict YAML reading for the spec loaders, over yaml-cpp 0.7.
//
// yaml-cpp is permissive where moesim must not be: it keeps duplicate keys silently, converts
// quoted strings to numbers, accepts .nan/.inf, and recurses without bound on deep flow nesting.
// Every value read here carries its file, key path ("intra_node.bandwidth") and 1-based position, so
// each rejection is an InputError that says file:line:col, the key and the rule broken.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "sim/core/error.h"
#include "sim/core/units.h"

namespace moesim {

// Limits of the reader; the schema needs depth 4 at most, so 32 leaves room without letting
// yaml-cpp recurse deeply (it has had stack-overflow CVEs on deep nesting).
inline constexpr int kMaxYamlDepth = 32;
inline constexpr std::size_t kMaxYamlFileBytes = 1 << 20;
inline constexpr std::int64_t kMaxYamlNodes = 100000;

// A closed range a quantity is believed to lie in; outside it the value is rejected (and for a
// bandwidth, a factor-8 miss is reported as bits/bytes confusion).
struct PlausibleRange {
  double min = 0;
  double max = 0;
};

class YamlMap;

class YamlValue {
 public:
  YamlValue(YAML::Node node, std::string file, std::string key_path);
  // With the position given: a null value ("d_model:" alone) is reported at its key, because
  // yaml-cpp marks it at the next token.
  YamlValue(YAML::Node node, std::string file, std::string key_path, YAML::Mark mark);

  const std::string& file() const { return file_; }
  const std::string& key_path() const { return key_path_; }
  SourceLocation location() const;
  const YAML::Node& node() const { return node_; }

  // Raises an InputError at this value: "<key path>: <rule>".
  [[noreturn]] void fail(const std::string& rule) const;

  bool is_map() const { return node_.IsMap(); }
  bool is_sequence() const { return node_.IsSequence(); }
  // A scalar written without quotes and without a tag (quoted scalars are always strings).
  bool is_plain_scalar() const;
  bool is_scalar() const { return node_.IsScalar(); }

  std::int64_t as_int(std::int64_t min, std::int64_t max) const;
  // A finite number in [min, max]; min_exclusive makes the lower bound open.
  double as_double(double min, double max, bool min_exclusive = false) const;
  bool as_bool() const;
  std::string as_string() const;
  // Non-empty string.
  std::string as_name() const;
  // An enumeration via its parse_* function; an unknown name lists the valid ones.
  template <typename Parse>
  auto as_enum(Parse parse, const std::vector<std::string>& names) const {
    const std::string s = as_string();
    if (auto e = parse(s)) return *e;
    fail("unknown value '" + s + "'; valid values: " + join_names(names));
  }
  YamlMap as_map(std::vector<std::string> allowed_keys) const;
  std::vector<YamlValue> as_sequence() const;

  // Quantities: strings "<number> <unit>".
  std::int64_t as_size_bytes(std::int64_t min_bytes) const;
  TimeNs as_time(TimeNs max_ns) const;
  double as_bandwidth(PlausibleRange plausible) const;  // bytes/s
  double as_flop_rate(PlausibleRange plausible) const;  // FLOP/s

  static std::string join_names(const std::vector<std::string>& names);

 private:
  // The scalar text, or a type error naming `expected` when the node is not a scalar.
  std::string scalar_text(const char* expected) const;
  std::string describe() const;  // "string \"768\"", "a map", "null", ...
  // Splits "<number> <unit>", rejecting bare numbers and unknown units (listing `units`).
  std::pair<double, std::string> quantity(const char* what, const std::vector<std::string>& units,
                                          const char* example) const;

  YAML::Node node_;
  YAML::Mark mark_;
  std::string file_;
  std::string key_path_;
};

// A YAML map read strictly: duplicate keys and keys outside the allowed list are rejected on
// construction (unknown keys with a "did you mean" and the allowed keys).
class YamlMap {
 public:
  YamlMap(const YamlValue& value, std::vector<std::string> allowed_keys);

  bool has(std::string_view key) const;
  std::optional<YamlValue> get(std::string_view key) const;
  YamlValue require(std::string_view key) const;
  const YamlValue& value() const { return value_; }
  [[noreturn]] void fail(const std::string& rule) const { value_.fail(rule); }

 private:
  YamlValue child(const YAML::Node& key_node, const YAML::Node& node, std::string_view key) const;

  YamlValue value_;
  std::vector<std::string> allowed_;
  std::vector<std::pair<std::string, YAML::Node>> entries_;
};

// Parses YAML text (nesting capped before yaml-cpp sees it); `file` names it in errors.
YamlValue parse_yaml_text(const std::string& text, const std::string& file);
// Reads and parses a file; a missing or unreadable file is an InputError naming the path.
YamlValue parse_yaml_file(const std::string& path);

// Levenshtein distance, for "did you mean".
int edit_distance(std::string_view a, std::string_view b);

}  // namespace moesim
