#include "sim/spec/presets.h"

#include <algorithm>
#include <cstdlib>
#include <system_error>

#include "sim/core/error.h"
#include "sim/core/program_folder.h"
#include "sim/core/units.h"
#include "sim/spec/loader.h"
#include "sim/spec/model_parameters.h"
#include "sim/spec/yaml_reader.h"

namespace moesim {
namespace fs = std::filesystem;
namespace {

constexpr PresetKind kHardwareOrder[] = {PresetKind::kCluster, PresetKind::kNode, PresetKind::kGpu};

fs::path folder_of(const fs::path& root, PresetKind kind) {
  return kind == PresetKind::kModel ? root / "models" : root / "hardware" / std::string(to_string(kind));
}

bool holds_presets(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(dir / "models", ec) && fs::is_directory(dir / "hardware", ec);
}

std::vector<fs::path> yaml_files(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file(ec) && entry.path().extension() == ".yaml") out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string fixed1(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string size_of(PresetKind kind, const std::string& path) {
  if (kind == PresetKind::kModel) {
    const ModelSpec m = load_model_spec(path);
    std::string s = m.has_moe_layers() ? std::to_string(m.num_experts) + " experts top-" + std::to_string(m.top_k)
                                       : std::string("dense");
    s += ", d_model " + std::to_string(m.d_model) + ", " + std::to_string(m.num_layers) + " layers";
    if (m.shared_experts.count > 0) s += ", " + std::to_string(m.shared_experts.count) + " shared";
    if (m.architecture.present)
      s += ", " + fixed1(static_cast<double>(count_parameters(m).total()) / 1e9) + "B parameters";
    return s;
  }
  const ClusterSpec c = load_hardware_spec(path);
  const std::string gpu = c.node.gpu.name + " " + fixed1(static_cast<double>(c.node.gpu.hbm_capacity_bytes) / kGiB) +
                          " GiB";
  if (kind == PresetKind::kGpu) return gpu;
  if (kind == PresetKind::kNode) return std::to_string(c.node.gpus_per_node) + " x " + gpu;
  return std::to_string(c.num_nodes) + " nodes x " + std::to_string(c.node.gpus_per_node) + " = " +
         std::to_string(c.num_gpus()) + " x " + gpu;
}

std::string scalar_or_empty(const YamlValue& doc, const char* key) {
  if (!doc.is_map() || !doc.node()[key] || !doc.node()[key].IsScalar()) return "";
  return doc.node()[key].as<std::string>();
}

// The bundled presets' names of the kinds, for "did you mean".
std::string closest(const std::string& arg, std::initializer_list<PresetKind> kinds) {
  std::vector<std::pair<int, std::string>> scored;
  const fs::path root = preset_root();
  for (PresetKind k : kinds)
    for (const fs::path& p : yaml_files(folder_of(root, k))) scored.emplace_back(edit_distance(arg, p.stem().string()), p.stem().string());
  std::sort(scored.begin(), scored.end());
  std::string out;
  for (std::size_t i = 0; i < scored.size() && i < 3; ++i) out += (i ? ", " : "") + scored[i].second;
  return out;
}

std::string missing(const std::string& flag, const std::string& arg, const char* what,
                    std::initializer_list<PresetKind> kinds, const char* list_command) {
  return flag + " '" + arg + "' is neither a file nor the name of a bundled " + what + "; closest: " +
         closest(arg, kinds) + " (`moesim presets " + list_command + "` lists them)";
}

}  // namespace

std::string_view to_string(PresetKind k) {
  switch (k) {
    case PresetKind::kModel: return "models";
    case PresetKind::kGpu: return "gpus";
    case PresetKind::kNode: return "nodes";
    case PresetKind::kCluster: return "clusters";
  }
  return "?";
}

fs::path preset_root() {
  std::vector<fs::path> tried;
  if (const char* env = std::getenv("MOESIM_DATA_DIR"); env != nullptr && *env != '\0') {
    if (holds_presets(env)) return env;
    throw InputError("MOESIM_DATA_DIR=" + std::string(env) + " holds no models/ and hardware/ folders");
  }
  if (const fs::path bin = program_folder(); !bin.empty()) {
    tried.push_back(bin.parent_path() / "share" / "moesim");
    if (holds_presets(tried.back())) return tried.back();
  }
  tried.emplace_back(MOESIM_SOURCE_DIR);
  if (holds_presets(tried.back())) return tried.back();
  std::string places;
  for (const fs::path& p : tried) places += (places.empty() ? "" : ", ") + p.string();
  throw InputError("the bundled presets are not found (tried " + places + "); set MOESIM_DATA_DIR to the folder "
                   "holding models/ and hardware/");
}

std::vector<PresetInfo> list_presets(const fs::path& root, PresetKind kind) {
  std::vector<PresetInfo> out;
  for (const fs::path& p : yaml_files(folder_of(root, kind))) {
    PresetInfo info;
    info.kind = kind;
    info.name = p.stem().string();
    info.path = p.string();
    const YamlValue doc = parse_yaml_file(info.path);
    info.title = scalar_or_empty(doc, "name");
    info.source = scalar_or_empty(doc, "source");
    info.size = size_of(kind, info.path);
    out.push_back(std::move(info));
  }
  return out;
}

std::string resolve_model_arg(const std::string& arg, const std::string& flag) {
  std::error_code ec;
  if (arg.empty() || fs::exists(arg, ec) || arg.find('/') != std::string::npos || arg.ends_with(".yaml"))
    return arg;  // a path: the loader names it if it cannot be read
  const fs::path p = folder_of(preset_root(), PresetKind::kModel) / (arg + ".yaml");
  if (fs::is_regular_file(p, ec)) return p.string();
  throw InputError(missing(flag, arg, "model", {PresetKind::kModel}, "models"));
}

std::string resolve_hardware_arg(const std::string& arg, const std::string& flag) {
  std::error_code ec;
  if (arg.empty() || fs::exists(arg, ec) || arg.find('/') != std::string::npos || arg.ends_with(".yaml"))
    return arg;
  const fs::path root = preset_root();
  std::vector<fs::path> found;
  for (PresetKind k : kHardwareOrder) {
    const fs::path p = folder_of(root, k) / (arg + ".yaml");
    if (fs::is_regular_file(p, ec)) found.push_back(p);
  }
  if (found.size() == 1) return found.front().string();
  if (found.empty())
    throw InputError(missing(flag, arg, "cluster, node or GPU", {PresetKind::kCluster, PresetKind::kNode, PresetKind::kGpu},
                             "clusters|nodes|gpus"));
  std::string all;
  for (const fs::path& p : found) all += (all.empty() ? "" : ", ") + p.string();
  throw InputError(flag + " '" + arg + "' names more than one bundled preset (" + all + "); give the file");
}

}  // namespace moesim
