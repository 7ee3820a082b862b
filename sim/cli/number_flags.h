// Strict reading of numeric command-line values, shared by every command.
//
// CLI11 reads an integer with strtoll/strtoull: "-1" wraps to 2^64-1 for an unsigned option,
// "010" is octal and "0x10" hex, and an overflow says only "could not convert". Here a value is
// decimal digits only, no sign, within the option's range, and every rejection names the flag,
// the value and the rule; a floating-point value must be finite and within its range.
#pragma once

#include <cstdint>
#include <string>

namespace moesim::cli {

// "[min, max]"; for numbers "(min, max]" with an open lower bound.
std::string integer_range(std::uint64_t min, std::uint64_t max);
std::string number_range(double min, double max, bool min_exclusive = false);

// The rule `text` breaks as an integer in [min, max] ("" when it keeps it), without the flag's
// name (CLI11 puts it in front). On success `text` is rewritten in plain decimal, so that CLI11's
// own conversion cannot read "010" as octal.
std::string integer_rule(std::string& text, std::uint64_t min, std::uint64_t max);

// The same for a finite number in [min, max] (an open lower bound with min_exclusive).
std::string number_rule(const std::string& text, double min, double max, bool min_exclusive = false);

// Parses an integer in [min, max]; InputError "<flag>: <rule>" otherwise.
std::uint64_t parse_integer_flag(const std::string& flag, const std::string& text, std::uint64_t min,
                                 std::uint64_t max);

// A size: "4096", "512K", "64M", "1G" (powers of 1024, as nccl-tests -b/-e), in [1 B, 1 PiB];
// InputError naming `flag` otherwise.
std::int64_t parse_size_bytes(const std::string& text, const std::string& flag);

}  // namespace moesim::cli
