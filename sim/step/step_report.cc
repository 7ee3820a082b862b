// step_report_json and step_summary (step_simulation.h).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/step/step_simulation.h"

namespace moesim {
namespace {

using Json = nlohmann::ordered_json;

double seconds(TimeNs ns) { return static_cast<double>(ns) * 1e-9; }
double gib(std::int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(std::int64_t{1} << 30); }

Json layout_json(const StepReport& r, const StepSpec& spec) {
  const StepLayout& l = r.shape.layout;
  Json j;
  j["gpus"] = l.gpus;
  j["tp"] = l.tp;
  j["pp"] = l.pp;
  j["vpp"] = l.vpp;
  j["ep"] = l.ep;
  j["cp"] = l.cp;
  j["dp"] = r.shape.dp;
  j["etp"] = l.expert_tp();
  j["edp"] = l.edp();
  j["global_batch"] = r.shape.global_batch;
  j["micro_batch"] = r.shape.micro_batch;
  j["microbatches_per_pipeline"] = r.shape.pipeline.microbatches;
  j["seq"] = r.shape.seq;
  j["schedule"] = std::string(to_string(r.shape.schedule));
  j["recompute"] = std::string(to_string(spec.recompute));
  if (spec.recompute == Recompute::kSelective) j["recompute_modules"] = to_string(spec.recompute_modules);
  j["sequence_parallel"] = spec.sequence_parallel;
  j["attention"] = std::string(to_string(spec.attention));
  j["gemm_dtype"] = std::string(to_string(r.shape.gemm_dtype));
  if (r.shape.gemm_dtype == DType::kFp8) j["fp8_recipe"] = std::string(to_string(r.shape.fp8_recipe));
  j["zero"] = spec.zero_stage;
  j["overlap_grad_reduce"] = spec.overlap_grad_reduce;
  j["overlap_moe_expert_parallel_comm"] = spec.overlap_moe_ep_comm;
  j["moe_chunks"] = spec.moe_chunks;
  j["moe_strategy"] = std::string(to_string(spec.moe_strategy));
  if (spec.host_launch_ns) j["host_launch_s"] = seconds(*spec.host_launch_ns);
  if (spec.dispatcher != TokenDispatcher::kAllToAll) j["dispatcher"] = std::string(to_string(spec.dispatcher));
  if (spec.tp_pp_dp_mapping) j["rank_order"] = "tp-cp-pp-dp";
  return j;
}

// An imbalanced routing's plan: its spelling, seed and imbalance, and the rows the most loaded
// expert-parallel rank (whose rows the stages compute) receives per microbatch and MoE layer.
Json routing_json(const MoeRouting& routing, const StepSpec& spec) {
  const RoutingStats& st = routing.stats;
  Json j;
  j["routing"] = st.routing;
  j["seed"] = spec.seed;
  j["simulated_ep_rank"] = routing.rank;
  j["rows_received"] = routing.total_received();
  j["rank_imbalance"] = st.rank_imbalance;
  j["expert_imbalance"] = st.expert_imbalance;
  j["busiest_expert"] = st.busiest_expert;
  j["dropped_fraction"] = st.dropped_fraction();
  return j;
}

std::string routing_line(const MoeRouting& routing, const StepSpec& spec) {
  const RoutingStats& st = routing.stats;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                " (seed %llu): MoE layers' expert-parallel rank %d receives %lld rows per microbatch, %.2fx the "
                "mean rank's; busiest expert %.2fx the mean; %.1f%% of choices dropped\n",
                static_cast<unsigned long long>(spec.seed), routing.rank,
                static_cast<long long>(routing.total_received()), st.rank_imbalance, st.expert_imbalance,
                100 * st.dropped_fraction());
  return "routing: " + st.routing + buf;
}

}  // namespace

std::string step_report_json(const StepReport& r, const ModelSpec& model, const ClusterSpec& cluster,
                             const StepSpec& spec, const std::string& version) {
  Json j;
  j["moesim_version"] = version;
  j["model"] = model.name;
  j["hardware"] = cluster.name;
  j["layout"] = layout_json(r, spec);
  if (r.routing) j["routing"] = routing_json(*r.routing, spec);
  j["step_time_s"] = seconds(r.step_ns);
  j["tokens_per_s_per_gpu"] = r.tokens_per_s_per_gpu;
  j["model_tflops_per_gpu"] = r.model_tflops_per_gpu;
  j["mfu"] = r.mfu;
  j["flops_formula"] = "Megatron-LM num_floating_point_operations, commit 001b00c2";
  j["bubble_fraction"] = r.bubble_fraction;
  j["peak_memory_bytes"] = r.peak_memory_bytes;
  j["memory_capacity_bytes"] = r.memory_capacity_bytes;
  j["memory_reserve_bytes"] = kStepMemoryReserve;
  j["fits"] = r.fits;
  j["tasks"] = r.tasks;
  Json stages = Json::array();
  for (const StageReport& s : r.stages) {
    Json st;
    st["stage"] = s.stage;
    st["rank"] = s.rank;
    st["layers"] = s.layers;
    st["compute_busy_s"] = seconds(s.compute_busy_ns);
    st["bubble_s"] = seconds(s.bubble_ns);
    st["host_wait_s"] = seconds(s.host_wait_ns);
    st["exposed_tp_s"] = seconds(s.exposed_tp_ns);
    st["exposed_p2p_s"] = seconds(s.exposed_p2p_ns);
    st["exposed_grad_s"] = seconds(s.exposed_grad_ns);
    st["exposed_a2a_s"] = seconds(s.exposed_a2a_ns);
    st["peak_memory_bytes"] = s.peak_memory_bytes;
    st["model_state_bytes"] = s.model_state_bytes;
    stages.push_back(std::move(st));
  }
  j["stages"] = std::move(stages);
  return j.dump(2) + "\n";
}

std::string step_summary(const StepReport& r, const ModelSpec& model, const ClusterSpec& cluster,
                         const StepSpec& spec) {
  std::ostringstream out;
  const StepLayout& l = r.shape.layout;
  char buf[256];
  out << "moesim: training step of " << model.name << " on " << l.gpus << " x " << cluster.node.gpu.name << " ("
      << cluster.name << ")\n";
  out << "layout: tp " << l.tp << ", pp " << l.pp << ", vpp " << l.vpp << ", ep " << l.ep << ", cp " << l.cp << ", dp "
      << r.shape.dp;
  // The MoE layers' own layout, where it differs from the attention's.
  if (l.folded()) out << ", experts etp " << l.expert_tp() << " x ep " << l.ep << " x edp " << l.edp();
  out << "; schedule " << to_string(r.shape.schedule) << ", " << r.shape.pipeline.microbatches
      << " microbatches of " << r.shape.micro_batch << " x " << r.shape.seq << " tokens; recompute "
      << to_string(spec.recompute)
      << (spec.recompute == Recompute::kSelective && spec.recompute_modules != RecomputeModules{}
              ? " (" + to_string(spec.recompute_modules) + ")"
              : std::string())
      << (spec.sequence_parallel ? ", sequence parallel" : "") << ", attention "
      << to_string(spec.attention) << ", " << to_string(r.shape.gemm_dtype) << " GEMMs"
      << (r.shape.gemm_dtype == DType::kFp8 ? " (" + std::string(to_string(r.shape.fp8_recipe)) + " scaling)" : std::string())
      << ", ZeRO " << spec.zero_stage
      << (spec.moe_chunks > 1 ? "; MoE in " + std::to_string(spec.moe_chunks) + " chunks" : std::string())
      << (spec.moe_strategy != MemoryStrategy::kNone
              ? "; MoE memory reuse " + std::string(to_string(spec.moe_strategy)) : std::string());
  if (spec.host_launch_ns) out << "; " << host_launch_phrase(*spec.host_launch_ns);
  if (spec.dispatcher != TokenDispatcher::kAllToAll) out << "; MoE dispatcher " << to_string(spec.dispatcher);
  if (spec.tp_pp_dp_mapping) out << "; ranks tp-cp-pp-dp";
  out << "\n";
  if (r.routing) out << routing_line(*r.routing, spec);
  out << "\n";
  std::snprintf(buf, sizeof buf,
                "step time            %10.3f s\ntokens/s per GPU     %10.1f\nmodel TFLOP/s per GPU %9.1f  "
                "(MFU %.1f%%, Megatron-LM's FLOPs formula)\nbubble fraction      %10.3f\n",
                seconds(r.step_ns), r.tokens_per_s_per_gpu, r.model_tflops_per_gpu, 100 * r.mfu, r.bubble_fraction);
  out << buf;
  std::snprintf(buf, sizeof buf, "peak memory          %10.2f GiB of %.2f GiB less a %.0f GiB reserve: %s\n\n",
                gib(r.peak_memory_bytes), gib(r.memory_capacity_bytes), gib(kStepMemoryReserve),
                r.fits ? "fits" : "does NOT fit");
  out << buf;
  // The host's column only where the host is modelled (--host-launch-us).
  const bool host = spec.host_launch_ns.has_value();
  out << "stage  layers  compute (s)  bubble (s)  " << (host ? "host wait (s)  " : "")
      << "exposed tp (s)  exposed p2p (s)  exposed grad (s)  exposed a2a (s)  peak memory (GiB)\n";
  for (const StageReport& s : r.stages) {
    std::snprintf(buf, sizeof buf, "%5d  %6lld  %11.3f  %10.3f  ", s.stage, static_cast<long long>(s.layers),
                  seconds(s.compute_busy_ns), seconds(s.bubble_ns));
    out << buf;
    if (host) {
      std::snprintf(buf, sizeof buf, "%13.3f  ", seconds(s.host_wait_ns));
      out << buf;
    }
    std::snprintf(buf, sizeof buf, "%14.3f  %15.3f  %16.3f  %15.3f  %17.2f\n", seconds(s.exposed_tp_ns),
                  seconds(s.exposed_p2p_ns), seconds(s.exposed_grad_ns), seconds(s.exposed_a2a_ns),
                  gib(s.peak_memory_bytes));
    out << buf;
  }
  return out.str();
}

}  // namespace moesim
