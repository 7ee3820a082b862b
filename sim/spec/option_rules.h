// The rules an option's text must satisfy, one message each, shared by the run options
// (sim/spec/run_options.h) and the whole step's (sim/spec/step_options.h): each returns the rule
// the text breaks, or "" when it satisfies it. The caller names or locates the value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moesim {

// A whole number in decimal, or nullopt (a sign but '-', spaces, overflow).
std::optional<std::int64_t> whole_number(const std::string& text);
std::string integer_rule_broken(const std::string& text, std::int64_t min, std::int64_t max);
std::string real_rule_broken(const std::string& text, double min, double max);
std::string bool_rule_broken(const std::string& text);
std::string choice_rule_broken(const std::string& text, const std::vector<std::string>& choices);

}  // namespace moesim
