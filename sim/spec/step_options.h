// The whole training step's own options (StepSpec, sim/spec/step_spec.h; `moesim simulate
// --global-batch`), each declared once: its flag, its type with the range or the values it takes,
// its default, its rule and its help. simulate's flags and their parse, plan's and validate's
// flags of the same options, the list of flags only the whole step reads and the flag table of
// docs/training-step.md (`moesim options step --markdown`) read this table. The options the step
// shares with the MoE-layer simulation (--tp, --ep, --zero, --chunks, --strategy, --routing,
// --seed, --network, --compute) are run options (sim/spec/run_options.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/spec/step_spec.h"

namespace moesim {

enum class StepOptionType {
  kInteger,  // a whole number in [min, max]
  kReal,     // a number in [min, max]
  kBool,     // a flag that sets `flag_sets`
  kChoice,   // one of choices()
  kList,     // a comma-separated list the option parses itself (its rule says what)
};

struct StepOption {
  const char* flag = "";
  StepOptionType type = StepOptionType::kInteger;
  double min = 0;  // kInteger, kReal: the inclusive range
  double max = 0;
  bool flag_sets = true;        // kBool: the value the flag sets
  const char* default_text = "";  // what the step does without the flag
  const char* rule = "";        // docs/training-step.md
  const char* help = "";        // the flag's help

  // kChoice: the values taken.
  std::vector<std::string> choices() const;
  // Sets the option from the flag's text; InputError "<flag>: <rule>" when the text breaks it.
  void set_from_flag(StepSpec& spec, const std::string& value) const;
  // "integer", "number", "flag", "string", "list": the documentation's type column.
  const char* type_name() const;
  // The documented range or values.
  std::string values_text() const;
};

const std::vector<StepOption>& step_options();
// The option with this flag; InternalError when there is none (a typo in moesim itself).
const StepOption& step_option(const std::string& flag);
// docs/training-step.md's table of the whole step's own flags.
std::string step_options_markdown();

}  // namespace moesim
