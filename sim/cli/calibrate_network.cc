#include "sim/cli/calibrate_network.h"

#include <chrono>
#include <ctime>
#include <fstream>
#include <sstream>

#include "sim/cli/output_file.h"
#include "sim/core/error.h"
#include "sim/spec/loader.h"
#include "sim/spec/yaml_text.h"

namespace moesim::cli {

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

void write_checked_calibration(const std::string& out_path, const std::string& text, NodeSpec node,
                               const std::string& input) {
  PendingFile pending("--output", out_path, text);
  node.gpu.calibration.reset();  // the preset may name an older calibration of this GPU
  try {
    apply_calibration(node, load_calibration(pending.temp_path()));
  } catch (const InputError& e) {
    const std::string rejected = out_path + ".rejected";
    pending.keep_as(rejected);
    // The error's file:line points into the temporary file, which is now the rejected one.
    std::string why = e.what();
    for (std::size_t at = why.find(pending.temp_path()); at != std::string::npos; at = why.find(pending.temp_path()))
      why.replace(at, pending.temp_path().size(), rejected);
    if (!input.empty()) {
      throw InputError(SourceLocation{input, 0, 0},
                       "what this measurement gives is off the simulator's plausible ranges (kept as " + rejected +
                           "): " + why + "; check the measurement and that --hardware is its node");
    }
    throw InternalError("the calibration just written does not load back (kept as " + rejected + "): " + why +
                        " (a value outside the plausible range usually means a disturbed measurement; rerun)");
  }
  pending.commit();
}

void check_logged_gpu(const NcclTestsLog& log, const std::string& preset_gpu, bool force,
                      std::vector<std::string>& notes) {
  const auto mismatch = logged_gpu_mismatch(log, preset_gpu);
  if (!mismatch) return;
  if (!force)
    throw InputError(SourceLocation{log.file, mismatch->line, 1},
                     mismatch->what + "; give --hardware the preset of that GPU, or --force to fit this log anyway");
  notes.push_back(mismatch->what + "; fitted anyway (--force)");
}

std::string whole_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream whole;
  whole << in.rdbuf();
  std::string text = whole.str();
  if (!text.empty() && text.back() != '\n') text += '\n';
  return text;
}

std::string network_calibration_header(const std::string& name, const std::string& gpu, const std::string& source,
                                       const std::string& version, const std::string& command_line) {
  const std::string provenance = "moesim " + version + " calibrate, " + utc_now() + "; command: " + command_line;
  return "# Network calibration of " + name + " (" + gpu + "), from " + source + ".\n# " + provenance +
         "\nschema_version: 1\nkind: calibration\nname: " + yaml_quoted(name + " network calibration") +
         "\nsource: " + yaml_quoted(provenance) + "\ngpu: " + yaml_quoted(gpu) + "\ndevice: " + yaml_quoted(source) +
         "\n";
}

}  // namespace moesim::cli
