// Loading sweep files (kind: sweep): the axes of a grid of simulations (docs/planning.md).
#include <filesystem>
#include <string>

#include "sim/spec/file_kind.h"
#include "sim/spec/run_options.h"
#include "sim/spec/run_spec.h"
#include "sim/spec/sweep_spec.h"
#include "sim/spec/yaml_reader.h"

namespace moesim {
namespace {

namespace fs = std::filesystem;

// A non-empty list under `key`, each element read with `read`.
template <typename T, typename Read>
SweepAxis<T> read_axis(const YamlMap& m, const char* key, Read read) {
  SweepAxis<T> axis;
  const YamlValue v = m.require(key);
  axis.where = v.location();
  for (const YamlValue& item : v.as_sequence()) axis.values.push_back(read(item));
  if (axis.values.empty()) v.fail(std::string("the axis '") + key + "' is empty; give at least one value");
  return axis;
}

// An axis element read as the run option `key` reads a run file's value (its range or values),
// then taken from the run it set.
template <typename T>
auto option_value(const char* key, T RunSpec::*field, const std::string& base_dir) {
  return [key, field, base_dir](const YamlValue& v) {
    RunSpec run;
    run_option(key).read(run, v, base_dir);
    return run.*field;
  };
}

SweepSpec read_sweep_file(const YamlValue& root) {
  check_file_kind(root, {"sweep"}, "--grid");
  std::vector<std::string> keys{"schema_version", "kind", "name",   "source",     "models",     "hardware",
                                "gpus",           "tokens", "global_tokens", "tp", "chunks", "strategies", "routing",
                                "step_target"};
  keys.insert(keys.end(), sweep_fixed_keys().begin(), sweep_fixed_keys().end());
  const YamlMap m = root.as_map(keys);
  check_header(m, "sweep", true, true);
  SweepSpec spec;
  spec.origin = origin_of(m);
  if (auto n = m.get("name")) spec.name = n->as_name();
  const fs::path base = fs::path(root.file()).parent_path();
  const auto file_ref = [&](const char* what) {
    return [&base, what](const YamlValue& v) {
      const std::string rel = v.as_name();
      const fs::path p = (fs::path(rel).is_absolute() ? fs::path(rel) : base / rel).lexically_normal();
      std::error_code ec;
      if (!fs::exists(p, ec)) v.fail(std::string("cannot open ") + what + " file '" + p.string() + "': no such file");
      return p.string();
    };
  };
  spec.models = read_axis<std::string>(m, "models", file_ref("model"));
  spec.hardware = read_axis<std::string>(m, "hardware", file_ref("hardware"));
  if (m.has("gpus")) {
    spec.gpus = read_axis<int>(m, "gpus", [](const YamlValue& v) { return static_cast<int>(v.as_int(1, kMaxGroupSize)); });
  }
  // One token axis, per GPU or global: both keys would leave it ambiguous which one the grid means.
  if (m.has("tokens") && m.has("global_tokens"))
    m.require("global_tokens").fail("give either tokens (per GPU) or global_tokens (per step of the whole "
                                    "cluster), not both");
  if (!m.has("tokens") && !m.has("global_tokens"))
    m.fail("missing required key 'tokens' (tokens per GPU) or 'global_tokens' (tokens per step of the whole "
           "cluster)");
  if (m.has("global_tokens")) spec.token_unit = TokenUnit::kGlobal;
  spec.tokens = read_axis<std::int64_t>(m, spec.token_key(),
                                        option_value("tokens_per_gpu", &RunSpec::tokens_per_gpu, base.string()));
  if (m.has("tp")) {
    spec.tp = read_axis<int>(m, "tp", option_value("tp_size", &RunSpec::tp_size, base.string()));
  }
  spec.chunks = read_axis<int>(m, "chunks", option_value("num_chunks", &RunSpec::num_chunks, base.string()));
  spec.strategies =
      read_axis<MemoryStrategy>(m, "strategies", option_value("strategy", &RunSpec::strategy, base.string()));
  if (m.has("routing")) {
    spec.routing = read_axis<std::string>(m, "routing", [&base](const YamlValue& v) {
      const std::string r = v.as_name();
      const RoutingSpec parsed = parse_routing_spec(r, v.location(), base.string());
      std::error_code ec;
      if (parsed.kind == RoutingKind::kMatrix && !fs::exists(parsed.matrix_path, ec))
        v.fail("cannot open routing matrix file '" + parsed.matrix_path + "': no such file");
      return r;
    });
  } else {
    spec.routing.values = {"uniform"};
    spec.routing.where = spec.origin;
  }
  for (const std::string& key : sweep_fixed_keys())
    if (auto v = m.get(key)) run_option(key).read(spec.fixed, *v, base.string());
  if (auto v = m.get("step_target")) spec.step_target_ns = v->as_time(std::int64_t{1} << 50);
  return spec;
}

}  // namespace

const std::vector<std::string>& sweep_fixed_keys() {
  static const std::vector<std::string> keys{"order",          "network",   "compute",         "num_moe_layers",
                                             "slots",          "chunk_alignment", "optimizer", "routing_data",
                                             "drop_duplicate_tokens", "grad_sync", "zero_stage", "checkpoint"};
  return keys;
}

std::vector<RoutingSpec> SweepSpec::routing_specs() const {
  const std::string base = routing.where.file.empty() ? "" : fs::path(routing.where.file).parent_path().string();
  std::vector<RoutingSpec> out;
  for (const std::string& r : routing.values) out.push_back(parse_routing_spec(r, routing.where, base));
  return out;
}

SweepSpec load_sweep_spec(const std::string& path) { return read_sweep_file(parse_yaml_file(path)); }
SweepSpec parse_sweep_spec(const std::string& text, const std::string& file) {
  return read_sweep_file(parse_yaml_text(text, file));
}

}  // namespace moesim
