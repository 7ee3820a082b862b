// Parsing the list-valued flags of `moesim plan` and `moesim sweep` ("2048,4096", "1-16",
// "none,s1"). Every malformed element is an InputError naming the flag and the element.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/spec/step_spec.h"
#include "sim/spec/types.h"

namespace moesim::cli {

// Comma-separated integers; an element "a-b" stands for a, a+1, ..., b. Each in [min, max], with
// 0 <= min (no list flag takes a negative value), read as parse_integer_flag reads one.
std::vector<std::int64_t> parse_int_list(const std::string& flag, const std::string& text,
                                         std::int64_t min, std::int64_t max);
// parse_int_list over the range of the run option `key` (sim/spec/run_options.h): a list flag of
// that option's values (--tokens, --tp, --chunks) takes what the option takes.
std::vector<std::int64_t> run_option_list(const std::string& key, const std::string& flag, const std::string& text);
std::vector<int> parse_chunk_list(const std::string& flag, const std::string& text);
// Comma-separated strategy names, or "all".
std::vector<MemoryStrategy> parse_strategy_list(const std::string& flag, const std::string& text);
// Comma-separated non-empty strings.
std::vector<std::string> split_list(const std::string& flag, const std::string& text);
// --recompute-modules' list (Megatron-Core's names, each once); InputError naming the flag and
// the valid names otherwise.
RecomputeModules parse_recompute_modules_flag(const std::string& text);
// The layout planner's --recompute-modules: one or more such lists separated by '/', each a set
// of modules tried apart ("mla_up_proj,mlp/mla_up_proj,moe"); InputError for an empty or
// repeated set.
std::vector<RecomputeModules> parse_recompute_module_sets(const std::string& text);

}  // namespace moesim::cli
