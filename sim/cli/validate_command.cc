#include "sim/cli/validate_command.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "sim/cli/network_flag.h"
#include "sim/cli/output_file.h"
#include "sim/core/error.h"
#include "sim/spec/presets.h"
#include "sim/spec/loader.h"
#include "validate/calibration_replay.h"
#include "validate/interference_replay.h"
#include "validate/layer_replay.h"
#include "validate/published_replay.h"
#include "validate/step_replay.h"

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

// The reports on stdout (per dataset, then the summary) unless --csv is "-", and --csv's rows.
template <typename Report, typename PrintOne, typename PrintSummary, typename WriteCsv>
int print_reports(const std::vector<Report>& reports, const std::string& csv_path, PrintOne print_one,
                  PrintSummary print_summary, WriteCsv write_csv) {
  if (csv_path != "-") {
    std::ostringstream text;
    for (const Report& r : reports) print_one(r, text);
    print_summary(reports, text);
    std::cout << text.str();
  }
  if (!csv_path.empty()) {
    std::ostringstream csv;
    write_csv(reports, csv);
    write_output("--csv", csv_path, csv.str());
  }
  return 0;
}

// One report on stdout unless --csv is "-", and --csv's rows.
template <typename Report, typename Print, typename WriteCsv>
int print_report(const Report& report, const std::string& csv_path, Print print, WriteCsv write_csv) {
  if (csv_path != "-") print(report, std::cout);
  if (!csv_path.empty()) {
    std::ostringstream csv;
    write_csv(report, csv);
    write_output("--csv", csv_path, csv.str());
  }
  return 0;
}

// The selected rows of every selected dataset, each prepared (validate/step_replay.h): all bad
// data is found before the first simulation.
struct SelectedSteps {
  std::vector<validate::StepDataset> datasets;
  std::vector<std::vector<validate::PreparedStepRow>> rows;
  std::size_t count = 0;
};

SelectedSteps select_steps(const std::filesystem::path& root, const validate::StepSelection& only) {
  std::vector<validate::StepDataset> all;
  std::vector<std::vector<validate::StepRow>> all_rows;
  for (const auto& dir : validate::dataset_dirs(root, validate::kStepSourceFile)) {
    all.push_back(validate::read_step_dataset(dir));
    all_rows.push_back(validate::read_step_rows(all.back()));
  }
  only.check_matched(all, all_rows);
  SelectedSteps s;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (!only.selects_dataset(all[i].name)) continue;
    s.datasets.push_back(all[i]);
    s.rows.emplace_back();
    for (const auto& row : all_rows[i])
      if (only.selects(all[i].name, row)) s.rows.back().push_back(validate::prepare_step_row(all[i], row));
    s.count += s.rows.back().size();
  }
  return s;
}

}  // namespace

int run_validate_steps(const ValidateStepsArgs& a) {
  const NetworkModel network = parse_network_flag(a.network);
  check_outputs({{"--csv", a.csv_path}});
  StepSpec flags;
  a.step.apply(flags);
  const SelectedSteps selected = select_steps(data_root(a.data_dir), validate::StepSelection::parse(a.only));
  std::vector<validate::StepDatasetReport> reports;
  std::size_t done = 0;
  for (std::size_t i = 0; i < selected.datasets.size(); ++i) {
    validate::StepDatasetReport r{selected.datasets[i], {}, {}, network};
    for (validate::PreparedStepRow row : selected.rows[i]) {
      row.spec.host_launch_ns = flags.host_launch_ns;
      const auto start = std::chrono::steady_clock::now();
      r.rows.push_back(validate::simulate_step_row(r.dataset, row, network));
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      char line[200];
      std::snprintf(line, sizeof line, "validate steps: [%zu/%zu] %s:%d %s, %d GPUs: %s, %.1f s\n", ++done, selected.count,
                    r.dataset.name.c_str(), row.comparison.row.line, row.comparison.row.model.c_str(),
                    row.comparison.row.gpus, r.rows.back().not_simulated.empty() ? "simulated" : "not simulated",
                    took.count());
      std::cerr << line << std::flush;
    }
    r.speedups = validate::pair_speedups(r.rows);
    reports.push_back(std::move(r));
  }
  if (flags.host_launch_ns && a.csv_path != "-")
    std::cout << "Host launches: " << a.step.text("--host-launch-us") << " us each (--host-launch-us; docs/training-step.md#host-launches)\n\n";
  return print_reports(reports, a.csv_path, validate::print_step_report, validate::print_step_summary,
                       validate::write_step_csv);
}

int run_validate_layers(const ValidateLayersArgs& a) {
  const NetworkModel network = parse_network_flag(a.network);
  std::vector<validate::StepDataset> datasets;
  for (const auto& dir : validate::dataset_dirs(data_root(a.data_dir), validate::kStepSourceFile)) {
    validate::StepDataset d = validate::read_step_dataset(dir);
    if (!d.layer_times.empty()) datasets.push_back(std::move(d));
  }
  // Every dataset is simulated before anything is printed: bad data leaves no half report.
  std::ostringstream text;
  for (const auto& d : datasets) validate::print_layer_report(validate::replay_layer_times(d, network), text);
  std::cout << text.str();
  return 0;
}

int run_validate_published(const ValidatePublishedArgs& a) {
  const NetworkModel network = parse_network_flag(a.network);
  check_outputs({{"--csv", a.csv_path}});
  // Every dataset is read and simulated before anything is printed: bad data leaves no half report.
  std::vector<validate::DatasetReport> reports;
  for (const auto& dir : validate::dataset_dirs(data_root(a.data_dir)))
    reports.push_back(validate::replay_dataset(validate::read_dataset_source(dir), network));
  return print_reports(reports, a.csv_path, validate::print_dataset_report, validate::print_goal_summary,
                       validate::write_csv);
}

int run_validate_calibration(const ValidateCalibrationArgs& a) {
  check_outputs({{"--csv", a.csv_path}});
  const CalibrationSpec calibration = load_calibration(a.calibration_path);
  const ClusterSpec datasheet = load_hardware_spec(resolve_hardware_arg(a.hardware_path, "--hardware"));
  return print_report(validate::replay_calibration_gemms(calibration, datasheet), a.csv_path,
                      validate::print_calibration_replay, validate::write_calibration_replay_csv);
}

int run_validate_interference(const ValidateInterferenceArgs& a) {
  check_outputs({{"--csv", a.csv_path}});
  const ClusterSpec node = load_hardware_spec(resolve_hardware_arg(a.hardware_path, "--hardware"));
  // Every file is read before anything is printed: bad data leaves no half report.
  std::vector<validate::ProbeShape> shapes;
  for (const std::string& path : a.probe_paths) {
    std::vector<validate::ProbeShape> more = validate::read_probe_shapes(path);
    shapes.insert(shapes.end(), more.begin(), more.end());
  }
  return print_report(validate::replay_interference(shapes, node), a.csv_path, validate::print_interference_replay,
                      validate::write_interference_replay_csv);
}

}  // namespace moesim::cli
