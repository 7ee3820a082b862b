// Pipeline schedules: the order in which every pipeline stage runs the passes of its microbatches
// (issue 23 item 4). Pure functions of the shape; the step builder (sim/step) turns each stage's
// program into tasks and derives the point-to-point transfers between stages from where the
// model's parts live, so bubbles and waits come out of the event simulation, not a closed form.
//
// Vocabulary:
//   stage        a pipeline rank (0 .. stages-1);
//   chunk        one of a stage's model chunks (0 .. virtual_stages-1): interleaved 1F1B gives a
//                stage several, DualPipe two (one per direction);
//   model part   a contiguous run of layers, numbered in forward order (0 .. num_model_parts-1);
//                a microbatch's forward visits parts 0, 1, ... and its backward the reverse;
//   action       one pass of one microbatch through one chunk.
//
// DualPipe (DeepSeek-V3 technical report, arXiv 2412.19437, section 3.2.1; deepseek-ai/DualPipe)
// feeds half the microbatches from each end: microbatches 0 .. m/2 - 1 go forward through stages
// 0, 1, ... (chunk 0), microbatches m/2 .. m - 1 the other way (chunk 1). Stage s's chunk 0 holds
// model part s and its chunk 1 part p - 1 - s, so every part's parameters are held twice (by
// stages s and p - 1 - s, whose gradients are summed).
//
// DualPipeV (deepseek-ai/DualPipe, dualpipe/dualpipev.py; "cut-in-half" DualPipe) cuts the model
// into 2p parts laid out as a V: stage s's chunk 0 holds part s and its chunk 1 part 2p - 1 - s.
// Every microbatch enters at stage 0, goes down the chunk-0 parts to stage p - 1 and back up the
// chunk-1 parts to stage 0, which holds the first and the last part; each stage runs DualPipe's
// eight steps as a stage of half a DualPipe pipeline would, without the parameters' second copy.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moesim {

enum class PipelineSchedule { kGpipe, kOneFOneB, kInterleaved, kZeroBubbleH1, kDualPipe, kDualPipeV };
std::string_view to_string(PipelineSchedule s);  // gpipe, 1f1b, interleaved, zb-h1, dualpipe, dualpipev
std::optional<PipelineSchedule> parse_pipeline_schedule(std::string_view s);
std::vector<std::string> pipeline_schedule_names();

// kBackward is the whole backward of a chunk (input and weight gradients); zero-bubble schedules
// split it into kBackwardInput (B: the gradient the previous part waits for) and
// kBackwardWeight (W: the weight gradients, free to fill bubbles).
enum class PipeWork { kForward, kBackward, kBackwardInput, kBackwardWeight };
std::string_view to_string(PipeWork w);  // F, B, Bi, W

struct PipelineShape {
  int stages = 1;
  int virtual_stages = 1;  // model chunks per stage (interleaved; DualPipe's and DualPipeV's two are implied)
  int microbatches = 1;    // per step, per pipeline (global batch / (micro-batch x data parallel))
};

struct PipeAction {
  PipeWork work = PipeWork::kForward;
  int microbatch = 0;
  int chunk = 0;
  // DualPipe's (and DualPipeV's) F&B, or a combined 1F1B pair: this forward and the program's next action (a backward
  // of another microbatch) are launched together, once both inputs have arrived, and overlap each
  // other (the whole-step builder interleaves them).
  bool overlaps_next = false;
  friend bool operator==(const PipeAction&, const PipeAction&) = default;
};

// Why `schedule` cannot run `shape`, naming the rule, or "" when it can (e.g. virtual stages
// without the interleaved schedule; interleaving needs microbatches divisible by stages, as
// Megatron-LM requires; DualPipe even stages and an even number of microbatches, at least twice
// the stages, as deepseek-ai/DualPipe asserts; DualPipeV at least twice the stages' microbatches).
std::string schedule_problem(PipelineSchedule schedule, const PipelineShape& shape);

// Every stage's program: programs[s] is the order stage s runs its actions in. Each (microbatch,
// chunk) appears once per pass the schedule has (F and B, or F, Bi and W). Throws InternalError
// when schedule_problem is not "".
std::vector<std::vector<PipeAction>> stage_programs(PipelineSchedule schedule, const PipelineShape& shape);

// Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm; its combined_1f1b schedules,
// without pipelining or interleaved): one more warmup forward on every stage, so that each
// steady-state forward and the backward after it belong to different microbatches and run as an
// overlapped pair (overlaps_next), one's expert-parallel all-to-alls beside the other's kernels.
// For kOneFOneB with one stage and for kInterleaved; InternalError otherwise (the caller refuses).
std::vector<std::vector<PipeAction>> combined_1f1b_programs(PipelineSchedule schedule, const PipelineShape& shape);

// How many model parts the model is cut into (stages x virtual stages; DualPipe: stages;
// DualPipeV: 2 x stages), how many chunks a stage runs (virtual stages; DualPipe, DualPipeV: 2),
// and which part a chunk of a stage holds (interleaved: stage s's chunk c holds part c * stages + s;
// DualPipe: s, then stages - 1 - s; DualPipeV: s, then 2 x stages - 1 - s).
int num_model_parts(PipelineSchedule schedule, const PipelineShape& shape);
int chunks_per_stage(PipelineSchedule schedule, const PipelineShape& shape);
int model_part(PipelineSchedule schedule, const PipelineShape& shape, int stage, int chunk);

struct PartPlace {
  int stage = 0;
  int chunk = 0;
  friend bool operator==(const PartPlace&, const PartPlace&) = default;
};
// Where microbatch `microbatch`'s pass through model part `part` runs (DualPipe: on the chunk of
// the microbatch's direction).
PartPlace place_of(PipelineSchedule schedule, const PipelineShape& shape, int microbatch, int part);

// The most (microbatch, chunk) pairs whose activations a stage holds at once while it runs
// `program` in order: a whole step's memory estimate multiplies it by one chunk's activations.
// A split backward frees in two steps, so both counts are given; they are equal without one.
struct InFlightPeak {
  int until_input_grad = 0;  // from F to its B or Bi: what the backward's input gradient reads
  int until_last_pass = 0;   // from F to its B or W: W still reads the layer inputs
  friend bool operator==(const InFlightPeak&, const InFlightPeak&) = default;
};
InFlightPeak peak_in_flight(const std::vector<PipeAction>& program);

}  // namespace moesim
