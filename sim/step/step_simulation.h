// simulate_training_step: one whole training step simulated (step_graph.h), and the figures a
// capacity planner reads (issue 23 item 7).
//
// Definitions (docs/training-step.md):
//   step time             the end of the last task (the optimizer, or the weights' all-gather);
//   tokens/s per GPU      global batch x sequence / step time / GPUs;
//   model TFLOP/s per GPU Megatron-LM's num_floating_point_operations (sim/spec/model_flops.h,
//                         commit 001b00c2) per token x tokens of the step / step time / GPUs;
//   MFU                   model TFLOP/s per GPU / the GPU's peak for the GEMMs' math;
//   bubble (per stage)    the part of the step during which the stage's rank runs nothing but
//                         pipeline transfers: waiting for another stage, or done before the others;
//                         bubble_fraction is its mean over the stages;
//   exposed (per kind)    the time a kind of task (tp, p2p, grad, a2a) runs while no other kind does on
//                         the stage's rank (sim/report/metrics.h);
//   fits                  every stage's simulated peak (model states, kept and recomputed
//                         activations) is at most the GPU's memory less kStepMemoryReserve.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/driver/simulation.h"
#include "sim/spec/hardware_spec.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/step_spec.h"
#include "sim/step/step_graph.h"

namespace moesim {

// Memory a GPU cannot give to the step's tensors: the CUDA context, cuBLAS and NCCL workspaces
// and buffers, and the caching allocator's fragmentation. A round figure of their usual sum on
// A100/H100 training jobs (context 0.5-1 GiB, NCCL buffers some hundreds of MiB per communicator).
inline constexpr std::int64_t kStepMemoryReserve = std::int64_t{2} << 30;

struct StageReport {
  int stage = 0;
  int rank = 0;                 // its representative rank
  std::int64_t layers = 0;
  TimeNs compute_busy_ns = 0;   // union of its compute-stream tasks
  TimeNs bubble_ns = 0;         // idle, but not waiting for the host
  TimeNs host_wait_ns = 0;      // idle while a task whose predecessors ended waited for its launch (--host-launch-us)
  TimeNs exposed_tp_ns = 0;
  TimeNs exposed_p2p_ns = 0;
  TimeNs exposed_grad_ns = 0;
  TimeNs exposed_a2a_ns = 0;    // the MoE layers' all-to-alls
  std::int64_t peak_memory_bytes = 0;
  std::int64_t model_state_bytes = 0;
};

struct StepReport {
  StepShape shape;
  TimeNs step_ns = 0;
  double tokens_per_s_per_gpu = 0;
  double model_tflops_per_gpu = 0;
  double mfu = 0;
  double bubble_fraction = 0;
  std::int64_t peak_memory_bytes = 0;
  std::int64_t memory_capacity_bytes = 0;
  bool fits = false;
  std::vector<StageReport> stages;
  std::size_t tasks = 0;
  std::shared_ptr<const MoeRouting> routing;  // an imbalanced routing's plan (StepGraph::routing)
};

struct SimulatedStep {
  StepGraph graph;
  EngineRun run;
  StepReport report;
};

SimulatedStep simulate_training_step(const ModelSpec& model, const ClusterSpec& cluster, const StepSpec& spec,
                                     NetworkChoice network = {});

// The report as JSON (top-level keys: step_time_s, tokens_per_s_per_gpu, model_tflops_per_gpu,
// mfu, bubble_fraction, peak_memory_bytes, fits, stages, and what was simulated).
std::string step_report_json(const StepReport& report, const ModelSpec& model, const ClusterSpec& cluster,
                             const StepSpec& spec, const std::string& version);
// The summary `moesim simulate --global-batch` prints.
std::string step_summary(const StepReport& report, const ModelSpec& model, const ClusterSpec& cluster,
                         const StepSpec& spec);

}  // namespace moesim
