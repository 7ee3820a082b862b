#include "sim/report/spec_json.h"

#include "sim/spec/run_options.h"

namespace moesim {
namespace {

using nlohmann::ordered_json;

ordered_json link_json(const LinkSpec& l) {
  return {{"bandwidth_bytes_per_s", l.bandwidth},
          {"efficiency", l.efficiency},
          {"effective_bandwidth_bytes_per_s", l.effective_bandwidth()},
          {"latency_ns", l.latency_ns}};
}

ordered_json calibration_json(const std::optional<GpuCalibration>& c) {
  if (!c) return nullptr;
  ordered_json tables = ordered_json::object();
  for (const auto& [dtype, t] : c->gemm) {
    tables[std::string(to_string(dtype))] = {{"m", t.m}, {"n", t.n}, {"k", t.k}};
  }
  return {{"file", c->file}, {"device", c->device}, {"gemm_tables", tables}};
}

ordered_json gpu_json(const GpuSpec& g) {
  ordered_json peaks = ordered_json::object();
  for (const auto& [dtype, flops] : g.peak_flops) peaks[std::string(to_string(dtype))] = flops;
  // Every dtype the GPU computes, with the tile and efficiency its GEMMs use (defaults included).
  ordered_json tiles = ordered_json::object();
  ordered_json effs = ordered_json::object();
  for (const auto& [dtype, flops] : g.peak_flops) {
    const GemmTile t = g.gemm_tile_for(dtype);
    tiles[std::string(to_string(dtype))] = {t.m, t.n};
    effs[std::string(to_string(dtype))] = g.gemm_efficiency_for(dtype);
  }
  return {{"name", g.name},
          {"file", g.origin.file},
          {"peak_flops", peaks},
          {"hbm_bandwidth_bytes_per_s", g.hbm_bandwidth},
          {"hbm_efficiency", g.hbm_efficiency},
          {"hbm_capacity_bytes", g.hbm_capacity_bytes},
          {"kernel_launch_ns", g.kernel_launch_ns},
          {"sm_count", g.sm_count},
          {"gemm_tile", tiles},
          {"gemm_efficiency", effs},
          {"gemm_tile_overhead_ns", g.gemm_tile_overhead_ns},
          {"calibration", calibration_json(g.calibration)}};
}

ordered_json interference_json(const InterferenceTable& t) {
  static constexpr const char* kRows[] = {"communication", "computation", "memcpy"};
  ordered_json j = ordered_json::object();
  for (int r = 0; r < kNumInterferenceClasses; ++r) {
    j[kRows[r]] = {{"with_communication", t.factors[r][0]},
                   {"with_computation", t.factors[r][1]},
                   {"with_memcpy", t.factors[r][2]},
                   {"with_all", t.factors[r][3]}};
  }
  if (!t.gemm_with_communication.empty()) {
    ordered_json rows = ordered_json::array();
    for (const GemmInterferencePoint& p : t.gemm_with_communication) rows.push_back({p.outputs_per_sm, p.factor});
    j["gemm_with_communication"] = rows;
  }
  return j;
}

}  // namespace

ordered_json config_json(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run,
                         const LayerDims& dims) {
  ordered_json j;
  j["model"] = {{"name", model.name},
                {"file", model.origin.file},
                {"d_model", model.d_model},
                {"d_ffn", model.d_ffn},
                {"num_experts", model.num_experts},
                {"top_k", model.top_k},
                {"capacity_factor", model.capacity_factor},
                {"dtype", std::string(to_string(model.dtype))},
                {"gemm_precision", std::string(to_string(model.gemm_dtype))},
                {"activation", std::string(to_string(model.activation))},
                {"num_layers", model.num_layers},
                {"shared_experts",
                 {{"count", model.shared_experts.count}, {"d_ffn", model.shared_experts.d_ffn}}}};
  const NodeSpec& node = cluster.node;
  j["hardware"] = {{"name", cluster.name},
                   {"file", cluster.origin.file},
                   {"num_nodes", cluster.num_nodes},
                   {"num_gpus", cluster.num_gpus()},
                   {"inter_node", link_json(cluster.inter_node)},
                   {"node",
                    {{"name", node.name},
                     {"gpus_per_node", node.gpus_per_node},
                     {"loopback", node.loopback},
                     {"intra_node", link_json(node.intra_node)},
                     {"pcie_h2d", link_json(node.pcie_h2d)},
                     {"pcie_d2h", link_json(node.pcie_d2h)},
                     {"copy_engines", node.copy_engines},
                     {"host_memory", link_json(node.host_memory)},
                     {"interference", interference_json(node.interference)},
                     {"gpu", gpu_json(node.gpu)}}}};
  // Every run option by its run-file key (sim/spec/run_options.h), with the expert-parallel and
  // tensor-parallel layout as resolved (ep_size 0 becomes the group's size).
  RunSpec resolved = run;
  resolved.ep_size = dims.ep_size;
  resolved.tp_size = dims.tp_size;
  resolved.drop_duplicate_tokens = dims.drop_duplicate_tokens;
  ordered_json echo = ordered_json::object();
  for (const RunOption& o : run_options()) {
    const std::string text = o.text(resolved);
    if (o.type == RunOptionType::kInteger) echo[o.key] = std::stoll(text);
    else if (o.type == RunOptionType::kBool) echo[o.key] = text == "true";
    else echo[o.key] = text;
  }
  j["run"] = echo;
  j["derived"] = {{"local_experts", dims.local_experts},
                  {"dp_size", dims.dp_size},
                  {"global_tokens", static_cast<std::int64_t>(cluster.num_gpus() / dims.tp_size) * dims.tokens},
                  {"layout", dims.layout().describe()},
                  {"capacity_per_expert", dims.capacity},
                  {"chunk_capacities", dims.chunk_capacities()},
                  {"rows_per_chunk", dims.rows_per_chunk()},
                  {"rows_per_expert_chunk", dims.rows_per_expert_chunk()},
                  {"a2a_bytes_per_peer", dims.a2a_bytes_per_peer()},
                  {"element_bytes", dims.element_bytes},
                  {"gemm_dtype", std::string(to_string(dims.gemm_dtype))}};
  return j;
}

}  // namespace moesim
