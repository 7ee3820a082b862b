// `moesim cost-models [network|compute]`: the cost-model registry (sim/driver/model_registry.h),
// one line per model with its kind, what it needs of the hardware and what it does; --network,
// --compute and the run and sweep files' network: and compute: keys take these names.
#pragma once

#include <iosfwd>
#include <string>

namespace moesim::cli {

struct CostModelsArgs {
  std::string kind;  // empty: every kind
};

int run_cost_models(const CostModelsArgs& args, std::ostream& out);

}  // namespace moesim::cli
