#include "sim/search/step_estimate.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/schedule/program_timing.h"
#include "sim/step/step_simulation.h"

namespace moesim::search {
namespace {

// Passes that carry work the step runs once, which its other microbatches' passes do not repeat:
// with ZeRO 0-1 the gradient reductions overlapped with the last microbatch's backward, and with
// fp8 GEMMs the weights' casts in the first microbatch's forward.
struct OncePasses {
  bool last_backward = false;
  bool first_forward = false;
  bool any() const { return last_backward || first_forward; }
};

OncePasses once_passes(const StepShape& shape, const StepSpec& spec) {
  return {spec.overlap_grad_reduce && spec.zero_stage < 2, shape.gemm_dtype == DType::kFp8};
}

// The fewest microbatches per pipeline the schedule runs on this shape (at most the step's own),
// and at least two where some passes carry once-a-step work, so that every part has a pass
// without it to time the others by.
int sample_microbatches(const StepShape& shape, OncePasses once) {
  PipelineShape p = shape.pipeline;
  for (p.microbatches = once.any() ? 2 : 1; p.microbatches < shape.pipeline.microbatches; ++p.microbatches)
    if (schedule_problem(shape.schedule, p).empty()) return p.microbatches;
  return shape.pipeline.microbatches;
}

struct Span {
  TimeNs start = std::numeric_limits<TimeNs>::max();
  TimeNs end = -1;
  void add(TimeNs s, TimeNs e) {
    start = std::min(start, s);
    end = std::max(end, e);
  }
};

// The sample's trace cut into passes: spans[(backward x microbatches + microbatch) x parts + part].
class SampleSpans {
 public:
  explicit SampleSpans(const SimulatedStep& sim)
      : shape_(sim.report.shape),
        parts_(static_cast<std::size_t>(shape_.num_parts())),
        spans_(2 * static_cast<std::size_t>(shape_.pipeline.microbatches) * parts_),
        stage_end_(static_cast<std::size_t>(shape_.stages()), 0),
        head_end_(static_cast<std::size_t>(shape_.stages()), 0) {
    for (std::size_t q = 0; q < parts_; ++q) {
      const StepShape::Part& p = shape_.parts[q];
      if (part_of_layer_.size() < static_cast<std::size_t>(p.first_layer + p.layers))
        part_of_layer_.resize(static_cast<std::size_t>(p.first_layer + p.layers));
      std::fill_n(part_of_layer_.begin() + p.first_layer, p.layers, static_cast<int>(q));
    }
    const TaskGraph& g = sim.graph.graph;
    for (TaskIndex i = 0; i < g.num_tasks(); ++i) add(g, i, sim.run.trace.records[i]);
  }

  Span& at(bool backward, int microbatch, int part) {
    return spans_[(static_cast<std::size_t>(backward ? shape_.pipeline.microbatches : 0) +
                   static_cast<std::size_t>(microbatch)) * parts_ + static_cast<std::size_t>(part)];
  }
  // The end of the stage's last task that is not a transfer between stages.
  TimeNs stage_end(int stage) const { return stage_end_[static_cast<std::size_t>(stage)]; }
  // The end of the stage's head: the stage-wide tasks before its passes (zero_grad_buffer).
  TimeNs head_end(int stage) const { return head_end_[static_cast<std::size_t>(stage)]; }

 private:
  // Multi-token prediction modules' layers (numbered from the model's layer count on) run on the
  // last part, after its layers.
  int part_of(int layer) const {
    if (layer >= static_cast<int>(part_of_layer_.size())) return static_cast<int>(parts_) - 1;
    return part_of_layer_.at(static_cast<std::size_t>(layer));
  }

  void add(const TaskGraph& g, TaskIndex i, const TaskRecord& rec) {
    const Task& t = g.task(i);
    const bool transfer = t.stream == StreamClass::kCommPipeline;
    if (!transfer)
      for (int rank : g.ranks_of(i)) {
        TimeNs& end = stage_end_[static_cast<std::size_t>(rank / shape_.layout.stage_size())];
        end = std::max(end, rec.end_ns);
      }
    // Stage-wide tasks (gradient reductions, the optimizer) belong to the tail, not to a pass;
    // the optimizer's forward-pass task (the gradient buffer's zeroing) to the head.
    if (t.chunk < 0 && t.stage == "optimizer" && t.pass == Pass::kForward && t.rank >= 0) {
      TimeNs& head = head_end_[static_cast<std::size_t>(t.rank / shape_.layout.stage_size())];
      head = std::max(head, rec.end_ns);
    }
    if (t.chunk < 0 || t.stage == "grad" || t.stage == "optimizer") return;
    int layer = t.layer;
    if (transfer) {
      // A transfer belongs to the pass that consumes it: its successor on the receiving stage.
      for (TaskIndex next : g.successors(i))
        if (g.task(next).stream != StreamClass::kCommPipeline) layer = g.task(next).layer;
    }
    // Recomputation re-runs forward work inside the backward pass.
    const bool backward = t.pass == Pass::kBackward || t.stage == "recompute";
    // ZeRO-3's weight gathers are prefetched during the stage's previous pass: they start no pass
    // (one that ends late delays the pass's own tasks, which then start later).
    Span& span = at(backward, t.chunk, part_of(layer));
    if (t.stage == "zero3") span.end = std::max(span.end, rec.end_ns);
    else span.add(rec.start_ns, rec.end_ns);
  }

  const StepShape& shape_;
  std::size_t parts_;
  std::vector<int> part_of_layer_;
  std::vector<Span> spans_;
  std::vector<TimeNs> stage_end_;
  std::vector<TimeNs> head_end_;
};

struct Measured {
  std::vector<PassTimes> part_times;  // ns
  std::vector<TimeNs> tail;           // per stage
  TimeNs head = 0;                    // the latest stage's head: every pass starts after it
};

// A pass of the sample program: its stage, part, direction and time.
struct TimedPass {
  int stage = 0;
  int part = 0;
  bool backward = false;
  double took = 0;
};

// Each part's pass times are the mean over its sampled passes without once-a-step work; what a
// once pass takes beyond that mean joins its stage's tail (the stage runs its passes one after
// the other, so the excess delays its end by as much).
Measured measure(const SimulatedStep& sim, OncePasses once) {
  const StepShape& shape = sim.report.shape;
  const int last = shape.pipeline.microbatches - 1;
  SampleSpans spans(sim);
  const auto programs = stage_programs(shape.schedule, shape.pipeline);
  Measured m;
  const auto parts = static_cast<std::size_t>(shape.num_parts());
  std::vector<double> sum(2 * parts, 0), count(2 * parts, 0);
  std::vector<TimedPass> once_taken;
  for (int s = 0; s < shape.stages(); ++s) {
    TimeNs previous_end = 0;
    for (const PipeAction& a : programs[static_cast<std::size_t>(s)]) {
      const int part = model_part(shape.schedule, shape.pipeline, s, a.chunk);
      const bool backward = a.work != PipeWork::kForward;
      const Span& span = spans.at(backward, a.microbatch, part);
      // A pass runs from when it could start on its stage: the stage is free and its input is on the way.
      const double took = static_cast<double>(span.end - std::max(span.start, previous_end));
      const bool is_once = last > 0 && (backward ? once.last_backward && a.microbatch == last
                                                 : once.first_forward && a.microbatch == 0);
      if (is_once) {
        once_taken.push_back({s, part, backward, took});
      } else {
        sum[2 * static_cast<std::size_t>(part) + backward] += took;
        count[2 * static_cast<std::size_t>(part) + backward] += 1;
      }
      previous_end = span.end;
    }
    m.tail.push_back(spans.stage_end(s) - previous_end);
    m.head = std::max(m.head, spans.head_end(s));
  }
  m.part_times.assign(parts, PassTimes{0, 0, 0, 0});
  auto mean = [&](int part, bool backward) {
    const std::size_t k = 2 * static_cast<std::size_t>(part) + backward;
    return count[k] > 0 ? sum[k] / count[k] : 0.0;
  };
  for (std::size_t q = 0; q < parts; ++q) {
    m.part_times[q].forward = mean(static_cast<int>(q), false);
    m.part_times[q].backward = mean(static_cast<int>(q), true);
  }
  for (const TimedPass& p : once_taken)
    m.tail[static_cast<std::size_t>(p.stage)] += static_cast<TimeNs>(p.took - mean(p.part, p.backward));
  return m;
}

}  // namespace

StepEstimate estimate_training_step(const ModelSpec& model, const ClusterSpec& cluster, const StepSpec& spec,
                                    NetworkChoice network) {
  const StepShape shape = derive_step_shape(model, cluster, spec);
  const double tokens = static_cast<double>(shape.global_batch) * static_cast<double>(shape.seq);
  StepEstimate est;
  // measure() times whole backward passes: ZB-H1's split ones, DualPipe's split ones and its two
  // directions (a part's passes on two stages) are simulated in full instead (exact, slower).
  if (shape.schedule == PipelineSchedule::kZeroBubbleH1 || shape.schedule == PipelineSchedule::kDualPipe) {
    est.step_ns = simulate_training_step(model, cluster, spec, network).report.step_ns;
    est.sampled_microbatches = shape.pipeline.microbatches;
    est.exact = true;
    est.tokens_per_s_per_gpu = tokens / (static_cast<double>(est.step_ns) * 1e-9) / shape.layout.gpus;
    return est;
  }
  StepSpec sample = spec;
  const OncePasses once = once_passes(shape, spec);
  const int sampled = sample_microbatches(shape, once);
  sample.global_batch = std::int64_t{sampled} * spec.micro_batch * shape.dp;
  const SimulatedStep sim = simulate_training_step(model, cluster, sample, network);
  est.sampled_microbatches = sampled;
  est.exact = sampled == shape.pipeline.microbatches;
  if (est.exact) {
    est.step_ns = sim.report.step_ns;
  } else {
    const Measured m = measure(sim, once);
    const auto programs = stage_programs(shape.schedule, shape.pipeline);
    const ProgramTiming timing = time_programs_by_part(shape.schedule, shape.pipeline, programs, m.part_times);
    double step = 0;
    for (int s = 0; s < shape.stages(); ++s) {
      const auto& program = programs[static_cast<std::size_t>(s)];
      const PipeAction& last = program.back();
      const PassTimes& t = m.part_times[static_cast<std::size_t>(model_part(shape.schedule, shape.pipeline, s, last.chunk))];
      const double end = timing.start[static_cast<std::size_t>(s)].back() +
                         (last.work == PipeWork::kForward ? t.forward : t.backward);
      step = std::max(step, static_cast<double>(m.head) + end + static_cast<double>(m.tail[static_cast<std::size_t>(s)]));
    }
    est.step_ns = static_cast<TimeNs>(step);
  }
  est.tokens_per_s_per_gpu = tokens / (static_cast<double>(est.step_ns) * 1e-9) / shape.layout.gpus;
  return est;
}

}  // namespace moesim::search
