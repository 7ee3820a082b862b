#include "sim/cli/number_flags.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>

#include "sim/core/error.h"

namespace moesim::cli {
namespace {

// Fixed notation, shortest round trip: a limit of 1e9 ms reads as 1000000000, not 1e+09.
std::string plain(double v) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

}  // namespace

std::string integer_range(std::uint64_t min, std::uint64_t max) {
  return "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

std::string number_range(double min, double max, bool min_exclusive) {
  return (min_exclusive ? "(" : "[") + plain(min) + ", " + plain(max) + "]";
}

std::string integer_rule(std::string& text, std::uint64_t min, std::uint64_t max) {
  const std::string range = integer_range(min, max);
  const bool negative = !text.empty() && text.front() == '-';
  const std::string_view digits = std::string_view(text).substr(negative ? 1 : 0);
  const bool all_digits =
      !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!all_digits) return "'" + text + "' is not an integer in " + range + " (decimal digits, no sign)";
  if (negative) return text + " is negative; it must be in " + range;
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec == std::errc::result_out_of_range || v < min || v > max) return text + " is outside " + range;
  text = std::to_string(v);
  return "";
}

std::string number_rule(const std::string& text, double min, double max, bool min_exclusive) {
  const std::string range = number_range(min, max, min_exclusive);
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || end != text.data() + text.size() || (ec != std::errc() && ec != std::errc::result_out_of_range))
    return "'" + text + "' is not a number in " + range;
  if (std::isnan(v) || std::isinf(v)) return text + " is not a finite number; it must be in " + range;
  const bool below = min_exclusive ? !(v > min) : v < min;
  if (ec == std::errc::result_out_of_range || below || v > max) return text + " is outside " + range;
  return "";
}

std::uint64_t parse_integer_flag(const std::string& flag, const std::string& text, std::uint64_t min,
                                 std::uint64_t max) {
  std::string canonical = text;
  if (const std::string rule = integer_rule(canonical, min, max); !rule.empty()) throw InputError(flag + ": " + rule);
  return std::stoull(canonical);
}

std::int64_t parse_size_bytes(const std::string& text, const std::string& flag) {
  const std::string sizes = "give a size of 1 B to 1 PiB, in bytes or K, M, G (e.g. 1M)";
  const std::size_t end = std::min(text.find_first_not_of("0123456789"), text.size());
  std::string number = text.substr(0, end);
  const std::string unit = text.substr(end);
  if (number.empty()) {
    throw InputError(flag + ": '" + text + (text.starts_with("-") ? "' is negative; " : "' is not a size; ") + sizes);
  }
  std::int64_t mult = 1;
  if (unit == "K" || unit == "k") {
    mult = std::int64_t{1} << 10;
  } else if (unit == "M" || unit == "m") {
    mult = std::int64_t{1} << 20;
  } else if (unit == "G" || unit == "g") {
    mult = std::int64_t{1} << 30;
  } else if (!unit.empty()) {
    throw InputError(flag + ": '" + text + "' has an unknown unit '" + unit + "'; use K, M or G");
  }
  const auto max = static_cast<std::uint64_t>((std::int64_t{1} << 50) / mult);
  if (!integer_rule(number, 1, max).empty()) throw InputError(flag + ": " + text + " is outside [1 B, 1 PiB]");
  return static_cast<std::int64_t>(std::stoull(number)) * mult;
}

}  // namespace moesim::cli
