#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "sim/report/report.h"

#include "sim/cost/gemm_calibration.h"
#include "sim/net/device_copy_cost.h"
#include "sim/report/spec_json.h"

namespace moesim {

const RankMemory* peak_memory_rank(const std::vector<RankMemory>& memory) {
  const RankMemory* best = nullptr;
  for (const RankMemory& m : memory)
    if (best == nullptr || m.peak_device_bytes > best->peak_device_bytes) best = &m;
  return best;
}

namespace {

// The fullest physical GPU: each rank's peak, summed over the virtual ranks of a loopback GPU.
template <typename RankPeaks, typename PeakOf>
std::int64_t fullest_device(const ClusterSpec& cluster, const RankPeaks& memory, PeakOf peak_of) {
  std::map<int, std::int64_t> by_device;
  for (const auto& m : memory) {
    std::int64_t& bytes = by_device[cluster.device_of(m.rank)];
    bytes = cluster.node.loopback ? bytes + peak_of(m) : std::max(bytes, peak_of(m));
  }
  std::int64_t worst = 0;
  for (const auto& [device, bytes] : by_device) worst = std::max(worst, bytes);
  return worst;
}

// The memory section: the simulated layers' peak and its breakdown, and the whole model's peak
// (model_memory.h), which decides `fits`.
nlohmann::ordered_json memory_json(const ReportInputs& in) {
  using nlohmann::ordered_json;
  const RankMemory* mem = in.graph.num_buffers() > 0 ? peak_memory_rank(in.memory) : nullptr;
  if (mem == nullptr) return {{"modelled", false}};  // the graph declares no buffers
  const std::int64_t capacity = in.cluster.node.gpu.hbm_capacity_bytes;
  const std::vector<ModelMemory> model = model_memory_of(in);
  const ModelMemory& whole = *peak_model_memory_rank(model);
  const std::int64_t device_bytes = device_peak_bytes(in.cluster, model);
  const auto cat = [&](MemoryCategory c) { return mem->at_peak_bytes[static_cast<int>(c)]; };
  ordered_json max_by = ordered_json::object();
  for (int c = 0; c < kNumMemoryCategories; ++c)
    max_by[std::string(to_string(static_cast<MemoryCategory>(c)))] = mem->max_bytes[c];
  ordered_json live = ordered_json::array();
  for (BufferId id : mem->live_at_peak) {
    const Buffer& b = in.graph.buffer(id);
    live.push_back({{"name", b.name}, {"bytes", b.bytes}, {"category", std::string(to_string(b.category))}});
  }
  ordered_json out = {{"modelled", true},
                      {"rank", mem->rank},
                      {"peak_bytes", mem->peak_device_bytes},
                      {"peak_time_us", ns_to_us(mem->peak_time_ns)},
                      {"model_states_bytes", cat(MemoryCategory::kModelStates)},
                      {"activations_bytes", cat(MemoryCategory::kActivations)},
                      {"temporary_bytes", cat(MemoryCategory::kTemporary)},
                      {"host_pinned_bytes", mem->peak_host_pinned_bytes},
                      {"whole_model",
                       {{"layers", whole.model_layers},
                        {"simulated_layers", whole.simulated_layers},
                        {"rank", whole.rank},
                        {"peak_bytes", whole.peak_bytes},
                        {"layer_model_states_bytes", whole.layer_model_state_bytes},
                        {"layer_kept_activations_bytes", whole.layer_kept_activation_bytes},
                        {"device_peak_bytes", device_bytes}}},
                      {"capacity_bytes", capacity},
                      {"fits", device_bytes <= capacity},
                      {"max_bytes_by_category", max_by},
                      {"live_at_peak", live}};
  if (in.cluster.node.loopback) {
    out["virtual_ranks"] = in.cluster.node.gpus_per_node;
    out["device_peak_bytes"] = device_peak_bytes(in.cluster, in.memory);
  }
  return out;
}


}  // namespace

std::int64_t device_peak_bytes(const ClusterSpec& cluster, const std::vector<RankMemory>& memory) {
  return fullest_device(cluster, memory, [](const RankMemory& m) { return m.peak_device_bytes; });
}

std::int64_t device_peak_bytes(const ClusterSpec& cluster, const std::vector<ModelMemory>& memory) {
  return fullest_device(cluster, memory, [](const ModelMemory& m) { return m.peak_bytes; });
}

const ModelMemory* peak_model_memory_rank(const std::vector<ModelMemory>& memory) {
  const ModelMemory* best = nullptr;
  for (const ModelMemory& m : memory)
    if (best == nullptr || m.peak_bytes > best->peak_bytes) best = &m;
  return best;
}

std::vector<ModelMemory> model_memory_of(const ReportInputs& in) {
  return model_memory(in.graph, in.memory, in.model.num_layers, in.run.num_moe_layers);
}

std::string report_json(const ReportInputs& in) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["schema_version"] = 1;
  j["tool"] = "moesim " + in.tool_version;
  j["config"] = config_json(in.model, in.cluster, in.run, in.dims);
  if (!in.network.empty()) j["network"] = in.network;
  if (in.cluster.node.gpu.calibration) {
    std::vector<std::string> warnings = calibration_range_warnings(in.graph, in.cluster.node.gpu);
    for (std::string& w : device_copy_range_warnings(in.graph, in.cluster)) warnings.push_back(std::move(w));
    j["warnings"] = warnings;
  }
  if (in.routing != nullptr) {
    const RoutingStats& r = *in.routing;
    j["routing"] = {{"routing", r.routing},
                    {"balanced", in.run.routing.balanced()},
                    {"expert_imbalance", r.expert_imbalance},
                    {"kept_expert_imbalance", r.kept_expert_imbalance},
                    {"rank_imbalance", r.rank_imbalance},
                    {"busiest_expert", r.busiest_expert},
                    {"busiest_rank", r.busiest_rank},
                    {"routed_choices", r.routed},
                    {"dropped_choices", r.dropped},
                    {"dropped_fraction", r.dropped_fraction()}};
  }
  const StepMetrics& m = in.metrics;
  j["critical_rank"] = m.rank;
  j["step_time_us"] = ns_to_us(m.step_ns);
  j["forward_us"] = ns_to_us(m.forward_ns);
  j["backward_us"] = ns_to_us(m.backward_ns);
  j["totals"] = {{"compute_busy_us", ns_to_us(m.compute_busy_ns)},
                 {"comm_busy_us", ns_to_us(m.comm_busy_ns)},
                 {"copy_busy_us", ns_to_us(m.copy_busy_ns)},
                 {"overlap_us", ns_to_us(m.overlap_ns)},
                 {"overlap_fraction", m.overlap_fraction},
                 {"sum_task_us", ns_to_us(m.sum_task_ns)}};
  ordered_json stages = ordered_json::object();
  for (const std::string& key : m.stage_order) {
    const StageMetrics& s = m.stages.at(key);
    stages[key] = {{"busy_us", ns_to_us(s.busy_ns)},
                   {"exposed_us", ns_to_us(s.exposed_ns)},
                   {"tasks", s.num_tasks}};
  }
  j["stages"] = std::move(stages);

  j["memory"] = memory_json(in);

  ordered_json tasks = ordered_json::array();
  for (TaskIndex i = 0; i < in.graph.num_tasks(); ++i) {
    const Task& t = in.graph.task(i);
    const TaskRecord& r = in.trace.records[i];
    for (int rank : in.graph.ranks_of(i)) {
      tasks.push_back({{"id", t.id},
                       {"rank", rank},
                       {"stream", std::string(to_string(t.stream))},
                       {"kind", std::string(to_string(t.kind()))},
                       {"stage", t.stage},
                       {"pass", std::string(to_string(t.pass))},
                       {"chunk", t.chunk},
                       {"ready_us", ns_to_us(r.ready_ns)},
                       {"start_us", ns_to_us(r.start_ns)},
                       {"end_us", ns_to_us(r.end_ns)}});
    }
  }
  j["tasks"] = std::move(tasks);
  return j.dump(2) + "\n";
}

}  // namespace moesim
