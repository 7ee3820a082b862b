#include "sim/step/step_simulation.h"

#include <algorithm>

#include "sim/core/error.h"
#include "sim/report/metrics.h"
#include "sim/spec/model_flops.h"

namespace moesim {
namespace {

// Per stage: the intervals its rank runs anything but pipeline transfers, its compute, and with
// the host modelled the intervals its tasks waited for their launch after their predecessors.
struct StageIntervals {
  std::vector<std::pair<TimeNs, TimeNs>> busy, compute, host_wait;
};

std::vector<StageIntervals> stage_intervals(const StepGraph& sg, const EngineRun& run, bool host_issued) {
  std::vector<StageIntervals> out(static_cast<std::size_t>(sg.shape.stages()));
  const TaskGraph& g = sg.graph;
  const auto& records = run.trace.records;
  for (TaskIndex i = 0; i < g.num_tasks(); ++i) {
    const Task& t = g.task(i);
    if (t.stream == StreamClass::kCommPipeline) continue;
    const TaskRecord& rec = records[i];
    // A task is ready when its predecessors have ended and its host has issued it.
    TimeNs after_predecessors = 0;
    if (host_issued)
      for (TaskIndex p : g.predecessors(i)) after_predecessors = std::max(after_predecessors, records[p].end_ns);
    for (int rank : g.ranks_of(i)) {
      StageIntervals& st = out[static_cast<std::size_t>(sg.shape.stage_of(rank))];
      st.busy.emplace_back(rec.start_ns, rec.end_ns);
      if (t.stream == StreamClass::kCompute) st.compute.emplace_back(rec.start_ns, rec.end_ns);
      if (host_issued && rec.ready_ns > after_predecessors) st.host_wait.emplace_back(after_predecessors, rec.ready_ns);
    }
  }
  return out;
}

StageReport stage_report(const StepGraph& sg, const EngineRun& run, int stage, StageIntervals intervals,
                         const StepMetrics& m, TimeNs step_ns) {
  StageReport r;
  r.stage = stage;
  r.rank = sg.shape.stage_rank(stage);
  r.model_state_bytes = sg.model_state_bytes[static_cast<std::size_t>(stage)];
  // The layers of every chunk the stage holds (DualPipe's two hold parts s and p - 1 - s).
  for (int c = 0; c < chunks_per_stage(sg.shape.schedule, sg.shape.pipeline); ++c)
    r.layers += sg.shape.parts[static_cast<std::size_t>(model_part(sg.shape.schedule, sg.shape.pipeline, stage, c))].layers;
  r.compute_busy_ns = union_length(std::move(intervals.compute));
  const TimeNs busy = union_length(intervals.busy);
  // Idle time while a task waited for its launch is the host's, not the pipeline's.
  intervals.host_wait.insert(intervals.host_wait.end(), intervals.busy.begin(), intervals.busy.end());
  r.host_wait_ns = union_length(std::move(intervals.host_wait)) - busy;
  r.bubble_ns = step_ns - busy - r.host_wait_ns;
  MOESIM_CHECK(m.rank == r.rank, "stage metrics of another rank");
  auto exposed = [&](const char* stage_name) {
    TimeNs sum = 0;
    for (const char* pass : {"fwd.", "bwd."}) {
      const auto it = m.stages.find(std::string(pass) + stage_name);
      if (it != m.stages.end()) sum += it->second.exposed_ns;
    }
    return sum;
  };
  r.exposed_tp_ns = exposed("tp");
  r.exposed_p2p_ns = exposed("p2p");
  r.exposed_grad_ns = exposed("grad");
  r.exposed_a2a_ns = exposed("a2a");
  for (const RankMemory& mem : run.memory)
    if (mem.rank == r.rank) r.peak_memory_bytes = mem.peak_device_bytes;
  return r;
}

// Every task but the pipeline's point-to-point transfers is launched by its ranks' hosts. A
// transfer is emitted with the stage that receives it, after the sender's later actions, so its
// index is not the sender's program order; its launch is not counted.
HostIssueSpec host_issue(const StepGraph& sg, std::int64_t launch_ns) {
  HostIssueSpec spec;
  spec.launch_ns.resize(sg.graph.num_tasks());
  for (TaskIndex i = 0; i < sg.graph.num_tasks(); ++i)
    spec.launch_ns[i] = sg.graph.task(i).op == Op::kSendRecv ? kNotIssued : launch_ns;
  // The experts' grouped GEMMs: one launch per local expert (StepEmitter::grouped_gemm).
  for (TaskIndex i : sg.launch_notes.grouped_gemms) spec.launch_ns[i] = launch_ns * std::get<GemmWork>(sg.graph.task(i).work).batch;
  spec.host_reads = sg.launch_notes.host_reads;
  spec.issue_order = issue_order(sg);
  return spec;
}

}  // namespace

SimulatedStep simulate_training_step(const ModelSpec& model, const ClusterSpec& cluster, const StepSpec& spec,
                                     NetworkChoice network) {
  // Built in place: a task graph is copied, not moved (Boost's adjacency_list has no move), and a
  // whole step's graph holds hundreds of thousands of tasks.
  SimulatedStep out{build_step_graph(model, cluster, spec), {}, {}};
  std::optional<HostIssueSpec> host;
  if (spec.host_launch_ns) host = host_issue(out.graph, *spec.host_launch_ns);
  out.run = simulate_graph(out.graph.graph, cluster, network, host ? &*host : nullptr);
  const StepGraph& graph = out.graph;
  const EngineRun& run = out.run;
  StepReport rep;
  rep.shape = graph.shape;
  rep.step_ns = run.trace.makespan_ns();
  rep.tasks = graph.graph.num_tasks();
  rep.routing = graph.routing;
  const double step_s = static_cast<double>(rep.step_ns) * 1e-9;
  const double gpus = rep.shape.layout.gpus;
  const double tokens = static_cast<double>(rep.shape.global_batch) * static_cast<double>(rep.shape.seq);
  rep.tokens_per_s_per_gpu = tokens / step_s / gpus;
  ModelSpec at_seq = model;
  at_seq.architecture.seq_len = rep.shape.seq;  // the formula's attention term is per sequence length
  rep.model_tflops_per_gpu = megatron_training_flops_per_token(at_seq).total() * tokens / step_s / gpus * 1e-12;
  const auto peak = cluster.node.gpu.peak_flops.find(rep.shape.gemm_dtype);
  rep.mfu = peak == cluster.node.gpu.peak_flops.end() ? 0 : rep.model_tflops_per_gpu * 1e12 / peak->second;
  rep.memory_capacity_bytes = cluster.node.gpu.hbm_capacity_bytes;
  double bubbles = 0;
  std::vector<StageIntervals> intervals = stage_intervals(graph, run, host.has_value());
  std::vector<int> stage_ranks;
  for (int s = 0; s < rep.shape.stages(); ++s) stage_ranks.push_back(graph.shape.stage_rank(s));
  const std::vector<StepMetrics> metrics = compute_ranks_metrics(graph.graph, run.trace, stage_ranks);
  for (int s = 0; s < rep.shape.stages(); ++s) {
    const auto at = static_cast<std::size_t>(s);
    rep.stages.push_back(stage_report(graph, run, s, std::move(intervals[at]), metrics[at], rep.step_ns));
    bubbles += static_cast<double>(rep.stages.back().bubble_ns) / static_cast<double>(rep.step_ns);
    rep.peak_memory_bytes = std::max(rep.peak_memory_bytes, rep.stages.back().peak_memory_bytes);
  }
  rep.bubble_fraction = bubbles / rep.shape.stages();
  rep.fits = rep.peak_memory_bytes <= rep.memory_capacity_bytes - kStepMemoryReserve;
  out.report = std::move(rep);
  return out;
}

}  // namespace moesim
