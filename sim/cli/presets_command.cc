#include "sim/cli/presets_command.h"

#include <algorithm>
#include <ostream>
#include <vector>

#include "sim/core/error.h"
#include "sim/spec/presets.h"

namespace moesim::cli {
namespace {

constexpr PresetKind kKinds[] = {PresetKind::kModel, PresetKind::kCluster, PresetKind::kNode, PresetKind::kGpu};

std::string padded(const std::string& s, std::size_t width) {
  return s.size() >= width ? s + "  " : s + std::string(width - s.size() + 2, ' ');
}

void write_kind(std::ostream& out, const std::filesystem::path& root, PresetKind kind) {
  const std::vector<PresetInfo> list = list_presets(root, kind);
  std::size_t name_width = 4, size_width = 4;
  for (const PresetInfo& p : list) {
    name_width = std::max(name_width, p.name.size());
    size_width = std::max(size_width, p.size.size());
  }
  out << "# " << to_string(kind) << " (" << (root / (kind == PresetKind::kModel ? "models" : "hardware")).string()
      << ")\n";
  for (const PresetInfo& p : list) out << padded(p.name, name_width) << padded(p.size, size_width) << p.source << "\n";
}

}  // namespace

int run_presets(const PresetsArgs& args, std::ostream& out) {
  std::vector<PresetKind> kinds;
  for (PresetKind k : kKinds)
    if (args.kind.empty() || args.kind == to_string(k)) kinds.push_back(k);
  if (kinds.empty())
    throw InputError("presets: unknown kind '" + args.kind + "'; valid: models, clusters, nodes, gpus");
  const std::filesystem::path root = preset_root();
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    if (i > 0) out << "\n";
    write_kind(out, root, kinds[i]);
  }
  return 0;
}

}  // namespace moesim::cli
