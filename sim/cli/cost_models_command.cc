#include "sim/cli/cost_models_command.h"

#include <algorithm>
#include <ostream>
#include <vector>

#include "sim/core/error.h"
#include "sim/driver/model_registry.h"

namespace moesim::cli {
namespace {

std::string padded(std::string_view s, std::size_t width) {
  return std::string(s) + std::string(width - std::min(width, s.size()) + 2, ' ');
}

}  // namespace

int run_cost_models(const CostModelsArgs& args, std::ostream& out) {
  std::vector<const CostModelEntry*> shown;
  for (const CostModelEntry& e : cost_models())
    if (args.kind.empty() || args.kind == to_string(e.kind)) shown.push_back(&e);
  if (shown.empty())
    throw InputError("cost-models: unknown kind '" + args.kind + "'; valid: network, compute");
  // Columns as wide as their longest entry, so that the table reads in a terminal.
  std::size_t name = 4, kind = 4, needs = 5;
  for (const CostModelEntry* e : shown) {
    name = std::max(name, e->name.size());
    kind = std::max(kind, to_string(e->kind).size());
    needs = std::max(needs, e->needs.size());
  }
  out << padded("name", name) << padded("kind", kind) << padded("needs", needs) << "description\n";
  for (const CostModelEntry* e : shown)
    out << padded(e->name, name) << padded(to_string(e->kind), kind) << padded(e->needs, needs) << e->description
        << "\n";
  return 0;
}

}  // namespace moesim::cli
