#include "sim/cli/options_command.h"

#include <algorithm>
#include <ostream>
#include <string>

#include "sim/spec/run_options.h"

namespace moesim::cli {

int run_options_command(const OptionsArgs& args, std::ostream& out) {
  if (args.markdown) {
    out << run_options_markdown();
    return 0;
  }
  const RunSpec defaults;
  std::size_t key_width = 0;
  std::size_t flag_width = 0;
  for (const RunOption& o : run_options()) {
    key_width = std::max(key_width, std::string(o.key).size());
    flag_width = std::max(flag_width, std::string(o.flag).size());
  }
  const auto pad = [](std::string s, std::size_t w) { return s + std::string(w - std::min(w, s.size()), ' '); };
  // Plain text: the documentation's Markdown quotes dropped.
  const auto plain = [](std::string s) {
    s.erase(std::remove(s.begin(), s.end(), '`'), s.end());
    return s;
  };
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
  return 0;
}

}  // namespace moesim::cli
