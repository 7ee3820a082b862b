#include "sim/cli/validate_command.h"

#include <filesystem>
#include <iostream>
#include <sstream>

#include "sim/cli/network_flag.h"
#include "sim/cli/output_file.h"
#include "sim/core/error.h"
#include "sim/spec/presets.h"
#include "validate/published_replay.h"

namespace moesim::cli {

namespace {

// The data as a reader in the checkout sees it, else as installed beside the presets.
std::filesystem::path data_root(const std::string& flag) {
  if (!flag.empty()) return flag;
  const std::filesystem::path here = "validate/data";
  std::error_code ec;
  if (std::filesystem::is_directory(here, ec)) return here;
  return preset_root() / "validate" / "data";
}

}  // namespace

int run_validate_published(const ValidatePublishedArgs& a) {
  const NetworkModel network = parse_network_flag(a.network);
  check_outputs({{"--csv", a.csv_path}});
  // Every dataset is read and simulated before anything is printed: bad data leaves no half report.
  std::vector<validate::DatasetReport> reports;
  for (const auto& dir : validate::dataset_dirs(data_root(a.data_dir)))
    reports.push_back(validate::replay_dataset(validate::read_dataset_source(dir), network));
  if (a.csv_path != "-") {
    std::ostringstream text;
    for (const auto& r : reports) validate::print_dataset_report(r, text);
    validate::print_goal_summary(reports, text);
    std::cout << text.str();
  }
  if (!a.csv_path.empty()) {
    std::ostringstream csv;
    validate::write_csv(reports, csv);
    write_output("--csv", a.csv_path, csv.str());
  }
  return 0;
}

}  // namespace moesim::cli
