#include "sim/cli/compare_command.h"

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/cli/output_file.h"
#include "sim/core/error.h"
#include "sim/core/input_file.h"
#include "validate/compare.h"

namespace moesim::cli {

namespace {

nlohmann::json read_report(const std::string& path) {
  // A regular file of at most 1 GiB (a FIFO or /dev/zero would be read without end).
  const std::string text = read_input_file(path, std::uintmax_t{1} << 30, "report");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(path + ": not JSON: " + e.what());
  }
}

}  // namespace

int run_compare(const CompareArgs& a) {
  check_outputs({{"--csv", a.csv_path}, {"--json", a.json_path}});
  const validate::Comparison c = validate::compare_reports(read_report(a.reference_path), a.reference_path,
                                                           read_report(a.predicted_path), a.predicted_path);
  if (a.csv_path != "-" && a.json_path != "-") std::cout << validate::comparison_text(c, a.worst);
  if (!a.csv_path.empty()) write_output("--csv", a.csv_path, validate::comparison_csv(c));
  if (!a.json_path.empty()) write_output("--json", a.json_path, validate::comparison_json(c));
  return 0;
}

}  // namespace moesim::cli
