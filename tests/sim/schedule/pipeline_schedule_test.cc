// Pipeline schedules as per-stage programs (sim/schedule/pipeline_schedule.h): the names, the
// rules a shape must meet, the programs of small shapes written out from the published orders,
// every pass of every (microbatch, chunk) exactly once on a grid of shapes, where model parts
// live, and the peak number of microbatches in flight per stage.
#include "sim/schedule/pipeline_schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "sim/core/error.h"
#include "sim/schedule/program_timing.h"
#include "tests/sim/schedule/schedule_shapes.h"

namespace moesim {
namespace {

using testing::kAllSchedules;
using testing::legal_shapes;

// "F0 B0 ..." (or "F0.1" with the chunk, for interleaved programs; "F3+" a forward overlapped
// with the backward after it): the programs below are written in this form so that they read
// like the schedules' figures.
std::string text(const std::vector<PipeAction>& program, bool with_chunks = false) {
  std::string out;
  for (const PipeAction& a : program) {
    if (!out.empty()) out += ' ';
    out += std::string(to_string(a.work)) + std::to_string(a.microbatch);
    if (with_chunks) out += "." + std::to_string(a.chunk);
    if (a.overlaps_next) out += '+';
  }
  return out;
}

std::vector<std::string> texts(PipelineSchedule schedule, const PipelineShape& shape) {
  std::vector<std::string> out;
  for (const auto& program : stage_programs(schedule, shape)) {
    out.push_back(text(program, schedule == PipelineSchedule::kInterleaved));
  }
  return out;
}

TEST(PipelineScheduleNames, RoundTripAndList) {
  EXPECT_THAT(pipeline_schedule_names(), ::testing::ElementsAre("gpipe", "1f1b", "interleaved", "zb-h1", "dualpipe", "dualpipev"));
  for (PipelineSchedule s : kAllSchedules) EXPECT_EQ(parse_pipeline_schedule(to_string(s)), s);
  EXPECT_EQ(parse_pipeline_schedule("1F1B"), std::nullopt);
  EXPECT_EQ(parse_pipeline_schedule("zb-h2"), std::nullopt);
  EXPECT_EQ(to_string(PipeWork::kForward), "F");
  EXPECT_EQ(to_string(PipeWork::kBackward), "B");
  EXPECT_EQ(to_string(PipeWork::kBackwardInput), "Bi");
  EXPECT_EQ(to_string(PipeWork::kBackwardWeight), "W");
}

struct ProblemCase {
  PipelineSchedule schedule;
  PipelineShape shape;
  const char* problem;
};

const ProblemCase kProblems[] = {
    {PipelineSchedule::kOneFOneB, {0, 1, 4}, "stages must be at least 1 (got 0)"},
    {PipelineSchedule::kOneFOneB, {2, -1, 4}, "virtual_stages must be at least 1 (got -1)"},
    {PipelineSchedule::kGpipe, {2, 1, 0}, "microbatches must be at least 1 (got 0)"},
    {PipelineSchedule::kGpipe, {2, 2, 4},
     "virtual_stages 2 needs the interleaved schedule (gpipe runs one model chunk per stage)"},
    {PipelineSchedule::kZeroBubbleH1, {4, 3, 8},
     "virtual_stages 3 needs the interleaved schedule (zb-h1 runs one model chunk per stage)"},
    {PipelineSchedule::kInterleaved, {1, 2, 4},
     "interleaved needs at least 2 stages (got 1): one stage has no pipeline bubble to shrink"},
    {PipelineSchedule::kInterleaved, {4, 1, 8},
     "interleaved needs at least 2 virtual_stages (got 1); with one chunk per stage use 1f1b"},
    {PipelineSchedule::kInterleaved, {4, 2, 6},
     "interleaved needs microbatches divisible by stages (Megatron-LM's rule): 6 microbatches, 4 stages"},
    {PipelineSchedule::kOneFOneB, {1024, 1, 8192},
     "stages x virtual_stages x microbatches must be at most 4194304 (got 1024 x 1 x 8192)"},
    {PipelineSchedule::kDualPipe, {3, 1, 12},
     "dualpipe needs an even number of stages (got 3): stages s and stages - 1 - s hold the same two model parts"},
    {PipelineSchedule::kDualPipe, {4, 2, 16},
     "dualpipe runs its own two chunks per stage, one per direction: virtual_stages must be 1 (got 2)"},
    {PipelineSchedule::kDualPipe, {4, 1, 6},
     "dualpipe needs an even number of microbatches, at least 2 x stages (DualPipe's rule): 6 microbatches, 4 stages"},
    {PipelineSchedule::kDualPipe, {4, 1, 9},
     "dualpipe needs an even number of microbatches, at least 2 x stages (DualPipe's rule): 9 microbatches, 4 stages"},
    {PipelineSchedule::kDualPipe, {4, 1, 8}, ""},
    {PipelineSchedule::kDualPipeV, {4, 2, 16},
     "dualpipev runs its own two chunks per stage, the V's two arms: virtual_stages must be 1 (got 2)"},
    {PipelineSchedule::kDualPipeV, {4, 1, 7},
     "dualpipev needs at least 2 x stages microbatches (DualPipeV's rule): 7 microbatches, 4 stages"},
    // Every microbatch through both chunks: twice 1F1B's work at the same shape.
    {PipelineSchedule::kDualPipeV, {512, 1, 8192},
     "stages x 2 chunks x microbatches must be at most 4194304 (got 512 x 2 x 8192)"},
    {PipelineSchedule::kDualPipeV, {3, 1, 6}, ""},
    // Fewer microbatches than stages is legal without interleaving (the pipeline never fills).
    {PipelineSchedule::kOneFOneB, {8, 1, 3}, ""},
    {PipelineSchedule::kInterleaved, {2, 4, 2}, ""},
};

TEST(PipelineScheduleProblem, NamesEachRuleWithTheNumbers) {
  for (const ProblemCase& c : kProblems) EXPECT_EQ(schedule_problem(c.schedule, c.shape), c.problem);
}

TEST(PipelineSchedulePrograms, RefuseAShapeWithAProblem) {
  EXPECT_THROW(stage_programs(PipelineSchedule::kInterleaved, {4, 2, 6}), InternalError);
  EXPECT_THROW(num_model_parts(PipelineSchedule::kOneFOneB, {4, 2, 8}), InternalError);
}

// Small shapes' programs written out by hand from each schedule's published order.
struct WrittenOut {
  const char* order;  // where the order comes from, and what the case shows
  PipelineSchedule schedule;
  PipelineShape shape;
  std::vector<std::string> programs;  // per stage
};

const WrittenOut kWrittenOut[] = {
    {"GPipe: all forwards, then the backwards in reverse", PipelineSchedule::kGpipe, {2, 1, 3},
     {"F0 F1 F2 B2 B1 B0", "F0 F1 F2 B2 B1 B0"}},
    {"Megatron-LM without interleaving: min(p - s - 1, m) warmup forwards, then F B pairs",
     PipelineSchedule::kOneFOneB,
     {4, 1, 6},
     {"F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5", "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5",
      "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5", "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5"}},
    {"1F1B with fewer microbatches than stages", PipelineSchedule::kOneFOneB, {3, 1, 1}, {"F0 B0", "F0 B0", "F0 B0"}},
    // Megatron-LM's virtual microbatch table for p = 2, v = 2, m = 4: groups of p microbatches
    // through chunk 0, then chunk 1 -- (0,0) (1,0) (0,1) (1,1) (2,0) (3,0) (2,1) (3,1) -- with the
    // backwards taking the same entries, chunks reversed. Warmup: stage 0 (p - 0 - 1) 2 + (v - 1) p
    // = 4 forwards, stage 1 2.
    {"Megatron-LM interleaved", PipelineSchedule::kInterleaved, {2, 2, 4},
     {"F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0",
      "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0"}},
    {"Megatron-LM interleaved, m = p: stage 0's warmup capped at its v m forwards",
     PipelineSchedule::kInterleaved,
     {2, 2, 2},
     {"F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0", "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 B1.0"}},
    {"ZB-H1: 1F1B's warmup, backwards split, stage s's W(k - s) right after Bi(k)",
     PipelineSchedule::kZeroBubbleH1,
     {3, 1, 4},
     {"F0 F1 F2 Bi0 W0 F3 Bi1 W1 Bi2 W2 Bi3 W3", "F0 F1 Bi0 F2 Bi1 W0 F3 Bi2 W1 Bi3 W2 W3",
      "F0 Bi0 F1 Bi1 F2 Bi2 W0 F3 Bi3 W1 W2 W3"}},
    // deepseek-ai/DualPipe's DualPipe.step, phase by phase (step 1 nF0, 2 nF0F1, 3 nB1W1F1, 4
    // nF0B1F1B0, 5 nB1F1B0, 6 nB1B0, 7 nWB0, 8 nW); microbatches 0 .. m/2 - 1 enter at stage 0,
    // the rest at the last stage; stage p - 1 - s runs stage s's program with the directions
    // swapped. The middle stages' first F0 B1 of step 4 is not overlapped, as in the reference.
    {"DualPipe, 2 stages", PipelineSchedule::kDualPipe, {2, 1, 4},
     {"F0 F2 F1 B2 F3+ B0 B3 Bi1 W1", "F2 F0 F3 B0 F1+ B2 B1 Bi3 W3"}},
    {"DualPipe, 4 stages", PipelineSchedule::kDualPipe, {4, 1, 8},
     {"F0 F1 F2 F4 Bi4 W4 F5 F3+ B5 F6+ B0 B6 F7+ B1 B7 Bi2 W2 Bi3 W3",
      "F0 F4 F1 F5 F2 B4 F6+ B0 F3+ B5 F7+ B1 B6 B2 Bi7 Bi3 W7 W3",
      "F4 F0 F5 F1 F6 B0 F2+ B4 F7+ B1 F3+ B5 B2 B6 Bi3 Bi7 W3 W7",
      "F4 F5 F6 F0 Bi0 W0 F1 F7+ B1 F2+ B4 B2 F3+ B5 B3 Bi6 W6 Bi7 W7"}},
};

TEST(PipelineSchedulePrograms, SmallShapesInThePublishedOrders) {
  for (const WrittenOut& w : kWrittenOut) {
    SCOPED_TRACE(w.order);
    EXPECT_EQ(texts(w.schedule, w.shape), w.programs);
  }
}

// The passes each schedule runs of every (microbatch, chunk): F and B, or F, Bi and W.
std::vector<PipeWork> passes_of(PipelineSchedule schedule) {
  if (schedule == PipelineSchedule::kZeroBubbleH1) {
    return {PipeWork::kForward, PipeWork::kBackwardInput, PipeWork::kBackwardWeight};
  }
  return {PipeWork::kForward, PipeWork::kBackward};
}

TEST(PipelineSchedulePrograms, HoldEachPassOfEachMicrobatchAndChunkOnce) {
  for (PipelineSchedule schedule : kAllSchedules) {
    // Their own tests below.
    if (schedule == PipelineSchedule::kDualPipe || schedule == PipelineSchedule::kDualPipeV) continue;
    for (const PipelineShape& shape : legal_shapes(schedule)) {
      SCOPED_TRACE(std::string(to_string(schedule)) + " p=" + std::to_string(shape.stages) +
                   " v=" + std::to_string(shape.virtual_stages) + " m=" + std::to_string(shape.microbatches));
      const auto programs = stage_programs(schedule, shape);
      ASSERT_EQ(programs.size(), static_cast<std::size_t>(shape.stages));
      for (const auto& program : programs) {
        std::map<std::tuple<PipeWork, int, int>, int> seen;
        for (const PipeAction& a : program) ++seen[{a.work, a.microbatch, a.chunk}];
        const std::vector<PipeWork> passes = passes_of(schedule);
        ASSERT_EQ(program.size(), passes.size() * shape.microbatches * shape.virtual_stages);
        for (PipeWork w : passes) {
          for (int mb = 0; mb < shape.microbatches; ++mb) {
            for (int c = 0; c < shape.virtual_stages; ++c) ASSERT_EQ((seen[{w, mb, c}]), 1);
          }
        }
      }
    }
  }
}

// DualPipe: each stage runs every microbatch through the chunk of its direction (chunk 0 for the
// first half, 1 for the second), once forward and once backward, whole (B) or split (Bi then W);
// an overlapped forward is always followed by a backward of the other direction.
TEST(PipelineSchedulePrograms, DualPipeHoldsEachMicrobatchOnceInItsDirection) {
  for (const PipelineShape& shape : legal_shapes(PipelineSchedule::kDualPipe)) {
    SCOPED_TRACE("p=" + std::to_string(shape.stages) + " m=" + std::to_string(shape.microbatches));
    for (const auto& program : stage_programs(PipelineSchedule::kDualPipe, shape)) {
      std::map<std::pair<PipeWork, int>, int> seen;
      for (std::size_t i = 0; i < program.size(); ++i) {
        const PipeAction& a = program[i];
        ASSERT_EQ(a.chunk, a.microbatch < shape.microbatches / 2 ? 0 : 1);
        ++seen[{a.work, a.microbatch}];
        if (!a.overlaps_next) continue;
        ASSERT_EQ(a.work, PipeWork::kForward);
        ASSERT_LT(i + 1, program.size());
        ASSERT_TRUE(program[i + 1].work == PipeWork::kBackward || program[i + 1].work == PipeWork::kBackwardInput);
        ASSERT_NE(program[i + 1].chunk, a.chunk);
      }
      for (int mb = 0; mb < shape.microbatches; ++mb) {
        ASSERT_EQ((seen[{PipeWork::kForward, mb}]), 1);
        const int whole = seen[{PipeWork::kBackward, mb}];
        const int input = seen[{PipeWork::kBackwardInput, mb}];
        ASSERT_EQ(whole + input, 1);
        ASSERT_EQ((seen[{PipeWork::kBackwardWeight, mb}]), input);
      }
    }
  }
}

TEST(PipelineScheduleParts, InterleavingDealsPartsRoundRobin) {
  const PipelineShape shape{4, 2, 8};
  EXPECT_EQ(num_model_parts(PipelineSchedule::kInterleaved, shape), 8);
  EXPECT_EQ(model_part(PipelineSchedule::kInterleaved, shape, 1, 0), 1);
  EXPECT_EQ(model_part(PipelineSchedule::kInterleaved, shape, 1, 1), 5);
  EXPECT_EQ(place_of(PipelineSchedule::kInterleaved, shape, 3, 6), (PartPlace{2, 1}));
  EXPECT_THROW(model_part(PipelineSchedule::kInterleaved, shape, 4, 0), InternalError);
  EXPECT_THROW(place_of(PipelineSchedule::kInterleaved, shape, 0, 8), InternalError);
  EXPECT_THROW(place_of(PipelineSchedule::kInterleaved, shape, 8, 0), InternalError);
}

TEST(PipelineScheduleParts, PlaceOfInvertsModelPartOnEveryShape) {
  for (PipelineSchedule schedule : kAllSchedules) {
    // Their own tests below.
    if (schedule == PipelineSchedule::kDualPipe || schedule == PipelineSchedule::kDualPipeV) continue;
    for (const PipelineShape& shape : legal_shapes(schedule)) {
      ASSERT_EQ(num_model_parts(schedule, shape), shape.stages * shape.virtual_stages);
      ASSERT_EQ(chunks_per_stage(schedule, shape), shape.virtual_stages);
      for (int s = 0; s < shape.stages; ++s) {
        for (int c = 0; c < shape.virtual_stages; ++c) {
          const int part = model_part(schedule, shape, s, c);
          ASSERT_EQ(part, c * shape.stages + s);
          ASSERT_EQ(place_of(schedule, shape, shape.microbatches - 1, part), (PartPlace{s, c}));
        }
      }
    }
  }
}

// DualPipe: p parts; stage s's chunk 0 holds part s and its chunk 1 part p - 1 - s (so stages s
// and p - 1 - s hold the same two parts); the first half of the microbatches runs part q on
// stage q, the second half on stage p - 1 - q.
TEST(PipelineScheduleParts, DualPipeHoldsEveryPartTwiceAndFeedsFromBothEnds) {
  for (const PipelineShape& shape : legal_shapes(PipelineSchedule::kDualPipe)) {
    const int p = shape.stages;
    const int m = shape.microbatches;
    ASSERT_EQ(num_model_parts(PipelineSchedule::kDualPipe, shape), p);
    ASSERT_EQ(chunks_per_stage(PipelineSchedule::kDualPipe, shape), 2);
    for (int s = 0; s < p; ++s) {
      ASSERT_EQ(model_part(PipelineSchedule::kDualPipe, shape, s, 0), s);
      ASSERT_EQ(model_part(PipelineSchedule::kDualPipe, shape, s, 1), p - 1 - s);
      ASSERT_EQ(place_of(PipelineSchedule::kDualPipe, shape, 0, s), (PartPlace{s, 0}));
      ASSERT_EQ(place_of(PipelineSchedule::kDualPipe, shape, m / 2 - 1, s), (PartPlace{s, 0}));
      ASSERT_EQ(place_of(PipelineSchedule::kDualPipe, shape, m / 2, s), (PartPlace{p - 1 - s, 1}));
      ASSERT_EQ(place_of(PipelineSchedule::kDualPipe, shape, m - 1, s), (PartPlace{p - 1 - s, 1}));
    }
  }
  EXPECT_THROW(model_part(PipelineSchedule::kDualPipe, {4, 1, 8}, 0, 2), InternalError);
}

// DualPipeV: every stage runs every microbatch through both its chunks (the V's two arms), once
// forward and once backward each, whole or split; an overlapped forward is followed by a backward
// of the other chunk. Its 2p parts: stage s holds parts s and 2p - 1 - s, and every microbatch
// goes down the first arm and back up the second.
TEST(PipelineSchedulePrograms, DualPipeVRunsEveryMicrobatchThroughBothChunks) {
  for (const PipelineShape& shape : legal_shapes(PipelineSchedule::kDualPipeV)) {
    SCOPED_TRACE("p=" + std::to_string(shape.stages) + " m=" + std::to_string(shape.microbatches));
    const int p = shape.stages;
    ASSERT_EQ(num_model_parts(PipelineSchedule::kDualPipeV, shape), 2 * p);
    ASSERT_EQ(chunks_per_stage(PipelineSchedule::kDualPipeV, shape), 2);
    for (int s = 0; s < p; ++s) {
      ASSERT_EQ(model_part(PipelineSchedule::kDualPipeV, shape, s, 0), s);
      ASSERT_EQ(model_part(PipelineSchedule::kDualPipeV, shape, s, 1), 2 * p - 1 - s);
    }
    for (int mb = 0; mb < shape.microbatches; ++mb)
      for (int part = 0; part < 2 * p; ++part) {
        const PartPlace at = place_of(PipelineSchedule::kDualPipeV, shape, mb, part);
        ASSERT_EQ(model_part(PipelineSchedule::kDualPipeV, shape, at.stage, at.chunk), part);
      }
    for (const auto& program : stage_programs(PipelineSchedule::kDualPipeV, shape)) {
      std::map<std::tuple<PipeWork, int, int>, int> seen;
      for (std::size_t i = 0; i < program.size(); ++i) {
        const PipeAction& a = program[i];
        ++seen[{a.work, a.microbatch, a.chunk}];
        if (!a.overlaps_next) continue;
        ASSERT_EQ(a.work, PipeWork::kForward);
        ASSERT_LT(i + 1, program.size());
        ASSERT_TRUE(program[i + 1].work == PipeWork::kBackward || program[i + 1].work == PipeWork::kBackwardInput);
        ASSERT_NE(program[i + 1].chunk, a.chunk);
      }
      for (int mb = 0; mb < shape.microbatches; ++mb)
        for (int c = 0; c < 2; ++c) {
          ASSERT_EQ((seen[{PipeWork::kForward, mb, c}]), 1);
          const int input = seen[{PipeWork::kBackwardInput, mb, c}];
          ASSERT_EQ((seen[{PipeWork::kBackward, mb, c}]) + input, 1);
          ASSERT_EQ((seen[{PipeWork::kBackwardWeight, mb, c}]), input);
        }
    }
  }
  EXPECT_EQ(schedule_problem(PipelineSchedule::kDualPipeV, {4, 1, 7}),
            "dualpipev needs at least 2 x stages microbatches (DualPipeV's rule): 7 microbatches, 4 stages");
  EXPECT_NE(schedule_problem(PipelineSchedule::kDualPipeV, {4, 2, 8}), "");
  EXPECT_EQ(schedule_problem(PipelineSchedule::kDualPipeV, {3, 1, 6}), "");  // any number of stages
}

// Peaks of forwards done minus backwards done per stage (pairs (microbatch, chunk) for
// interleaving): 1F1B min(p - s, m); GPipe m; interleaved Megatron-LM's warmup plus the one
// forward before the first backward, min(w + 1, v m) with w = min(2 (p - s - 1) + (v - 1) p, v m)
// (Megatron-LM's max_outstanding_backprops); ZB-H1 1F1B's count up to Bi, and min(p, m) -- the
// first stage's 1F1B peak -- on every stage up to W; DualPipe p + 1 chunks' activations on every
// stage (Table 2 of the DeepSeek-V3 report: "PP + 1").
TEST(PipelineSchedulePeaks, InFlightMicrobatchesPerStage) {
  for (PipelineSchedule schedule : kAllSchedules) {
    for (const PipelineShape& shape : legal_shapes(schedule)) {
      const int p = shape.stages;
      const int v = shape.virtual_stages;
      const int m = shape.microbatches;
      const auto programs = stage_programs(schedule, shape);
      for (int s = 0; s < p; ++s) {
        SCOPED_TRACE(std::string(to_string(schedule)) + " p=" + std::to_string(p) + " v=" + std::to_string(v) +
                     " m=" + std::to_string(m) + " stage " + std::to_string(s));
        const InFlightPeak peak = peak_in_flight(programs[static_cast<std::size_t>(s)]);
        switch (schedule) {
          case PipelineSchedule::kGpipe: EXPECT_EQ(peak, (InFlightPeak{m, m})); break;
          case PipelineSchedule::kOneFOneB: EXPECT_EQ(peak, (InFlightPeak{std::min(p - s, m), std::min(p - s, m)})); break;
          case PipelineSchedule::kInterleaved: {
            const int warmup = std::min(2 * (p - s - 1) + (v - 1) * p, v * m);
            EXPECT_EQ(peak, (InFlightPeak{std::min(warmup + 1, v * m), std::min(warmup + 1, v * m)}));
            break;
          }
          case PipelineSchedule::kZeroBubbleH1: EXPECT_EQ(peak, (InFlightPeak{std::min(p - s, m), std::min(p, m)})); break;
          case PipelineSchedule::kDualPipe: EXPECT_EQ(peak, (InFlightPeak{p + 1, p + 1})); break;
          // The DualPipe README's PP + 1 with PP = 2p stages, its chunks, on each of the p ranks.
          case PipelineSchedule::kDualPipeV: EXPECT_EQ(peak, (InFlightPeak{2 * p + 1, 2 * p + 1})); break;
        }
      }
    }
  }
}

TEST(PipelineSchedulePeaks, CountsSplitBackwardsSeparately) {
  using W = PipeWork;
  const std::vector<PipeAction> program{{W::kForward, 0, 0},       {W::kForward, 1, 0},        {W::kBackwardInput, 0, 0},
                                        {W::kForward, 2, 0},       {W::kBackwardInput, 1, 0},  {W::kBackwardWeight, 0, 0},
                                        {W::kBackwardInput, 2, 0}, {W::kBackwardWeight, 1, 0}, {W::kBackwardWeight, 2, 0}};
  EXPECT_EQ(peak_in_flight(program), (InFlightPeak{2, 3}));
  EXPECT_EQ(peak_in_flight({}), (InFlightPeak{0, 0}));
}

// Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm): the 1F1B or interleaved
// program with one more warmup forward, every forward followed by a backward overlapped with it,
// the two of different microbatches (or chunks): without pipelining F0 F1+ B0 F2+ B1 ... B3; where
// the warmup takes every forward (no steady state) nothing is paired.
TEST(PipelineSchedulePrograms, CombinedOneFOneBOverlapsEachSteadyForwardWithAnEarlierBackward) {
  EXPECT_EQ(text(combined_1f1b_programs(PipelineSchedule::kOneFOneB, {1, 1, 4})[0]), "F0 F1+ B0 F2+ B1 F3+ B2 B3");
  EXPECT_EQ(text(combined_1f1b_programs(PipelineSchedule::kOneFOneB, {1, 1, 1})[0]), "F0 B0");
  for (const PipelineShape& shape : legal_shapes(PipelineSchedule::kInterleaved)) {
    SCOPED_TRACE("p=" + std::to_string(shape.stages) + " v=" + std::to_string(shape.virtual_stages) +
                 " m=" + std::to_string(shape.microbatches));
    const auto plain = stage_programs(PipelineSchedule::kInterleaved, shape);
    const auto combined = combined_1f1b_programs(PipelineSchedule::kInterleaved, shape);
    // Each pair launched once both its inputs are there: no stage waits forever.
    EXPECT_NO_THROW(time_programs(PipelineSchedule::kInterleaved, shape, combined, PassTimes{}));
    for (std::size_t s = 0; s < plain.size(); ++s) {
      // The same actions; the forwards in the same order, one more of them before the first backward.
      ASSERT_EQ(combined[s].size(), plain[s].size());
      const auto first_backward = [](const std::vector<PipeAction>& p) {
        return std::find_if(p.begin(), p.end(), [](const PipeAction& a) { return a.work == PipeWork::kBackward; }) -
               p.begin();
      };
      const auto n = static_cast<std::ptrdiff_t>(plain[s].size() / 2);
      EXPECT_EQ(first_backward(combined[s]), std::min(first_backward(plain[s]) + 1, n));
      // The steady state's forwards, each followed by a backward: those after the warmup's (Megatron-LM's
      // interleaved warmup, 2 (p - s - 1) + (v - 1) p, plus one), none when the warmup holds every forward.
      const int p = shape.stages, v = shape.virtual_stages, stage = static_cast<int>(s);
      const auto warmup = static_cast<std::size_t>(std::min<std::ptrdiff_t>((p - stage - 1) * 2 + (v - 1) * p + 1, n));
      for (std::size_t i = 0; i < combined[s].size(); ++i) {
        const PipeAction& a = combined[s][i];
        const bool paired = i >= warmup && a.work == PipeWork::kForward && i + 1 < combined[s].size() &&
                            combined[s][i + 1].work == PipeWork::kBackward;
        EXPECT_EQ(a.overlaps_next, paired) << i;
        if (paired) {
          EXPECT_FALSE(a.microbatch == combined[s][i + 1].microbatch && a.chunk == combined[s][i + 1].chunk);
        }
      }
    }
  }
  EXPECT_THROW(combined_1f1b_programs(PipelineSchedule::kOneFOneB, {2, 1, 4}), InternalError);
  EXPECT_THROW(combined_1f1b_programs(PipelineSchedule::kZeroBubbleH1, {1, 1, 4}), InternalError);
}

}  // namespace
}  // namespace moesim
