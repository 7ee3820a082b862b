// Timing stage programs (sim/schedule/program_timing.h) with per-part passes F = 1, B = 2
// (Bi = 1, W = 1) and no transfer time: every program of the shape grid runs to the end without
// deadlock, and the step times match the published closed forms.
#include "sim/schedule/program_timing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/core/error.h"
#include "tests/sim/schedule/schedule_shapes.h"

namespace moesim {
namespace {

using ::testing::HasSubstr;
using testing::kAllSchedules;
using testing::legal_shapes;

std::string name(PipelineSchedule schedule, const PipelineShape& shape) {
  return std::string(to_string(schedule)) + " p=" + std::to_string(shape.stages) +
         " v=" + std::to_string(shape.virtual_stages) + " m=" + std::to_string(shape.microbatches);
}

ProgramTiming time_schedule(PipelineSchedule schedule, const PipelineShape& shape, const PassTimes& times = {}) {
  return time_programs(schedule, shape, stage_programs(schedule, shape), times);
}

std::string internal_error_of(PipelineSchedule schedule, const PipelineShape& shape,
                              const std::vector<std::vector<PipeAction>>& programs) {
  try {
    time_programs(schedule, shape, programs, {});
  } catch (const InternalError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ProgramTiming, EveryProgramOfTheGridRunsToTheEnd) {
  for (PipelineSchedule schedule : kAllSchedules) {
    for (const PipelineShape& shape : legal_shapes(schedule)) {
      SCOPED_TRACE(name(schedule, shape));
      ProgramTiming t;
      ASSERT_NO_THROW(t = time_schedule(schedule, shape));
      // Each stage runs all its passes: (F + B) per (microbatch, chunk), Bi + W being B.
      const int chunks = schedule == PipelineSchedule::kDualPipeV ? 2 : shape.virtual_stages;
      for (double busy : t.busy) ASSERT_EQ(busy, 3.0 * shape.microbatches * chunks);
    }
  }
}

// GPipe and 1F1B (Narayanan et al., SC21, sections 2.2.1-2.2.2): (m + p - 1)(tF + tB) with
// per-stage pass times tF, tB; here tF = 1, tB = 2, and tF = 1, tB = 3, on every shape.
TEST(ProgramTiming, GpipeAndOneFOneBTakeMPlusPMinusOneSlots) {
  for (PipelineSchedule schedule : {PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB}) {
    for (const PipelineShape& shape : legal_shapes(schedule)) {
      SCOPED_TRACE(name(schedule, shape));
      const int slots = shape.microbatches + shape.stages - 1;
      EXPECT_EQ(time_schedule(schedule, shape).makespan, 3.0 * slots);
      EXPECT_EQ(time_schedule(schedule, shape, {.forward = 1, .backward = 3}).makespan, 4.0 * slots);
    }
  }
}

// Interleaved 1F1B (SC21 section 2.2.2): the same model cut into v chunks per stage has
// per-stage pass times tF = v, tB = 2v per microbatch; the bubble is (p - 1)(tF + tB) / v, a
// v-th of 1F1B's, so the step time is 3 v m + 3 (p - 1) exactly, on every legal shape (m a
// multiple of p, including m = p), and 4 v m + 4 (p - 1) with B = 3.
TEST(ProgramTiming, InterleavedBubbleIsAVthOfOneFOneBs) {
  for (const PipelineShape& shape : legal_shapes(PipelineSchedule::kInterleaved)) {
    SCOPED_TRACE(name(PipelineSchedule::kInterleaved, shape));
    const double work = 1.0 * shape.virtual_stages * shape.microbatches;
    const double one_f_one_b_bubble = 3.0 * shape.virtual_stages * (shape.stages - 1);
    const ProgramTiming t = time_schedule(PipelineSchedule::kInterleaved, shape);
    EXPECT_EQ(t.makespan - 3.0 * work, one_f_one_b_bubble / shape.virtual_stages);
    EXPECT_EQ(time_schedule(PipelineSchedule::kInterleaved, shape, {.forward = 1, .backward = 3}).makespan,
              4.0 * work + 4.0 * (shape.stages - 1));
  }
}

// ZB-H1 (Qi et al., ICLR 2024, section 3.1 and Table 2): bubble (p - 1)(TF + TB - TW) with TB
// the input-gradient pass, here (p - 1)(1 + 1 - 1), a third of 1F1B's 3 (p - 1), when m >= p
// (the paper's setting). With fewer microbatches it is still never slower than 1F1B.
TEST(ProgramTiming, ZeroBubbleH1BubbleIsAThirdOfOneFOneBs) {
  for (const PipelineShape& shape : legal_shapes(PipelineSchedule::kZeroBubbleH1)) {
    SCOPED_TRACE(name(PipelineSchedule::kZeroBubbleH1, shape));
    const double makespan = time_schedule(PipelineSchedule::kZeroBubbleH1, shape).makespan;
    const double one_f_one_b = time_schedule(PipelineSchedule::kOneFOneB, shape).makespan;
    EXPECT_LE(makespan, one_f_one_b);
    if (shape.microbatches >= shape.stages) {
      EXPECT_EQ(makespan, 3.0 * shape.microbatches + (shape.stages - 1));
      EXPECT_EQ(3.0 * (makespan - 3.0 * shape.microbatches), one_f_one_b - 3.0 * shape.microbatches);
    }
  }
}

// DualPipe (DeepSeek-V3 report Table 2; deepseek-ai/DualPipe's README): bubble
// (p/2 - 1)(F&B + B - 3W) with B the whole backward (Bi + W) and F&B the overlapped pair, here
// F + B (one pass at a time). Pass times with F <= Bi and W <= Bi (a backward pass is the longest,
// as in a transformer); outside that range the closed form no longer holds (it can go negative).
const PassTimes kDualPipeTimes[] = {{1, 2, 1, 1}, {10, 20, 13, 7}, {2, 4, 3, 1}, {1, 3, 2, 1}, {3, 6, 3, 3}};

double dualpipe_formula(const PipelineShape& shape, const PassTimes& t) {
  return (shape.stages / 2 - 1) * ((t.forward + t.backward) + t.backward - 3 * t.backward_weight);
}

std::string with_times(const PipelineShape& shape, const PassTimes& t) {
  return name(PipelineSchedule::kDualPipe, shape) + " F=" + std::to_string(t.forward) +
         " Bi=" + std::to_string(t.backward_input) + " W=" + std::to_string(t.backward_weight);
}

// The report's Figure 5 overlaps every forward that a backward of the other direction follows;
// the reference code leaves the middle stages' first such pair of its main phase apart. With
// every pair overlapped each stage idles exactly the published bubble, on every legal shape.
TEST(ProgramTiming, DualPipeWithEveryPairOverlappedIdlesThePublishedBubble) {
  for (const PassTimes& t : kDualPipeTimes) {
    for (const PipelineShape& shape : legal_shapes(PipelineSchedule::kDualPipe)) {
      SCOPED_TRACE(with_times(shape, t));
      auto programs = stage_programs(PipelineSchedule::kDualPipe, shape);
      for (auto& program : programs)
        for (std::size_t i = 0; i + 1 < program.size(); ++i)
          if (program[i].work == PipeWork::kForward && program[i + 1].work != PipeWork::kForward &&
              program[i + 1].chunk != program[i].chunk)
            program[i].overlaps_next = true;
      const ProgramTiming timing = time_programs(PipelineSchedule::kDualPipe, shape, programs, t);
      for (double busy : timing.busy) EXPECT_EQ(timing.makespan - busy, dualpipe_formula(shape, t));
    }
  }
}

// The reference's order ("we don't overlap these two chunks to further reduce bubble size"): never
// more than the published bubble, the same where F = Bi, and less where Bi > F (by 3 = Bi - F per
// p/2 - 1 with F = 10, Bi = 13, W = 7: 26 instead of 29 on 4 stages).
TEST(ProgramTiming, DualPipeIdlesAtMostThePublishedBubble) {
  for (const PassTimes& t : kDualPipeTimes) {
    for (const PipelineShape& shape : legal_shapes(PipelineSchedule::kDualPipe)) {
      SCOPED_TRACE(with_times(shape, t));
      const ProgramTiming timing = time_schedule(PipelineSchedule::kDualPipe, shape, t);
      for (double busy : timing.busy) {
        EXPECT_LE(timing.makespan - busy, dualpipe_formula(shape, t));
        if (t.forward == t.backward_input) {
          EXPECT_EQ(timing.makespan - busy, dualpipe_formula(shape, t));
        }
      }
    }
  }
  const ProgramTiming t = time_schedule(PipelineSchedule::kDualPipe, {4, 1, 8}, {10, 20, 13, 7});
  for (double busy : t.busy) EXPECT_EQ(t.makespan - busy, 26);
}

// DualPipeV, DualPipe cut in half (deepseek-ai/DualPipe's README): the bubble of DualPipe with twice
// the stages, (PP/2 - 1)(F&B + B - 3W) with PP = 2p, F and B per chunk: (p - 1)(F&B + B - 3W);
// exactly that with every pair overlapped, at most that in the reference's order.
TEST(ProgramTiming, DualPipeVIdlesDualPipesBubbleOfTwiceTheStages) {
  for (const PassTimes& t : kDualPipeTimes) {
    for (const PipelineShape& shape : legal_shapes(PipelineSchedule::kDualPipeV)) {
      SCOPED_TRACE(name(PipelineSchedule::kDualPipeV, shape) + " F=" + std::to_string(t.forward) +
                   " Bi=" + std::to_string(t.backward_input) + " W=" + std::to_string(t.backward_weight));
      const double bubble = dualpipe_formula({2 * shape.stages, 1, 2 * shape.microbatches}, t);
      const ProgramTiming reference = time_schedule(PipelineSchedule::kDualPipeV, shape, t);
      for (double busy : reference.busy) EXPECT_LE(reference.makespan - busy, bubble);
      auto programs = stage_programs(PipelineSchedule::kDualPipeV, shape);
      for (auto& program : programs)
        for (std::size_t i = 0; i + 1 < program.size(); ++i)
          if (program[i].work == PipeWork::kForward && program[i + 1].work != PipeWork::kForward &&
              program[i + 1].chunk != program[i].chunk)
            program[i].overlaps_next = true;
      const ProgramTiming all = time_programs(PipelineSchedule::kDualPipeV, shape, programs, t);
      for (double busy : all.busy) EXPECT_EQ(all.makespan - busy, bubble);
    }
  }
}

// The overlapped pair is launched together: without that (each pass starting as soon as its own
// input is in, as in the whole step's event simulation) the unit-time bubble is p/2 - 1, half the
// published 2 (p/2 - 1).
TEST(ProgramTiming, DualPipePairsLaunchTogether) {
  for (const PipelineShape& shape : legal_shapes(PipelineSchedule::kDualPipe)) {
    SCOPED_TRACE(name(PipelineSchedule::kDualPipe, shape));
    auto programs = stage_programs(PipelineSchedule::kDualPipe, shape);
    for (auto& program : programs)
      for (PipeAction& a : program) a.overlaps_next = false;
    const ProgramTiming t = time_programs(PipelineSchedule::kDualPipe, shape, programs, {});
    for (double busy : t.busy) EXPECT_EQ(t.makespan - busy, shape.stages / 2 - 1);
  }
}

TEST(ProgramTiming, StartsFollowDependenciesAndStageOrder) {
  // 1F1B, p = 2, m = 2: stage 0's B0 waits for stage 1's B0 (ends at 4), its B1 for stage 1's
  // B1 (ends at 7); stage 1's F1 waits for its own B0.
  const ProgramTiming t = time_schedule(PipelineSchedule::kOneFOneB, {2, 1, 2});
  EXPECT_THAT(t.start[0], ::testing::ElementsAre(0, 1, 4, 7));  // F0 F1 B0 B1
  EXPECT_THAT(t.start[1], ::testing::ElementsAre(1, 2, 4, 5));  // F0 B0 F1 B1
  EXPECT_EQ(t.makespan, 9);
}

// Per-part pass times (the layout planner's estimate): a uniform list is the single PassTimes; one
// microbatch takes the sum of every part's passes; and 1F1B on p = 2, m = 2 with part 0 at F = 1,
// B = 2 and part 1 at F = 2, B = 4, by hand: stage 1 runs F0 [1, 3], B0 [3, 7], F1 [7, 9],
// B1 [9, 13]; stage 0 runs F0 [0, 1], F1 [1, 2], B0 [7, 9], B1 [13, 15].
TEST(ProgramTiming, TakesPassTimesPerModelPart) {
  for (PipelineSchedule schedule : kAllSchedules) {
    for (const PipelineShape& shape : legal_shapes(schedule)) {
      SCOPED_TRACE(name(schedule, shape));
      const auto programs = stage_programs(schedule, shape);
      const PassTimes times{1.5, 2.5, 1.25, 1.25};
      const auto parts = static_cast<std::size_t>(num_model_parts(schedule, shape));
      const ProgramTiming uniform = time_programs_by_part(schedule, shape, programs, std::vector<PassTimes>(parts, times));
      EXPECT_EQ(uniform.makespan, time_programs(schedule, shape, programs, times).makespan);
      EXPECT_EQ(uniform.start, time_programs(schedule, shape, programs, times).start);
    }
  }
  for (int p = 1; p <= 8; ++p) {
    std::vector<PassTimes> parts;
    double sum = 0;
    for (int q = 0; q < p; ++q) {
      parts.push_back(PassTimes{1.0 + q, 2.0 + 3 * q, 1, 1});
      sum += parts.back().forward + parts.back().backward;
    }
    const PipelineShape shape{p, 1, 1};
    for (PipelineSchedule schedule : {PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB})
      EXPECT_EQ(time_programs_by_part(schedule, shape, stage_programs(schedule, shape), parts).makespan, sum);
  }
  const PipelineShape two{2, 1, 2};
  const ProgramTiming t = time_programs_by_part(PipelineSchedule::kOneFOneB, two,
                                                stage_programs(PipelineSchedule::kOneFOneB, two),
                                                std::vector<PassTimes>{{1, 2, 1, 1}, {2, 4, 2, 2}});
  EXPECT_THAT(t.start[0], ::testing::ElementsAre(0, 1, 7, 13));
  EXPECT_THAT(t.start[1], ::testing::ElementsAre(1, 3, 7, 9));
  EXPECT_EQ(t.makespan, 15);
}

TEST(ProgramTiming, NamesADeadlock) {
  using W = PipeWork;
  // Stage 1 wants microbatch 1 before microbatch 0, while stage 0 sends 0 first and then waits for
  // 0's gradient before sending 1 (1F1B's order with p = 2 on stage 0, no warmup).
  const std::vector<std::vector<PipeAction>> programs{
      {{W::kForward, 0, 0}, {W::kBackward, 0, 0}, {W::kForward, 1, 0}, {W::kBackward, 1, 0}},
      {{W::kForward, 1, 0}, {W::kBackward, 1, 0}, {W::kForward, 0, 0}, {W::kBackward, 0, 0}}};
  EXPECT_THAT(internal_error_of(PipelineSchedule::kOneFOneB, {2, 1, 2}, programs),
              HasSubstr("1f1b deadlocks: B(microbatch 0, chunk 0) on stage 0 waits for a pass that never runs"));
}

TEST(ProgramTiming, RefusesRepeatedAndOutOfShapeActions) {
  using W = PipeWork;
  EXPECT_THAT(internal_error_of(PipelineSchedule::kGpipe, {1, 1, 1},
                                {{{W::kForward, 0, 0}, {W::kBackward, 0, 0}, {W::kBackward, 0, 0}}}),
              HasSubstr("B(microbatch 0, chunk 0) on stage 0 runs twice"));
  EXPECT_THAT(internal_error_of(PipelineSchedule::kGpipe, {1, 1, 1}, {{{W::kForward, 0, 1}}}),
              HasSubstr("F(microbatch 0, chunk 1) on stage 0 is outside the shape"));
  EXPECT_THAT(internal_error_of(PipelineSchedule::kGpipe, {2, 1, 1}, {{{W::kForward, 0, 0}}}),
              HasSubstr("one program per stage"));
}

}  // namespace
}  // namespace moesim
