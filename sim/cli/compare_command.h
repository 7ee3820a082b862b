// `moesim compare REFERENCE.json PREDICTED.json`: the validator (validate/compare.h) on two step
// reports, normally `moesim run --json` (measured) and `moesim simulate --all-ranks --json` of
// the same configuration. The options are registered in main.cc.
#pragma once

#include <string>

namespace moesim::cli {

struct CompareArgs {
  std::string reference_path;
  std::string predicted_path;
  std::string csv_path;   // per-task rows
  std::string json_path;  // the whole comparison
  int worst = 10;         // tasks listed in the summary
};

int run_compare(const CompareArgs& args);

}  // namespace moesim::cli
