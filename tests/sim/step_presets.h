// The bundled model and cluster presets the whole-step tests use (models/*.yaml, and cluster
// presets grown or shrunk to a GPU count), read from the source tree, a small layout, and the
// InputError a step spec is refused with.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "sim/core/error.h"
#include "sim/memory/activations.h"
#include "sim/spec/loader.h"
#include "sim/step/step_graph.h"
#include "sim/step/step_simulation.h"

namespace moesim::testing {

inline ModelSpec model_preset(const std::string& name) {
  return load_model_spec(std::string(MOESIM_SOURCE_DIR) + "/models/" + name + ".yaml");
}

inline ClusterSpec a100_cluster(int gpus) {
  const ClusterSpec c = load_hardware_spec(std::string(MOESIM_SOURCE_DIR) + "/hardware/clusters/dgx-a100-80gb-hdr.yaml");
  return with_gpus(c, gpus, SourceLocation{}, "--gpus");
}

// A cluster preset (hardware/clusters/<file>.yaml) grown or shrunk to `gpus`.
inline ClusterSpec cluster_preset(const std::string& file, int gpus) {
  return with_gpus(load_hardware_spec(std::string(MOESIM_SOURCE_DIR) + "/hardware/clusters/" + file + ".yaml"), gpus,
                   SourceLocation{}, "--gpus");
}

// GPT-1.7B (24 layers, 24 heads) on 16 GPUs: tp 2, pp 4, dp 2, 8 microbatches per pipeline of one
// 1,024-token sequence.
inline StepSpec small_gpt_step() {
  StepSpec s;
  s.layout.gpus = 16;
  s.layout.tp = 2;
  s.layout.pp = 4;
  s.global_batch = 16;
  s.micro_batch = 1;
  s.seq = 1024;
  return s;
}

// small_gpt_step under `schedule`, with `recompute`.
inline StepSpec small_gpt_step_under(PipelineSchedule schedule, Recompute recompute = Recompute::kNone) {
  StepSpec s = small_gpt_step();
  s.schedule = schedule;
  s.recompute = recompute;
  return s;
}

// Qwen3-30B-A3B (48 MoE layers, 128 experts, top 8) on 16 GPUs: tp 2, pp 2, ep 4 inside dp 4,
// 2 microbatches per pipeline of one 512-token sequence, sequence parallel.
inline StepSpec small_moe_step() {
  StepSpec s;
  s.layout.gpus = 16;
  s.layout.tp = 2;
  s.layout.pp = 2;
  s.layout.ep = 4;
  s.global_batch = 8;
  s.seq = 512;
  s.sequence_parallel = true;
  return s;
}

// small_moe_step without tensor parallelism: tp 1, pp 2, ep 4 inside dp 8, still 2 microbatches
// per pipeline; every rank routes its own 512-token sequence (with tp 2 and sequence parallelism
// each rank routes its 256-token shard and the experts all-gather the rows:
// StepLayout::routes_own_shard).
inline StepSpec small_moe_step_tp1() {
  StepSpec s = small_moe_step();
  s.layout.tp = 1;
  s.global_batch = 16;
  s.sequence_parallel = false;
  return s;
}

// small_moe_step with the experts folded to etp 1 x ep 2 (= tp x cp) x edp 4: the layout whose
// expert groups line up with the dense layers' in both rank orders.
inline StepSpec folded_moe_step() {
  StepSpec s = small_moe_step();
  s.layout.etp = 1;
  s.layout.ep = 2;
  return s;
}

// What build_step_graph refuses `spec` with on the A100 cluster, or "" when it builds.
inline std::string step_error_of(const StepSpec& spec, const std::string& model = "gpt-1.7b") {
  try {
    build_step_graph(model_preset(model), a100_cluster(spec.layout.gpus), spec);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// How many of an interleaved pair's forward collectives (on the dispatch or combine stream) that
// forward kernels wait for ran at least partly while one of the pair's backward kernels ran
// (StepGraph::interleaved: DualPipe's and combined 1F1B's overlapped pairs, the forward's tasks
// emitted first). A forward's last collectives, which no forward kernel follows, are not counted:
// passes run one after the other overlap there too.
inline int collectives_beside_the_other_pass(const SimulatedStep& sim) {
  const TaskGraph& g = sim.graph.graph;
  const auto& rec = sim.run.trace.records;
  int overlapped = 0;
  for (const StepGraph::Interleaved& range : sim.graph.interleaved) {
    const auto pass = std::find_if(sim.graph.passes.begin(), sim.graph.passes.end(),
                                   [&](const PassSpan& p) { return p.first == range.first; });
    if (pass == sim.graph.passes.end()) continue;
    const TaskIndex backward_from = pass->end, end = range.first + static_cast<TaskIndex>(range.order.size());
    TaskIndex last_forward_kernel = range.first;
    for (TaskIndex f = range.first; f < backward_from; ++f)
      if (g.task(f).stream == StreamClass::kCompute) last_forward_kernel = f;
    for (TaskIndex f = range.first; f < last_forward_kernel; ++f) {
      const Task& c = g.task(f);
      if (!std::holds_alternative<CollectiveWork>(c.work) || c.stream == StreamClass::kCommGrad) continue;
      for (TaskIndex b = backward_from; b < end; ++b) {
        if (g.task(b).stream == StreamClass::kCompute && rec[b].start_ns < rec[f].end_ns && rec[f].start_ns < rec[b].end_ns) {
          ++overlapped;
          break;
        }
      }
    }
  }
  return overlapped;
}

// Whether, on the compute stream of the stage rank of each interleaved pair, one of the pair's
// backward kernels comes before one of its forward kernels (the graph's own stream order, not the
// builder's bookkeeping).
// Every stage of small_gpt_step's simulated step (1 x 1,024-token microbatches, tp 2) under
// `schedule`: `in_flight` chunks in the closed form, `layers` layers, and a simulated peak within its
// model states plus the closed form's activations, by less than a fifth of them (an overlapped
// pair's backward frees while its forward allocates, so the peak can stay below the bound).
inline void expect_peak_within_closed_form(const ModelSpec& model, const SimulatedStep& sim,
                                           PipelineSchedule schedule, int in_flight, int layers) {
  ActivationLayout layout;
  layout.micro_batch = 1;
  layout.seq = 1024;
  layout.tp = 2;
  for (int stage = 0; stage < 4; ++stage) {
    const StageActivations act = stage_activations(model, layout, 1, PipelineLayout{schedule, 4, 1, 8, {}}, stage);
    EXPECT_EQ(act.in_flight, in_flight);
    const StageReport& st = sim.report.stages[static_cast<std::size_t>(stage)];
    EXPECT_EQ(st.layers, layers);
    EXPECT_LE(st.peak_memory_bytes, st.model_state_bytes + act.bytes()) << "stage " << stage;
    EXPECT_GT(st.peak_memory_bytes, st.model_state_bytes + act.bytes() * 4 / 5) << "stage " << stage;
  }
}

inline bool backward_kernels_precede_forward_kernels(const SimulatedStep& sim) {
  const TaskGraph& g = sim.graph.graph;
  for (const StepGraph::Interleaved& range : sim.graph.interleaved) {
    const auto pass = std::find_if(sim.graph.passes.begin(), sim.graph.passes.end(),
                                   [&](const PassSpan& p) { return p.first == range.first; });
    if (pass == sim.graph.passes.end()) return false;
    const int rank = sim.graph.shape.stage_rank(pass->stage);
    const TaskIndex backward_from = pass->end, end = range.first + static_cast<TaskIndex>(range.order.size());
    bool backward_seen = false, interleaved = false;
    for (TaskIndex i : g.stream_tasks(rank, StreamClass::kCompute)) {
      if (i >= backward_from && i < end) backward_seen = true;
      if (i >= range.first && i < backward_from && backward_seen) interleaved = true;
    }
    if (!interleaved) return false;
  }
  return !sim.graph.interleaved.empty();
}

}  // namespace moesim::testing
