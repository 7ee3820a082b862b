// The command-line flags of the run options (sim/spec/run_options.h) and of the whole step's own
// options (sim/spec/step_options.h), as a command registers them: the text of each value given,
// applied over a run file's or the defaults' RunSpec, or over a StepSpec. The flag names, help,
// ranges and defaults all come from the tables; only the registration includes CLI11.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "sim/spec/run_spec.h"
#include "sim/spec/step_spec.h"

namespace CLI {
class App;
}

namespace moesim::cli {

struct RunOptionFlags {
  std::vector<std::string> keys;              // the registered options' keys
  std::map<std::string, std::string> values;  // key -> the value's text, for options that take one
  std::map<std::string, bool> switches;       // key -> a boolean option's flag's value as given
  std::function<bool(const char*)> given;     // whether a flag was on the command line

  // Whether the option with this key was given on the command line.
  bool given_key(const std::string& key) const;
  // `run` with every option given on the command line set from it (InputError naming the flag),
  // but the options in `skip`, which the caller reads itself.
  void apply(RunSpec& run, const std::vector<std::string>& skip = {}) const;
  // Whether a boolean option's flag was given and not as `--flag=false`.
  bool switched_on(const std::string& key) const;
};

// How a command registers the run options' flags.
struct RunOptionFlagStyle {
  // An integer option's command-line maximum where the command reads a wider range itself (the
  // whole step's --zero 0-3); the run option's own range is still checked by apply().
  std::map<std::string, std::int64_t> widen;
  // Show RunSpec's defaults in the help (false where a file's values are the defaults: sweep).
  bool show_defaults = true;
  // Words added to an option's help, by key, for what the command does with it.
  std::map<std::string, std::string> notes;
};

// Registers the flags of the options `keys` (every option when empty) on `app`.
void add_run_option_flags(CLI::App* app, RunOptionFlags& flags, const std::vector<std::string>& keys,
                          const RunOptionFlagStyle& style = {});

// The whole step's own options' flags (sim/spec/step_options.h) a command registered.
struct StepOptionFlags {
  std::vector<std::string> flags;             // the registered options' flags
  std::map<std::string, std::string> values;  // flag -> the value's text, for options that take one
  std::map<std::string, bool> switches;       // flag -> a boolean option's value as given
  std::function<bool(const char*)> given;

  bool given_flag(const std::string& flag) const;
  // `spec` with every option given set from it (InputError naming the flag).
  void apply(StepSpec& spec) const;
  // The value as given, for an option the command reads itself ("" when not given).
  std::string text(const std::string& flag) const;
};

// Registers the flags `flags` of the step options (every one when empty) on `app`.
void add_step_option_flags(CLI::App* app, StepOptionFlags& out, const std::vector<std::string>& flags);

}  // namespace moesim::cli
