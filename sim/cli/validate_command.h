// `moesim validate published`: every published measurement under validate/data/ (validate/published.h)
// replayed on moesim's models, per point and per dataset, with the accuracy goals and whether each
// dataset meets them (docs/validation.md). Goals not met are results, not errors: the exit code is 0.
#pragma once

#include <string>

namespace moesim::cli {

struct ValidatePublishedArgs {
  std::string data_dir;  // "" = validate/data here, else the one beside the presets
  std::string csv_path;  // one row per point ("-" for stdout)
  std::string network = "auto";
};

int run_validate_published(const ValidatePublishedArgs& args);

}  // namespace moesim::cli
