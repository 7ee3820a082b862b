#include "sim/cli/run_option_flags.h"

#include <CLI/CLI.hpp>

#include <algorithm>

#include "sim/cli/cli11_validators.h"
#include "sim/spec/run_options.h"
#include "sim/spec/step_options.h"

namespace moesim::cli {
namespace {

// A boolean option's value from its flag: `--grad-sync=false` is given too (CLI11 takes a flag's
// value), and sets the opposite of what the flag sets.
const char* switch_text(bool given_value, bool flag_sets) { return given_value == flag_sets ? "true" : "false"; }

}  // namespace

bool RunOptionFlags::given_key(const std::string& key) const {
  for (const std::string& k : keys)
    if (k == key) return given && given(run_option(key).flag);
  return false;
}

void RunOptionFlags::apply(RunSpec& run, const std::vector<std::string>& skip) const {
  for (const std::string& key : keys) {
    if (!given_key(key) || std::find(skip.begin(), skip.end(), key) != skip.end()) continue;
    const RunOption& o = run_option(key);
    if (o.type == RunOptionType::kBool) {
      o.set_from_flag(run, switch_text(switches.at(key), o.flag_sets));
    } else {
      o.set_from_flag(run, values.at(key));
    }
  }
}

bool RunOptionFlags::switched_on(const std::string& key) const { return given_key(key) && switches.at(key); }

void add_run_option_flags(CLI::App* app, RunOptionFlags& flags, const std::vector<std::string>& keys,
                          const RunOptionFlagStyle& style) {
  flags.given = [app](const char* flag) { return app->count(flag) > 0; };
  const RunSpec defaults;
  for (const RunOption& o : run_options()) {
    if (!keys.empty() && std::find(keys.begin(), keys.end(), o.key) == keys.end()) continue;
    flags.keys.push_back(o.key);
    std::string name = o.flag;
    if (*o.alias) name += std::string(",") + o.alias;
    const auto note = style.notes.find(o.key);
    const std::string help = std::string(o.help) + (note == style.notes.end() ? "" : note->second);
    if (o.type == RunOptionType::kBool) {
      app->add_flag(name, flags.switches[o.key], help);
      continue;
    }
    CLI::Option* opt = app->add_option(name, flags.values[o.key], help);
    if (!o.required && style.show_defaults) opt->default_str(o.text(defaults));
    if (o.type == RunOptionType::kInteger) {
      const auto w = style.widen.find(o.key);
      const std::int64_t max = w == style.widen.end() ? o.max : w->second;
      opt->type_name("INT")->transform(whole(static_cast<std::uint64_t>(o.min), static_cast<std::uint64_t>(max)));
    }
  }
}

bool StepOptionFlags::given_flag(const std::string& flag) const {
  return std::find(flags.begin(), flags.end(), flag) != flags.end() && given && given(flag.c_str());
}

void StepOptionFlags::apply(StepSpec& spec) const {
  for (const std::string& flag : flags) {
    if (!given_flag(flag)) continue;
    const StepOption& o = step_option(flag);
    if (o.type == StepOptionType::kBool) {
      o.set_from_flag(spec, switch_text(switches.at(flag), o.flag_sets));
    } else {
      o.set_from_flag(spec, values.at(flag));
    }
  }
}

std::string StepOptionFlags::text(const std::string& flag) const {
  return given_flag(flag) && values.count(flag) ? values.at(flag) : "";
}

void add_step_option_flags(CLI::App* app, StepOptionFlags& out, const std::vector<std::string>& flags) {
  out.given = [app](const char* flag) { return app->count(flag) > 0; };
  for (const StepOption& o : step_options()) {
    if (!flags.empty() && std::find(flags.begin(), flags.end(), o.flag) == flags.end()) continue;
    out.flags.push_back(o.flag);
    if (o.type == StepOptionType::kBool) {
      app->add_flag(o.flag, out.switches[o.flag], o.help);
      continue;
    }
    CLI::Option* opt = app->add_option(o.flag, out.values[o.flag], o.help);
    // A default that is one value (`flash`, 1) shows in the help as CLI11 shows defaults.
    const std::string def = o.default_text;
    if (o.type == StepOptionType::kChoice && def.size() > 2 && def.front() == '`' && def.back() == '`' &&
        def.find('`', 1) == def.size() - 1)
      opt->default_str(def.substr(1, def.size() - 2));
    if (o.type == StepOptionType::kInteger)
      opt->type_name("INT")->transform(whole(static_cast<std::uint64_t>(o.min), static_cast<std::uint64_t>(o.max)));
    if (o.type == StepOptionType::kReal) opt->type_name("FLOAT")->transform(real(o.min, o.max));
  }
}

}  // namespace moesim::cli
