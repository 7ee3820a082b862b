// A fast estimate of a whole training step (sim/step) for ranking layouts: the layout planner
// (layout_planner.h) compares hundreds of them, and a full simulation of a large model's step
// takes seconds, most of it in the many microbatches of a long pipeline.
//
// The estimate uses the same cost models, on a smaller graph: the step is simulated with the
// fewest microbatches per pipeline its schedule runs, at least 2 (one group of `pp` for the
// interleaved schedule, two where ZeRO 0-1's gradient reductions run beside each chunk's last
// backward); the passes that carry once-a-step work (those last backwards, the first
// microbatch's forward with fp8 weight casts) are timed apart. From that trace it takes
//   - each model part's forward and backward pass time: from when the pass could start on its
//     stage (the incoming transfer's start, or the stage's previous pass's end) to its last
//     task's end, averaged over the sampled passes timed together: not those with once-a-step
//     work, nor those that start after the stage's first once-a-step backward has ended (the
//     reductions it launched run beside them); the transfer that brings a pass its input is thus
//     part of the pass, as the step builder makes the consumer wait for it;
//   - the head: the latest stage's end of its tasks before the passes (the gradient buffer's zeroing);
//   - each stage's tail: from its last pass's end to the end of its gradient reductions,
//     optimizer and weight all-gather, plus what its passes timed apart took beyond the mean (the
//     sample ends with the same passes after its first once-a-step backward as the step does);
//   - with the combined 1F1B (StepSpec::overlap_moe_ep_comm), each part's paired forward: what a
//     pair (that part's forward and the backward launched with it, interleaved) took beyond its
//     backward's mean, averaged over the sampled pairs; the sample then has enough microbatches
//     that every stage pairs a forward of each of its chunks (two groups of `pp` for the
//     interleaved schedule, two microbatches without pipelining).
// sim/schedule's time_programs then times the real number of microbatches with those pass times,
// and a stage ends at the head plus its last pass plus its tail, or, with ZeRO 2-3, later if its
// gradient stream does: every microbatch's reduce-scatters one after the other from its first
// backward, at the time per microbatch the sample measured beside backwards until its last pass
// ends and alone after it, then the stage's own work after them (GPipe's back-to-back backwards
// outrun their reductions: GPT-18B at tp 4 x pp 2 on 32 A100s, ZeRO 2, 64 microbatches, estimated
// 10.5% short without this, -0.2% with it). The step is the latest stage's end. When the sample is
// the whole step (as many microbatches), the estimate is the simulated step itself.
//
// What it leaves out: contention between passes of different microbatches (transfers sharing
// links with tensor-parallel collectives); a once-a-step pass's excess is added to its stage's
// end, as if nothing else on the stage had hidden it. ZeRO 3 stays 1-3% short on GPT-1.7B and
// GPT-3.6B at pp 4 (GPipe and 1F1B; counting its backward weight gathers, which share the
// gradient stream, did not move it). tests/sim/search/step_estimate_test.cc measures the error
// against full simulations.
#pragma once

#include "sim/driver/simulation.h"
#include "sim/spec/hardware_spec.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/step_spec.h"

namespace moesim::search {

struct StepEstimate {
  TimeNs step_ns = 0;
  double tokens_per_s_per_gpu = 0;
  int sampled_microbatches = 0;  // per pipeline, in the simulation the pass times come from
  bool exact = false;            // the sample was the whole step
};

// Throws InputError for a spec the step simulation refuses. A schedule with split backward passes
// (zb-h1, dualpipe, dualpipev), whose weight-gradient passes the sample does not tell apart (and DualPipe's
// model parts run on two stages each), is simulated in full: the estimate is exact.
StepEstimate estimate_training_step(const ModelSpec& model, const ClusterSpec& cluster, const StepSpec& spec,
                                    NetworkChoice network = {});

}  // namespace moesim::search
