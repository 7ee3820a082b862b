#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "sim/report/plan_report.h"
#include "sim/report/report.h"

#include "sim/cost/gemm_calibration.h"
#include "sim/net/device_copy_cost.h"

namespace moesim {
namespace {

std::string virtual_ranks(int n) { return std::to_string(n) + (n == 1 ? " virtual rank" : " virtual ranks"); }

std::string fixed(double v, int precision) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", precision, v);
  return buf;
}

std::string pad_left(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

std::string pad_right(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string bandwidth_text(double bytes_per_s) { return fixed(bytes_per_s / 1e9, 1) + " GB/s"; }

std::string gib(std::int64_t bytes) { return fixed(static_cast<double>(bytes) / kGiB, 3) + " GiB"; }

// Uneven chunk sizes take two values (sim/build/layer_dims.h): "3 x 26 + 5 x 25".
std::string chunk_sizes_text(const std::vector<std::int64_t>& sizes) {
  std::string text;
  for (std::size_t i = 0; i < sizes.size();) {
    std::size_t j = i;
    while (j < sizes.size() && sizes[j] == sizes[i]) ++j;
    text += (text.empty() ? "" : " + ") + std::to_string(j - i) + " x " + std::to_string(sizes[i]);
    i = j;
  }
  return text;
}

std::string layers_text(int n) { return std::to_string(n) + (n == 1 ? " layer" : " layers"); }

// The memory block: the simulated layers' peak and its breakdown, then the whole model's peak
// (model_memory.h) against the GPU's capacity.
void write_memory(std::ostream& out, const ReportInputs& in) {
  const ClusterSpec& cl = in.cluster;
  const RankMemory* mem = in.graph.num_buffers() > 0 ? peak_memory_rank(in.memory) : nullptr;
  if (mem == nullptr) {
    out << "memory              not modelled: the graph declares no buffers\n\n";
    return;
  }
  const std::int64_t capacity = cl.node.gpu.hbm_capacity_bytes;
  out << pad_right("memory peak", 20) << pad_left(gib(mem->peak_device_bytes), 18) << "  (rank " << mem->rank
      << ", at " << fixed(ns_to_us(mem->peak_time_ns), 3) << " us; " << in.run.num_moe_layers << " of "
      << layers_text(in.model.num_layers) << " simulated)\n";
  if (cl.node.loopback)
    out << pad_right("  one GPU holds", 20) << pad_left(gib(device_peak_bytes(cl, in.memory)), 18)
        << "  (the peaks of its " << virtual_ranks(cl.node.gpus_per_node) << ")\n";
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    const auto category = static_cast<MemoryCategory>(c);
    const std::int64_t bytes =
        category == MemoryCategory::kHostPinned ? mem->peak_host_pinned_bytes : mem->at_peak_bytes[c];
    const std::string label =
        category == MemoryCategory::kHostPinned ? "host pinned (peak)" : std::string(to_string(category));
    out << pad_right("  " + label, 20) << pad_left(gib(bytes), 18) << "\n";
  }
  const std::vector<ModelMemory> model = model_memory_of(in);
  const ModelMemory& whole = *peak_model_memory_rank(model);
  const std::int64_t device = device_peak_bytes(cl, model);
  out << pad_right("whole model", 20) << pad_left(gib(whole.peak_bytes), 18) << "  (rank " << whole.rank << ", "
      << layers_text(whole.model_layers);
  if (whole.layers_not_simulated() > 0)
    out << ": + " << whole.layers_not_simulated() << " x (" << gib(whole.layer_model_state_bytes)
        << " model states + " << gib(whole.layer_kept_activation_bytes) << " activations kept for backward)";
  out << ")";
  if (cl.node.loopback)
    out << "\n" << pad_right("  one GPU holds", 20) << pad_left(gib(device), 18) << "  (the whole-model peaks of its "
        << virtual_ranks(cl.node.gpus_per_node) << ")";
  if (device <= capacity) {
    out << ": fits in " << gib(capacity) << "\n\n";
  } else {
    out << ": does not fit: needs " << gib(device) << " of " << gib(capacity) << "\n\n";
  }
}

void write_model_line(std::ostream& out, const ModelSpec& model) {
  out << "# model     " << model.name << " (" << model.origin.file << "): M=" << model.d_model
      << " H=" << model.d_ffn << " E=" << model.num_experts << " top-" << model.top_k
      << " f=" << fixed(model.capacity_factor, 2) << " " << to_string(model.dtype) << " (GEMMs "
      << to_string(model.gemm_dtype) << ")";
  if (model.shared_experts.count > 0)
    out << " +" << model.shared_experts.count << " shared expert(s) H=" << model.shared_experts.d_ffn;
  out << "\n";
}

void write_hardware_line(std::ostream& out, const ClusterSpec& cl) {
  out << "# hardware  " << cl.name << " (" << cl.origin.file << "): ";
  if (cl.node.loopback) {
    out << virtual_ranks(cl.node.gpus_per_node) << " on one " << cl.node.gpu.name
        << " (loopback: shared compute, all-to-all as device copies)";
  } else {
    out << cl.num_nodes << " node(s) x " << cl.node.gpus_per_node << " " << cl.node.gpu.name << "; intra-node "
        << bandwidth_text(cl.node.intra_node.effective_bandwidth());
  }
  if (cl.num_nodes > 1) out << ", inter-node " << bandwidth_text(cl.inter_node.effective_bandwidth()) << " per GPU";
  out << "\n";
}

// The calibration file the GPU's costs come from, if any, and where the graph leaves its range.
void write_calibration_lines(std::ostream& out, const ReportInputs& in) {
  const auto& cal = in.cluster.node.gpu.calibration;
  if (!cal) return;
  out << "# calibrated " << cal->file << " (measured on " << (cal->device.empty() ? "an unnamed device" : cal->device)
      << "); GEMM tables:";
  for (const auto& [dtype, table] : cal->gemm) out << " " << to_string(dtype);
  if (cal->gemm.empty()) out << " none (the tile and wave model)";
  out << "\n";
  for (const std::string& w : calibration_range_warnings(in.graph, in.cluster.node.gpu))
    out << "# warning   " << w << "\n";
  for (const std::string& w : device_copy_range_warnings(in.graph, in.cluster)) out << "# warning   " << w << "\n";
}

void write_routing_line(std::ostream& out, const ReportInputs& in) {
  if (in.routing == nullptr) return;
  const RoutingStats& r = *in.routing;
  out << "# routing   " << r.routing
      << (in.run.routing.balanced() ? " (every expert padded to capacity C)" : " (all-to-allv of the routed rows)")
      << ": tokens per expert max/mean " << fixed(r.expert_imbalance, 2) << " (expert " << r.busiest_expert
      << "), after capacity " << fixed(r.kept_expert_imbalance, 2) << "; rows per rank max/mean "
      << fixed(r.rank_imbalance, 2) << " (rank " << r.busiest_rank << "); dropped "
      << fixed(100.0 * r.dropped_fraction(), 2) << "% of " << r.routed << " choices\n";
}

// The run, its layout and network, calibration, routing and derived shapes: the "# ..." lines.
void write_header(std::ostream& out, const ReportInputs& in) {
  const LayerDims& d = in.dims;
  out << "# moesim " << in.tool_version << " simulate\n";
  write_model_line(out, in.model);
  write_hardware_line(out, in.cluster);
  out << "# run       B=" << in.run.tokens_per_gpu << " tokens/GPU, EP=" << d.ep_size << " ("
      << d.local_experts << " local expert(s)), n=" << d.num_chunks << " chunks, order="
      << to_string(in.run.order) << ", MoE layers=" << in.run.num_moe_layers << "\n";
  if (layout_line_wanted(d.tp_size, in.run.grad_sync, in.run.zero_stage)) {
    out << "# layout    "
        << layout_text(d.layout(), d.drop_duplicate_tokens, in.run.grad_sync, in.run.zero_stage, d.tokens) << "\n";
  }
  if (!in.network.empty()) out << "# network   " << in.network << "\n";
  write_calibration_lines(out, in);
  write_routing_line(out, in);
  out << "# derived   capacity C=" << d.capacity << " rows/expert/rank";
  if (!d.even_chunks()) out << " in chunks of " << chunk_sizes_text(d.chunk_capacities());
  out << ", " << d.rows_per_chunk() << " rows/chunk, all-to-all " << d.a2a_bytes_per_peer() << " B per peer per chunk";
  if (!d.even_chunks()) out << " (the largest chunk)";
  out << "\n";
  out << "# figures   rank " << in.metrics.rank
      << (in.graph.simulated_ranks().size() == 1 ? " (representative: routing is balanced)"
                                                  : " (the slowest of the simulated ranks)")
      << "\n";
}

void write_memory_options_line(std::ostream& out, const RunSpec& run) {
  out << "# memory    strategy=" << to_string(run.strategy);
  if (run.checkpoint != ActivationCheckpointing::kNone)
    out << " checkpoint=" << to_string(run.checkpoint)
        << (run.checkpoint == ActivationCheckpointing::kFull ? " (each layer's forward re-run before its backward)"
                                                             : " (re-run from the all-to-alls' stashed outputs)");
  if (run.strategy != MemoryStrategy::kNone) out << " slots=" << run.slots;
  out << " optimizer=" << to_string(run.optimizer)
      << " routing data " << (run.count_routing_data ? "counted" : "not counted") << "\n";
}

void write_step_times(std::ostream& out, const StepMetrics& m) {
  const auto line = [&](const std::string& label, TimeNs ns) {
    out << pad_right(label, 20) << pad_left(fixed(ns_to_us(ns), 3), 14) << " us\n";
  };
  line("step time", m.step_ns);
  line("  forward", m.forward_ns);
  line("  backward", m.backward_ns);
  line("compute busy", m.compute_busy_ns);
  line("comm busy", m.comm_busy_ns);
  if (m.copy_busy_ns > 0) line("copy busy", m.copy_busy_ns);
  out << pad_right("overlap achieved", 20)
      << pad_left(fixed(100.0 * m.overlap_fraction, 1), 14)
      << " %  of min(compute, comm) hidden\n\n";
}

void write_stage_table(std::ostream& out, const StepMetrics& m) {
  out << pad_right("stage", 20) << pad_left("busy_us", 14) << pad_left("exposed_us", 14)
      << pad_left("tasks", 8) << "\n";
  for (const std::string& key : m.stage_order) {
    const StageMetrics& s = m.stages.at(key);
    out << pad_right(key, 20) << pad_left(fixed(ns_to_us(s.busy_ns), 3), 14)
        << pad_left(fixed(ns_to_us(s.exposed_ns), 3), 14) << pad_left(std::to_string(s.num_tasks), 8)
        << "\n";
  }
}

}  // namespace

void write_summary(std::ostream& out, const ReportInputs& in) {
  write_header(out, in);
  write_memory_options_line(out, in.run);
  write_step_times(out, in.metrics);
  write_memory(out, in);
  write_stage_table(out, in.metrics);
}

}  // namespace moesim
