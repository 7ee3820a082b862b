#include "sim/spec/option_rules.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "sim/spec/yaml_reader.h"

namespace moesim {

std::optional<std::int64_t> whole_number(const std::string& text) {
  std::int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc{} || ptr != end) return std::nullopt;
  return v;
}

std::string integer_rule_broken(const std::string& text, std::int64_t min, std::int64_t max) {
  const auto v = whole_number(text);
  if (!v) return "expected an integer, found '" + text + "'";
  if (*v < min || *v > max) return "must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], found " + text;
  return "";
}

std::string real_rule_broken(const std::string& text, double min, double max) {
  char* end = nullptr;
  const double v = text.empty() ? 0 : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v))
    return "expected a number, found '" + text + "'";
  if (v < min || v > max) {
    char range[96];
    std::snprintf(range, sizeof range, "must be in [%g, %g], found ", min, max);
    return range + text;
  }
  return "";
}

std::string bool_rule_broken(const std::string& text) {
  return text == "true" || text == "false" ? "" : "expected true or false, found '" + text + "'";
}

std::string choice_rule_broken(const std::string& text, const std::vector<std::string>& choices) {
  for (const std::string& c : choices)
    if (c == text) return "";
  return "unknown value '" + text + "'; valid values: " + YamlValue::join_names(choices);
}

}  // namespace moesim
