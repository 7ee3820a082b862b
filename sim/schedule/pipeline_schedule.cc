#include "sim/schedule/pipeline_schedule.h"

#include <algorithm>
#include <cstdint>

#include "sim/core/enum_names.h"
#include "sim/core/error.h"
#include "sim/schedule/dualpipe_program.h"

namespace moesim {
namespace {

constexpr EnumNames<PipelineSchedule, 6> kSchedules{{{PipelineSchedule::kGpipe, "gpipe"},
                                                     {PipelineSchedule::kOneFOneB, "1f1b"},
                                                     {PipelineSchedule::kInterleaved, "interleaved"},
                                                     {PipelineSchedule::kZeroBubbleH1, "zb-h1"},
                                                     {PipelineSchedule::kDualPipe, "dualpipe"},
                                                     {PipelineSchedule::kDualPipeV, "dualpipev"}}};
constexpr EnumNames<PipeWork, 4> kWork{{{PipeWork::kForward, "F"},
                                        {PipeWork::kBackward, "B"},
                                        {PipeWork::kBackwardInput, "Bi"},
                                        {PipeWork::kBackwardWeight, "W"}}};

// Programs hold every (pass, microbatch, chunk) of a stage, and the step builder makes tasks of
// all of them: past this many (stage, chunk, microbatch) triples a step is no longer something to
// simulate, and the products below stay far from int's range.
constexpr std::int64_t kMaxPipelineWork = std::int64_t{1} << 22;

using Program = std::vector<PipeAction>;

std::string count_rule(const char* name, int value) {
  return std::string(name) + " must be at least 1 (got " + std::to_string(value) + ")";
}

std::string interleaving_problem(const PipelineShape& shape) {
  if (shape.stages < 2) {
    return "interleaved needs at least 2 stages (got " + std::to_string(shape.stages) +
           "): one stage has no pipeline bubble to shrink";
  }
  // One chunk per stage would be 1F1B with Megatron-LM's interleaved warmup (2 (p - s - 1)
  // forwards instead of p - s - 1): a slower twin of 1f1b, so it is refused rather than run.
  if (shape.virtual_stages < 2) {
    return "interleaved needs at least 2 virtual_stages (got " + std::to_string(shape.virtual_stages) +
           "); with one chunk per stage use 1f1b";
  }
  if (shape.microbatches % shape.stages != 0) {
    return "interleaved needs microbatches divisible by stages (Megatron-LM's rule): " +
           std::to_string(shape.microbatches) + " microbatches, " + std::to_string(shape.stages) + " stages";
  }
  return "";
}

// deepseek-ai/DualPipe's DualPipe.step asserts num_ranks % 2 == 0 and num_chunks % 2 == 0,
// num_chunks >= 2 num_ranks: each direction takes half the microbatches and fills the pipeline.
std::string dualpipe_problem(const PipelineShape& shape) {
  if (shape.stages % 2 != 0) {
    return "dualpipe needs an even number of stages (got " + std::to_string(shape.stages) +
           "): stages s and stages - 1 - s hold the same two model parts";
  }
  if (shape.virtual_stages != 1) {
    return "dualpipe runs its own two chunks per stage, one per direction: virtual_stages must be 1 (got " +
           std::to_string(shape.virtual_stages) + ")";
  }
  if (shape.microbatches % 2 != 0 || shape.microbatches < 2 * shape.stages) {
    return "dualpipe needs an even number of microbatches, at least 2 x stages (DualPipe's rule): " +
           std::to_string(shape.microbatches) + " microbatches, " + std::to_string(shape.stages) + " stages";
  }
  return "";
}

std::string dualpipev_problem(const PipelineShape& shape) {
  if (shape.virtual_stages != 1) {
    return "dualpipev runs its own two chunks per stage, the V's two arms: virtual_stages must be 1 (got " +
           std::to_string(shape.virtual_stages) + ")";
  }
  if (shape.microbatches < 2 * shape.stages) {
    return "dualpipev needs at least 2 x stages microbatches (DualPipeV's rule): " +
           std::to_string(shape.microbatches) + " microbatches, " + std::to_string(shape.stages) + " stages";
  }
  return "";
}

// Megatron-LM's shape of a stage's program (forward_backward_pipelining_without_interleaving and
// _with_interleaving): `warmup` forwards, then one forward followed by one backward until the
// forwards run out, then the backwards left. forward(k) and backward(k) are the stage's k-th of
// each; after_backward(k, program) may append work that the k-th backward frees (ZB-H1's W).
template <typename Forward, typename Backward, typename AfterBackward>
Program warmup_steady_cooldown(int n, int warmup, Forward forward, Backward backward, AfterBackward after_backward) {
  Program out;
  out.reserve(static_cast<std::size_t>(n) * 3);
  for (int k = 0; k < warmup; ++k) out.push_back(forward(k));
  const int remaining = n - warmup;
  for (int k = 0; k < n; ++k) {
    if (k < remaining) out.push_back(forward(warmup + k));
    out.push_back(backward(k));
    after_backward(k, out);
  }
  return out;
}

PipeAction action(PipeWork work, int microbatch, int chunk = 0) { return PipeAction{work, microbatch, chunk}; }

void nothing_after(int /*k*/, Program& /*out*/) {}

// GPipe: every forward, then every backward. The backwards run in reverse microbatch order, the
// mirror image of the forwards, as in GPipe's figure (Huang et al., NeurIPS 2019, Fig. 2c) and
// autograd's order when one loss over all microbatches is differentiated: the last stage starts
// with the microbatch whose forward it has just finished. With equal pass times the step time is
// the same in either order; only which activations live longest differs.
Program gpipe_program(const PipelineShape& shape) {
  Program out;
  for (int mb = 0; mb < shape.microbatches; ++mb) out.push_back(action(PipeWork::kForward, mb));
  for (int mb = shape.microbatches - 1; mb >= 0; --mb) out.push_back(action(PipeWork::kBackward, mb));
  return out;
}

// Megatron-LM's non-interleaved 1F1B (PipeDream-Flush): stage s warms up with p - s - 1 forwards.
int one_f_one_b_warmup(const PipelineShape& shape, int stage) {
  return std::min(shape.stages - stage - 1, shape.microbatches);
}

Program one_f_one_b_program(const PipelineShape& shape, int stage) {
  return warmup_steady_cooldown(
      shape.microbatches, one_f_one_b_warmup(shape, stage), [](int k) { return action(PipeWork::kForward, k); },
      [](int k) { return action(PipeWork::kBackward, k); }, nothing_after);
}

// ZB-H1 (Qi et al., ICLR 2024, section 3.1): 1F1B with each backward split into Bi and W, and
// stage s's W delayed by s microbatches (W(k - s) right after Bi(k)), so that every stage holds
// p microbatches between F and W, the peak of 1F1B's first stage; the delayed W's fill the tail
// that 1F1B leaves idle while gradients travel back. The W's still owed run at the end, in order.
Program zero_bubble_h1_program(const PipelineShape& shape, int stage) {
  int weights_done = 0;
  Program out = warmup_steady_cooldown(
      shape.microbatches, one_f_one_b_warmup(shape, stage), [](int k) { return action(PipeWork::kForward, k); },
      [](int k) { return action(PipeWork::kBackwardInput, k); },
      [&](int k, Program& program) {
        if (k >= stage) program.push_back(action(PipeWork::kBackwardWeight, weights_done++));
      });
  while (weights_done < shape.microbatches) out.push_back(action(PipeWork::kBackwardWeight, weights_done++));
  return out;
}

// Megatron-LM's interleaved schedule walks "virtual microbatches" k = 0 .. v m - 1: groups of
// `stages` microbatches, each group through chunk 0, then chunk 1, ...; the k-th backward takes
// the k-th entry with the chunks reversed (the last chunk's gradient comes first).
PipeAction interleaved_action(const PipelineShape& shape, int k, bool forward) {
  const int p = shape.stages;
  const int v = shape.virtual_stages;
  const int group = k / (p * v);
  const int in_group = k % (p * v);
  const int chunk = in_group / p;
  const int microbatch = group * p + in_group % p;
  if (forward) return action(PipeWork::kForward, microbatch, chunk);
  return action(PipeWork::kBackward, microbatch, v - 1 - chunk);
}

// Megatron-LM's warmup: (v - 1) p forwards on every stage, plus 2 per stage below the last,
// capped at the stage's v m forwards (then all forwards precede all backwards). Megatron-LM
// releases before 2024 also ran all forwards first when m == p; today's get_pp_rank_microbatches
// does not, and neither does this.
int interleaved_warmup(const PipelineShape& shape, int stage) {
  const int p = shape.stages;
  const int v = shape.virtual_stages;
  return std::min((p - stage - 1) * 2 + (v - 1) * p, v * shape.microbatches);
}

Program interleaved_program(const PipelineShape& shape, int stage) {
  return warmup_steady_cooldown(
      shape.virtual_stages * shape.microbatches, interleaved_warmup(shape, stage),
      [&](int k) { return interleaved_action(shape, k, true); },
      [&](int k) { return interleaved_action(shape, k, false); }, nothing_after);
}

void check_runnable(PipelineSchedule schedule, const PipelineShape& shape) {
  const std::string problem = schedule_problem(schedule, shape);
  MOESIM_CHECK(problem.empty(), std::string(to_string(schedule)) + ": " + problem);
}

}  // namespace

std::string_view to_string(PipelineSchedule s) { return name_of(kSchedules, s); }
std::optional<PipelineSchedule> parse_pipeline_schedule(std::string_view s) { return parse_from(kSchedules, s); }
std::vector<std::string> pipeline_schedule_names() { return names_of(kSchedules); }
std::string_view to_string(PipeWork w) { return name_of(kWork, w); }

std::string schedule_problem(PipelineSchedule schedule, const PipelineShape& shape) {
  if (shape.stages < 1) return count_rule("stages", shape.stages);
  if (shape.virtual_stages < 1) return count_rule("virtual_stages", shape.virtual_stages);
  if (shape.microbatches < 1) return count_rule("microbatches", shape.microbatches);
  // DualPipeV runs every microbatch through both its chunks: twice the (stage, chunk, microbatch) work.
  const int chunks = schedule == PipelineSchedule::kDualPipeV ? 2 : shape.virtual_stages;
  const std::int64_t work = std::int64_t{shape.stages} * chunks * shape.microbatches;
  if (work > kMaxPipelineWork) {
    return std::string("stages x ") + (schedule == PipelineSchedule::kDualPipeV ? "2 chunks" : "virtual_stages") +
           " x microbatches must be at most " + std::to_string(kMaxPipelineWork) + " (got " +
           std::to_string(shape.stages) + " x " + std::to_string(chunks) + " x " + std::to_string(shape.microbatches) +
           ")";
  }
  if (schedule == PipelineSchedule::kInterleaved) return interleaving_problem(shape);
  if (schedule == PipelineSchedule::kDualPipe) return dualpipe_problem(shape);
  if (schedule == PipelineSchedule::kDualPipeV) return dualpipev_problem(shape);
  if (shape.virtual_stages != 1) {
    return "virtual_stages " + std::to_string(shape.virtual_stages) + " needs the interleaved schedule (" +
           std::string(to_string(schedule)) + " runs one model chunk per stage)";
  }
  return "";
}

std::vector<std::vector<PipeAction>> stage_programs(PipelineSchedule schedule, const PipelineShape& shape) {
  check_runnable(schedule, shape);
  std::vector<Program> programs;
  programs.reserve(static_cast<std::size_t>(shape.stages));
  for (int s = 0; s < shape.stages; ++s) {
    switch (schedule) {
      case PipelineSchedule::kGpipe: programs.push_back(gpipe_program(shape)); break;
      case PipelineSchedule::kOneFOneB: programs.push_back(one_f_one_b_program(shape, s)); break;
      case PipelineSchedule::kInterleaved: programs.push_back(interleaved_program(shape, s)); break;
      case PipelineSchedule::kZeroBubbleH1: programs.push_back(zero_bubble_h1_program(shape, s)); break;
      case PipelineSchedule::kDualPipe: programs.push_back(dualpipe_program(shape, s)); break;
      case PipelineSchedule::kDualPipeV: programs.push_back(dualpipev_program(shape, s)); break;
    }
  }
  return programs;
}

std::vector<std::vector<PipeAction>> combined_1f1b_programs(PipelineSchedule schedule, const PipelineShape& shape) {
  check_runnable(schedule, shape);
  const bool interleaved = schedule == PipelineSchedule::kInterleaved;
  MOESIM_CHECK(interleaved || (schedule == PipelineSchedule::kOneFOneB && shape.stages == 1),
               "combined 1F1B runs without pipelining or with the interleaved schedule");
  std::vector<Program> programs;
  for (int s = 0; s < shape.stages; ++s) {
    const int n = shape.virtual_stages * shape.microbatches;
    const int warmup = std::min((interleaved ? interleaved_warmup(shape, s) : 0) + 1, n);
    Program p = interleaved ? warmup_steady_cooldown(
                                  n, warmup, [&](int k) { return interleaved_action(shape, k, true); },
                                  [&](int k) { return interleaved_action(shape, k, false); }, nothing_after)
                            : warmup_steady_cooldown(
                                  n, warmup, [](int k) { return action(PipeWork::kForward, k); },
                                  [](int k) { return action(PipeWork::kBackward, k); }, nothing_after);
    // The steady state's forwards, each followed by a backward; with no steady state (every forward
    // in the warmup) the last forward and the first backward stay apart, as Megatron-Core runs them.
    for (std::size_t i = static_cast<std::size_t>(warmup); i + 1 < p.size(); ++i)
      p[i].overlaps_next = p[i].work == PipeWork::kForward && p[i + 1].work == PipeWork::kBackward;
    programs.push_back(std::move(p));
  }
  return programs;
}

int num_model_parts(PipelineSchedule schedule, const PipelineShape& shape) {
  check_runnable(schedule, shape);
  if (schedule == PipelineSchedule::kDualPipeV) return 2 * shape.stages;
  return shape.stages * shape.virtual_stages;
}

int chunks_per_stage(PipelineSchedule schedule, const PipelineShape& shape) {
  check_runnable(schedule, shape);
  return schedule == PipelineSchedule::kDualPipe || schedule == PipelineSchedule::kDualPipeV ? 2
                                                                                               : shape.virtual_stages;
}

// Interleaving deals the parts round-robin (Megatron-LM: stage s's chunk c holds part c p + s),
// so that consecutive parts sit on consecutive stages; with one chunk per stage this is part s.
// DualPipe's reverse chunk runs the same parts from the other end: stage s holds part p - 1 - s;
// DualPipeV's second chunk the V's way back: part 2p - 1 - s.
int model_part(PipelineSchedule schedule, const PipelineShape& shape, int stage, int chunk) {
  const int chunks = chunks_per_stage(schedule, shape);
  MOESIM_CHECK(stage >= 0 && stage < shape.stages, "stage " + std::to_string(stage) + " out of range");
  MOESIM_CHECK(chunk >= 0 && chunk < chunks, "chunk " + std::to_string(chunk) + " out of range");
  if (schedule == PipelineSchedule::kDualPipe) return chunk == 0 ? stage : shape.stages - 1 - stage;
  if (schedule == PipelineSchedule::kDualPipeV) return chunk == 0 ? stage : 2 * shape.stages - 1 - stage;
  return chunk * shape.stages + stage;
}

PartPlace place_of(PipelineSchedule schedule, const PipelineShape& shape, int microbatch, int part) {
  const int parts = num_model_parts(schedule, shape);
  MOESIM_CHECK(microbatch >= 0 && microbatch < shape.microbatches,
               "microbatch " + std::to_string(microbatch) + " out of range");
  MOESIM_CHECK(part >= 0 && part < parts, "model part " + std::to_string(part) + " out of range");
  // Every microbatch takes the same path except in DualPipe, whose second half of the microbatches
  // enters at the last stage.
  if (schedule == PipelineSchedule::kDualPipe) {
    if (microbatch < shape.microbatches / 2) return PartPlace{part, 0};
    return PartPlace{shape.stages - 1 - part, 1};
  }
  // DualPipeV: down the V's first arm, then back up its second.
  if (schedule == PipelineSchedule::kDualPipeV)
    return part < shape.stages ? PartPlace{part, 0} : PartPlace{2 * shape.stages - 1 - part, 1};
  return PartPlace{part % shape.stages, part / shape.stages};
}

InFlightPeak peak_in_flight(const std::vector<PipeAction>& program) {
  InFlightPeak peak;
  int to_input_grad = 0;
  int to_last_pass = 0;
  for (const PipeAction& a : program) {
    switch (a.work) {
      case PipeWork::kForward: ++to_input_grad; ++to_last_pass; break;
      case PipeWork::kBackward: --to_input_grad; --to_last_pass; break;
      case PipeWork::kBackwardInput: --to_input_grad; break;
      case PipeWork::kBackwardWeight: --to_last_pass; break;
    }
    peak.until_input_grad = std::max(peak.until_input_grad, to_input_grad);
    peak.until_last_pass = std::max(peak.until_last_pass, to_last_pass);
  }
  return peak;
}

}  // namespace moesim
