#include "sim/cli/compare_command.h"

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/cli/output_file.h"
#include "sim/core/error.h"
#include "validate/compare.h"

namespace moesim::cli {

namespace {

nlohmann::json read_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open the file");
  std::stringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
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
