#include "sim/cli/list_args.h"

#include <algorithm>
#include <string>

#include "sim/cli/number_flags.h"
#include "sim/core/error.h"
#include "sim/spec/run_options.h"
#include "sim/spec/run_spec.h"
#include "sim/spec/step_options.h"
#include "sim/spec/yaml_reader.h"

namespace moesim::cli {
namespace {

std::int64_t parse_one(const std::string& flag, const std::string& item, std::int64_t min, std::int64_t max) {
  return static_cast<std::int64_t>(
      parse_integer_flag(flag, item, static_cast<std::uint64_t>(min), static_cast<std::uint64_t>(max)));
}

}  // namespace

std::vector<std::string> split_list(const std::string& flag, const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw InputError(flag + ": empty element in '" + text + "'");
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<std::int64_t> parse_int_list(const std::string& flag, const std::string& text, std::int64_t min,
                                         std::int64_t max) {
  std::vector<std::int64_t> out;
  for (const std::string& item : split_list(flag, text)) {
    const std::size_t dash = item.find('-', 1);
    if (dash == std::string::npos) {
      out.push_back(parse_one(flag, item, min, max));
      continue;
    }
    const std::int64_t lo = parse_one(flag, item.substr(0, dash), min, max);
    const std::int64_t hi = parse_one(flag, item.substr(dash + 1), min, max);
    if (hi < lo) throw InputError(flag + ": range '" + item + "' is empty (its end is below its start)");
    if (hi - lo > 100000) throw InputError(flag + ": range '" + item + "' has more than 100000 values");
    for (std::int64_t v = lo; v <= hi; ++v) out.push_back(v);
  }
  return out;
}

std::vector<std::int64_t> run_option_list(const std::string& key, const std::string& flag, const std::string& text) {
  const RunOption& o = run_option(key);
  return parse_int_list(flag, text, o.min, o.max);
}

std::vector<int> parse_chunk_list(const std::string& flag, const std::string& text) {
  std::vector<int> out;
  for (std::int64_t v : run_option_list("num_chunks", flag, text)) out.push_back(static_cast<int>(v));
  return out;
}

std::vector<MemoryStrategy> parse_strategy_list(const std::string& flag, const std::string& text) {
  if (text == "all") {
    return {MemoryStrategy::kNone, MemoryStrategy::kS1, MemoryStrategy::kS2, MemoryStrategy::kS3,
            MemoryStrategy::kS4};
  }
  std::vector<MemoryStrategy> out;
  for (const std::string& item : split_list(flag, text)) {
    RunSpec run;
    try {
      run_option("strategy").set_from_text(run, item, flag);
    } catch (const InputError& e) {
      throw InputError(e.rule() + ", or all");  // the list flag's own spelling of every one
    }
    out.push_back(run.strategy);
  }
  return out;
}

RecomputeModules parse_recompute_modules_flag(const std::string& text) {
  StepSpec spec;
  step_option("--recompute-modules").set_from_flag(spec, text);
  return spec.recompute_modules;
}

std::vector<RecomputeModules> parse_recompute_module_sets(const std::string& text) {
  std::vector<RecomputeModules> out;
  for (std::size_t from = 0;;) {
    const std::size_t slash = text.find('/', from);
    const std::string set = text.substr(from, slash == std::string::npos ? std::string::npos : slash - from);
    if (set.empty())
      throw InputError("--recompute-modules '" + text + "': an empty set; give sets of modules separated by /, "
                       "e.g. core_attn/mla_up_proj,mlp");
    const RecomputeModules modules = parse_recompute_modules_flag(set);
    if (std::find(out.begin(), out.end(), modules) != out.end())
      throw InputError("--recompute-modules '" + text + "': the set '" + set + "' is named twice");
    out.push_back(modules);
    if (slash == std::string::npos) return out;
    from = slash + 1;
  }
}

}  // namespace moesim::cli
