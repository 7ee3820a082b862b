// The run options of the MoE-layer simulation (RunSpec), each declared once: its run-file key, its
// command-line flag, its type with the range or the values it takes, its default (RunSpec's own) and
// its documentation. The run-file and sweep-file loaders, `moesim simulate`'s flags and their merge
// with a run file, the report's echo of the run and the run-file table of
// docs/config-reference.md (`moesim options --markdown`) all read this table, so a new option is
// one entry here plus its field in RunSpec.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/spec/run_spec.h"

namespace moesim {

class YamlValue;

enum class RunOptionType {
  kInteger,  // a whole number in [min, max]
  kBool,     // true or false; on the command line a flag that sets `flag_sets`
  kChoice,   // one of `choices`
  kRouting,  // uniform | zipf:<s> | matrix:<csv file> (sim/spec/routing_spec.h)
};

struct RunOption {
  const char* key = "";   // run-file and sweep-file key, and the key of the report's echo
  const char* flag = "";  // command-line flag ("" when the option has none)
  const char* alias = "";  // a short flag for the same option ("-n"), or ""
  RunOptionType type = RunOptionType::kInteger;
  std::int64_t min = 0;  // kInteger: the inclusive range
  std::int64_t max = 0;
  bool flag_sets = true;  // kBool: the value the flag sets (--no-dtd sets drop_duplicate_tokens false)
  bool required = false;  // a run file must give it (or the command line)
  const char* rule = "";  // what the value means and must satisfy (docs/config-reference.md)
  const char* help = "";  // the flag's help text

  // kChoice: the values taken, as spelled in files and on the command line.
  std::vector<std::string> choices() const;
  // The option's value in `run`, spelled as a file or a flag takes it ("2", "true", "mpipemoe").
  std::string text(const RunSpec& run) const;
  // Sets the option from a flag's text, spelled as text() spells it (a routing matrix's path is
  // relative to the working folder). InputError "<flag>: <rule>" when the text breaks the rule.
  void set_from_flag(RunSpec& run, const std::string& value) const;
  // The same for a value named otherwise: an element of a list flag (--strategies, --chunks).
  void set_from_text(RunSpec& run, const std::string& value, const std::string& name) const;
  // Sets the option from a run or sweep file's value (type checked as the file reader checks it);
  // `base_dir` resolves a routing matrix's path. InputError "<file:line:col>: <key>: <rule>".
  void read(RunSpec& run, const YamlValue& value, const std::string& base_dir) const;
  // "integer", "bool", "string": the type column of the documentation.
  const char* type_name() const;
  // The documented range or values: "[1, 2]", "`none`, `s1`, ...".
  std::string values_text() const;
};

// Every run option, in the order of the documentation.
const std::vector<RunOption>& run_options();
// The option with this key; InternalError when there is none (a typo in moesim itself).
const RunOption& run_option(const std::string& key);
// The run file's table of docs/config-reference.md: one Markdown row per option.
std::string run_options_markdown();

}  // namespace moesim
