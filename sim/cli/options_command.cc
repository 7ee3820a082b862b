#include "sim/cli/options_command.h"

#include <algorithm>
#include <ostream>
#include <string>

#include "sim/core/error.h"
#include "sim/spec/run_options.h"
#include "sim/spec/step_options.h"

namespace moesim::cli {

namespace {

// Plain text: the documentation's Markdown quotes dropped.
std::string plain(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), '`'), s.end());
  return s;
}

std::string pad(std::string s, std::size_t w) { return s + std::string(w - std::min(w, s.size()), ' '); }

void list_run_options(std::ostream& out) {
  const RunSpec defaults;
  std::size_t key_width = 0;
  std::size_t flag_width = 0;
  for (const RunOption& o : run_options()) {
    key_width = std::max(key_width, std::string(o.key).size());
    flag_width = std::max(flag_width, std::string(o.flag).size());
  }
  out << "# run options: the run file's key, the flag, the type, the default and the values taken\n";
  for (const RunOption& o : run_options()) {
    std::string def = o.required ? "required" : o.text(defaults);
    std::string flag = o.flag;
    out << pad(o.key, key_width) << "  " << pad(flag, flag_width) << "  " << pad(o.type_name(), 7) << "  "
        << pad(def, 9) << "  " << plain(o.values_text()) << "\n"
        << std::string(key_width + 2, ' ') << plain(o.rule);
    if (o.type == RunOptionType::kBool) out << " (the flag sets " << (o.flag_sets ? "true" : "false") << ")";
    out << "\n";
  }
}

void list_step_options(std::ostream& out) {
  std::size_t width = 0;
  for (const StepOption& o : step_options()) width = std::max(width, std::string(o.flag).size());
  out << "# whole-step options (--global-batch): the flag, the type, the values taken and the default\n";
  for (const StepOption& o : step_options()) {
    out << pad(o.flag, width) << "  " << pad(o.type_name(), 7) << "  " << plain(o.values_text()) << "; default "
        << plain(o.default_text) << "\n"
        << std::string(width + 2, ' ') << plain(o.rule) << "\n";
  }
}

}  // namespace

int run_options_command(const OptionsArgs& args, std::ostream& out) {
  if (!args.kind.empty() && args.kind != "run" && args.kind != "step")
    throw InputError("options: unknown kind '" + args.kind + "'; valid: run, step");
  const bool run = args.kind != "step", step = args.kind != "run";
  if (args.markdown) {
    if (run) out << run_options_markdown();
    if (run && step) out << "\n";
    if (step) out << step_options_markdown();
    return 0;
  }
  if (run) list_run_options(out);
  if (run && step) out << "\n";
  if (step) list_step_options(out);
  return 0;
}

}  // namespace moesim::cli
