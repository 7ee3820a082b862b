#include "sim/search/step_estimate.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/schedule/program_timing.h"
#include "sim/step/step_shape.h"
#include "sim/step/step_simulation.h"

namespace moesim::search {
namespace {

// Passes that carry work the step runs once, which its other microbatches' passes do not repeat:
// with ZeRO 0-1, the gradient reductions launched by each (stage, chunk)'s last backward in
// program order (the last microbatch's, GPipe's microbatch 0's), and with fp8 GEMMs the weights'
// casts in the first microbatch's forward.
struct OncePasses {
  bool last_backward = false;
  bool first_forward = false;
};

OncePasses once_passes(const StepShape& shape, const StepSpec& spec) {
  return {spec.overlap_grad_reduce && spec.zero_stage < 2, shape.gemm_dtype == DType::kFp8};
}

// Whether, in the combined 1F1B's programs on `p`, every stage launches a forward of each of its
// chunks with a backward: then every model part has a paired forward to time.
bool pairs_every_part(const StepShape& shape, const PipelineShape& p) {
  for (const std::vector<PipeAction>& program : combined_1f1b_programs(shape.schedule, p)) {
    std::vector<bool> paired(static_cast<std::size_t>(p.virtual_stages), false);
    for (const PipeAction& a : program)
      if (a.overlaps_next) paired[static_cast<std::size_t>(a.chunk)] = true;
    if (std::find(paired.begin(), paired.end(), false) != paired.end()) return false;
  }
  return true;
}

// The fewest microbatches per pipeline the schedule runs on this shape (at most the step's own),
// and at least two: where some passes carry once-a-step work every part then has a pass without
// it to time the others by, and without such work two time the passes better than one (ZeRO 3,
// GPT-1.7B at pp 4: -2.6% with one, -1.2% with two). With the interleaved schedule and the last
// backwards' reductions two groups of pp, so that every part's backward has a pass before the
// first reductions run (in one group each chunk's last microbatch is in it, and the reductions of
// the chunk that finishes first run beside most other backwards); with the combined 1F1B enough
// that every part's forward is paired.
int sample_microbatches(const StepShape& shape, const StepSpec& spec, OncePasses once) {
  PipelineShape p = shape.pipeline;
  const bool two_groups = shape.schedule == PipelineSchedule::kInterleaved && once.last_backward;
  for (p.microbatches = 2; p.microbatches < shape.pipeline.microbatches; ++p.microbatches)
    if (schedule_problem(shape.schedule, p).empty() && (!two_groups || p.microbatches >= 2 * p.stages) &&
        (!spec.overlap_moe_ep_comm || pairs_every_part(shape, p)))
      return p.microbatches;
  return shape.pipeline.microbatches;
}

struct Span {
  TimeNs start = std::numeric_limits<TimeNs>::max();
  TimeNs end = -1;
  // The start of the transfer that brings the pass its input from another stage; none: max.
  TimeNs input_start = std::numeric_limits<TimeNs>::max();
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
        head_end_(static_cast<std::size_t>(shape_.stages()), 0),
        grad_tasks_(static_cast<std::size_t>(shape_.stages())),
        stage_wide_(static_cast<std::size_t>(shape_.stages())) {
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
  // The stage's per-microbatch gradient reductions (ZeRO 2-3's reduce-scatters), for one
  // microbatch: their count per microbatch times their mean time, {beside, alone}: the mean over
  // those that start before `passes_end` (the stage's last pass's end: beside its backwards) and
  // over those after it (alone, faster); each the other where it has none.
  std::pair<double, double> grad_per_microbatch(int stage, TimeNs passes_end) const {
    const auto& tasks = grad_tasks_[static_cast<std::size_t>(stage)];
    if (tasks.empty()) return {0, 0};
    double sum[2] = {0, 0};
    int count[2] = {0, 0};
    for (const auto& [start, end] : tasks) {
      const int alone = start >= passes_end;
      sum[alone] += static_cast<double>(end - start);
      ++count[alone];
    }
    const double per = static_cast<double>(tasks.size()) / shape_.pipeline.microbatches;
    const double beside = count[0] > 0 ? sum[0] / count[0] : sum[1] / count[1];
    const double alone = count[1] > 0 ? sum[1] / count[1] : beside;
    return {beside * per, alone * per};
  }
  // When the stage's last per-microbatch reduction ended (0: none).
  TimeNs grad_end(int stage) const {
    TimeNs end = 0;
    for (const auto& task : grad_tasks_[static_cast<std::size_t>(stage)]) end = std::max(end, task.second);
    return end;
  }
  // The summed time of the stage's own stage-wide tasks (the rest of the gradients' reductions,
  // the optimizer, the weights' all-gather) that start after its last per-microbatch reduction:
  // not the waits for other stages' (a collective over several stages counts for each).
  TimeNs after_grad(int stage) const {
    const TimeNs from = grad_end(stage);
    TimeNs sum = 0;
    for (const auto& [start, end] : stage_wide_[static_cast<std::size_t>(stage)])
      if (start >= from) sum += end - start;
    return sum;
  }

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
    if (!transfer) {
      const bool per_microbatch_reduction = t.stage == "grad" && t.chunk >= 0 && t.stream == StreamClass::kCommGrad;
      int last_stage = -1;  // a task's ranks are sorted: each of its stages once
      for (int rank : g.ranks_of(i)) {
        const int stage = shape_.stage_of(rank);
        if (stage == last_stage) continue;
        last_stage = stage;
        const auto st = static_cast<std::size_t>(stage);
        stage_end_[st] = std::max(stage_end_[st], rec.end_ns);
        if (t.chunk < 0) stage_wide_[st].emplace_back(rec.start_ns, rec.end_ns);
        if (per_microbatch_reduction) grad_tasks_[st].emplace_back(rec.start_ns, rec.end_ns);
      }
    }
    // Stage-wide tasks (gradient reductions, the optimizer) belong to the tail, not to a pass;
    // the optimizer's forward-pass task (the gradient buffer's zeroing) to the head.
    if (t.chunk < 0 && t.stage == "optimizer" && t.pass == Pass::kForward && t.rank >= 0) {
      TimeNs& head = head_end_[static_cast<std::size_t>(shape_.stage_of(t.rank))];
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
    if (transfer) span.input_start = std::min(span.input_start, rec.start_ns);
  }

  const StepShape& shape_;
  std::size_t parts_;
  std::vector<int> part_of_layer_;
  std::vector<Span> spans_;
  std::vector<TimeNs> stage_end_;
  std::vector<TimeNs> head_end_;
  std::vector<std::vector<std::pair<TimeNs, TimeNs>>> grad_tasks_;  // per stage
  std::vector<std::vector<std::pair<TimeNs, TimeNs>>> stage_wide_;  // per stage: chunk < 0 tasks
};

struct Measured {
  std::vector<PassTimes> part_times;  // ns
  std::vector<TimeNs> tail;           // per stage
  TimeNs head = 0;                    // the latest stage's head: every pass starts after it
  // Per stage: its per-microbatch gradient reductions' time on the gradient stream, for one
  // microbatch, and the time of its own work after the last of them (SampleSpans::after_grad).
  std::vector<std::pair<double, double>> grad_per_microbatch;  // {beside the backwards, alone}
  std::vector<TimeNs> after_grad;
};

// A pass of the sample program, or an overlapped pair (a forward and the backward launched with
// it, the combined 1F1B's): its stage, parts, direction and time.
struct TimedPass {
  int stage = 0;
  int part = 0;
  bool backward = false;
  double took = 0;
  int backward_part = -1;  // a pair's backward's part; -1: a single pass
  bool once = false;       // carries once-a-step work
  bool once_backward = false;  // its backward (a pair's too) launches the step's gradient reductions
  // Starts after the stage's first once-a-step backward ended: beside its gradient reductions.
  bool late = false;
  TimeNs start = 0, end = 0;
  bool apart() const { return once || late; }
};

// Marks the passes of each stage that start once its first once-a-step backward has ended (the
// reductions it launched then run beside them, slowing them): timed apart from the others, as the
// once passes are. The sample ends with the same passes after that point as the step does.
void mark_late(std::vector<TimedPass>& passes, int stages) {
  std::vector<TimeNs> first_once_end(static_cast<std::size_t>(stages), std::numeric_limits<TimeNs>::max());
  for (const TimedPass& p : passes)
    if (p.once_backward) {
      TimeNs& end = first_once_end[static_cast<std::size_t>(p.stage)];
      end = std::min(end, p.end);
    }
  for (TimedPass& p : passes) p.late = !p.once && p.start >= first_once_end[static_cast<std::size_t>(p.stage)];
}

// The sample's passes and pairs, stage by stage in program order, and each stage's tail.
std::vector<TimedPass> timed_passes(const SimulatedStep& sim, const StepSpec& spec, OncePasses once,
                                    SampleSpans& spans, Measured& m) {
  const StepShape& shape = sim.report.shape;
  const int last = shape.pipeline.microbatches - 1;
  std::vector<std::size_t> last_backward;  // per chunk of the stage in hand, its index in the program
  auto is_once = [&](const PipeAction& a, std::size_t index) {
    if (last == 0) return false;
    if (a.work == PipeWork::kForward) return once.first_forward && a.microbatch == 0;
    return once.last_backward && index == last_backward[static_cast<std::size_t>(a.chunk)];
  };
  std::vector<TimedPass> out;
  const auto programs = step_programs(shape, spec);
  for (int s = 0; s < shape.stages(); ++s) {
    const std::vector<PipeAction>& program = programs[static_cast<std::size_t>(s)];
    // The step builder launches a chunk's reductions from its last backward in program order.
    last_backward.assign(static_cast<std::size_t>(chunks_per_stage(shape.schedule, shape.pipeline)), program.size());
    for (std::size_t i = 0; i < program.size(); ++i)
      if (program[i].work != PipeWork::kForward) last_backward[static_cast<std::size_t>(program[i].chunk)] = i;
    TimeNs previous_end = 0;
    for (std::size_t i = 0; i < program.size(); ++i) {
      const PipeAction& a = program[i];
      const int part = model_part(shape.schedule, shape.pipeline, s, a.chunk);
      const bool backward = a.work != PipeWork::kForward;
      const Span& span = spans.at(backward, a.microbatch, part);
      TimedPass pass{s, part, backward, 0, -1, is_once(a, i)};
      pass.once_backward = backward && pass.once;
      // A pass runs from when it could start on its stage: the stage is free and its input is on the way.
      TimeNs start = std::max(span.start, previous_end), end = span.end;
      if (a.overlaps_next) {
        // A pair is launched once both inputs are on the way (with_partner in program_timing.h):
        // the later of the two transfers that bring them, where they come from other stages.
        const PipeAction& b = program[++i];
        pass.once_backward = is_once(b, i);
        pass.backward_part = model_part(shape.schedule, shape.pipeline, s, b.chunk);
        const Span& other = spans.at(true, b.microbatch, pass.backward_part);
        start = std::max(previous_end, std::min(span.start, other.start));
        for (const Span* input : {&span, &other})
          if (input->input_start != std::numeric_limits<TimeNs>::max()) start = std::max(start, input->input_start);
        end = std::max(end, other.end);
        pass.once = pass.once || pass.once_backward;
      }
      pass.took = static_cast<double>(end - start);
      pass.start = start;
      pass.end = end;
      out.push_back(pass);
      previous_end = end;
    }
    m.tail.push_back(spans.stage_end(s) - previous_end);
    m.head = std::max(m.head, spans.head_end(s));
    // ZeRO 0-1 reduce once, from the last backwards (timed apart above).
    const bool every_microbatch = spec.zero_stage >= 2;
    m.grad_per_microbatch.push_back(every_microbatch ? spans.grad_per_microbatch(s, previous_end)
                                                     : std::pair<double, double>{0, 0});
    m.after_grad.push_back(spans.grad_end(s) > 0 ? spans.after_grad(s) : 0);
  }
  mark_late(out, shape.stages());
  return out;
}

// Each part's pass times are the mean over its sampled passes timed with the others (not once,
// not late), and a paired forward's the mean of its pairs' times less their backwards' means; a
// part with no such pass takes its time from its late passes, then from its once passes. What a
// pass (or pair) timed apart takes beyond those means joins its stage's tail (the stage runs its
// passes one after the other, so the excess delays its end by as much).
Measured measure(const SimulatedStep& sim, const StepSpec& spec, OncePasses once) {
  const StepShape& shape = sim.report.shape;
  SampleSpans spans(sim);
  Measured m;
  const std::vector<TimedPass> passes = timed_passes(sim, spec, once, spans, m);
  const auto parts = static_cast<std::size_t>(shape.num_parts());
  // Per part: forward, backward, paired forward (kind 2).
  std::vector<double> sum(3 * parts, 0), count(3 * parts, 0);
  auto slot = [](int part, int kind) { return 3 * static_cast<std::size_t>(part) + static_cast<std::size_t>(kind); };
  auto kind_of = [](const TimedPass& p) { return p.backward_part >= 0 ? 2 : static_cast<int>(p.backward); };
  auto mean = [&](int part, int kind) {
    const std::size_t k = slot(part, kind);
    return count[k] > 0 ? sum[k] / count[k] : 0.0;
  };
  // Each (part, kind) from its passes of the best tier it has: 0 timed with the others, 1 late,
  // 2 once. Single passes first: a paired forward's time needs its backward's mean.
  auto tier = [](const TimedPass& p) { return p.once ? 2 : p.late ? 1 : 0; };
  std::vector<int> best(3 * parts, 3);
  for (const TimedPass& p : passes) {
    int& b = best[slot(p.part, kind_of(p))];
    b = std::min(b, tier(p));
  }
  for (const bool pairs : {false, true})
    for (const TimedPass& p : passes) {
      const std::size_t k = slot(p.part, kind_of(p));
      if ((p.backward_part >= 0) != pairs || tier(p) != best[k]) continue;
      sum[k] += pairs ? p.took - mean(p.backward_part, 1) : p.took;
      count[k] += 1;
    }
  m.part_times.assign(parts, PassTimes{0, 0, 0, 0, -1});
  for (std::size_t q = 0; q < parts; ++q) {
    const int part = static_cast<int>(q);
    m.part_times[q].forward = mean(part, 0);
    m.part_times[q].backward = mean(part, 1);
    if (count[slot(part, 2)] > 0) m.part_times[q].forward_paired = std::max(0.0, mean(part, 2));
  }
  for (const TimedPass& p : passes) {
    if (!p.apart()) continue;
    const PassTimes& t = m.part_times[static_cast<std::size_t>(p.part)];
    double expected = p.backward ? t.backward : t.forward;
    if (p.backward_part >= 0)
      expected = (t.forward_paired >= 0 ? t.forward_paired : t.forward) +
                 m.part_times[static_cast<std::size_t>(p.backward_part)].backward;
    m.tail[static_cast<std::size_t>(p.stage)] += static_cast<TimeNs>(p.took - expected);
  }
  return m;
}

// ZeRO 2-3 reduce-scatter every microbatch's gradients on the stage's one gradient stream, one
// after the other from its first backward on: at the rate measured beside backwards until the
// stage's last pass ends, then at the rate measured alone; then the stage's own work after them.
// Binding where backwards run back to back faster than their reductions (GPipe's); 0 without
// per-microbatch reductions.
double gradient_stream_end(const StepShape& shape, const std::vector<PipeAction>& program, const ProgramTiming& timing,
                           double passes_end, const Measured& m, int stage) {
  const auto s = static_cast<std::size_t>(stage);
  const auto [beside, alone] = m.grad_per_microbatch[s];
  if (beside <= 0) return 0;
  const auto first_backward = std::find_if(program.begin(), program.end(),
                                           [](const PipeAction& a) { return a.work != PipeWork::kForward; });
  const double start = timing.start[s][static_cast<std::size_t>(first_backward - program.begin())];
  const double microbatches = shape.pipeline.microbatches;
  const double done_beside = std::min(microbatches, std::max(0.0, passes_end - start) / beside);
  const double end = done_beside >= microbatches ? start + microbatches * beside
                                                 : passes_end + (microbatches - done_beside) * alone;
  return end + static_cast<double>(m.after_grad[s]);
}

}  // namespace

StepEstimate estimate_training_step(const ModelSpec& model, const ClusterSpec& cluster, const StepSpec& spec,
                                    NetworkChoice network) {
  const StepShape shape = derive_step_shape(model, cluster, spec);
  const double tokens = static_cast<double>(shape.global_batch) * static_cast<double>(shape.seq);
  StepEstimate est;
  // measure() times whole backward passes: ZB-H1's split ones, DualPipe's and DualPipeV's split ones
  // and DualPipe's two directions (a part's passes on two stages) are simulated in full instead
  // (exact, slower).
  if (shape.schedule == PipelineSchedule::kZeroBubbleH1 || shape.schedule == PipelineSchedule::kDualPipe ||
      shape.schedule == PipelineSchedule::kDualPipeV) {
    est.step_ns = simulate_training_step(model, cluster, spec, network).report.step_ns;
    est.sampled_microbatches = shape.pipeline.microbatches;
    est.exact = true;
    est.tokens_per_s_per_gpu = tokens / (static_cast<double>(est.step_ns) * 1e-9) / shape.layout.gpus;
    return est;
  }
  StepSpec sample = spec;
  const OncePasses once = once_passes(shape, spec);
  const int sampled = sample_microbatches(shape, spec, once);
  sample.global_batch = std::int64_t{sampled} * spec.micro_batch * shape.dp;
  const SimulatedStep sim = simulate_training_step(model, cluster, sample, network);
  est.sampled_microbatches = sampled;
  est.exact = sampled == shape.pipeline.microbatches;
  if (est.exact) {
    est.step_ns = sim.report.step_ns;
  } else {
    const Measured m = measure(sim, spec, once);
    const auto programs = step_programs(shape, spec);
    const ProgramTiming timing = time_programs_by_part(shape.schedule, shape.pipeline, programs, m.part_times);
    double step = 0;
    for (int s = 0; s < shape.stages(); ++s) {
      const auto& program = programs[static_cast<std::size_t>(s)];
      const PipeAction& last = program.back();
      const PassTimes& t = m.part_times[static_cast<std::size_t>(model_part(shape.schedule, shape.pipeline, s, last.chunk))];
      const double end = timing.start[static_cast<std::size_t>(s)].back() +
                         (last.work == PipeWork::kForward ? t.forward : t.backward);
      step = std::max(step, static_cast<double>(m.head) + end + static_cast<double>(m.tail[static_cast<std::size_t>(s)]));
      step = std::max(step, static_cast<double>(m.head) + gradient_stream_end(shape, program, timing, end, m, s));
    }
    est.step_ns = static_cast<TimeNs>(step);
  }
  est.tokens_per_s_per_gpu = tokens / (static_cast<double>(est.step_ns) * 1e-9) / shape.layout.gpus;
  return est;
}

}  // namespace moesim::search
