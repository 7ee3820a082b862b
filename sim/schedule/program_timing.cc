#include "sim/schedule/program_timing.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>

#include "sim/core/error.h"

namespace moesim {
namespace {

constexpr double kNotRun = -1.0;

std::string describe(const PipeAction& a, int stage) {
  return std::string(to_string(a.work)) + "(microbatch " + std::to_string(a.microbatch) + ", chunk " +
         std::to_string(a.chunk) + ") on stage " + std::to_string(stage);
}

// When each pass of each (microbatch, part) ended, kNotRun until it has run.
class PassEnds {
 public:
  PassEnds(int microbatches, int parts) : parts_(parts) {
    for (auto& ends : ends_) ends.assign(static_cast<std::size_t>(microbatches) * parts, kNotRun);
  }

  double& at(PipeWork w, int microbatch, int part) {
    return ends_[static_cast<std::size_t>(w)][static_cast<std::size_t>(microbatch) * parts_ + part];
  }
  double at(PipeWork w, int microbatch, int part) const {
    return ends_[static_cast<std::size_t>(w)][static_cast<std::size_t>(microbatch) * parts_ + part];
  }

  // The gradient part - 1 waits for comes from a whole backward or from its input half.
  double input_grad(int microbatch, int part) const {
    const double whole = at(PipeWork::kBackward, microbatch, part);
    return whole != kNotRun ? whole : at(PipeWork::kBackwardInput, microbatch, part);
  }

  // When `work` of (microbatch, part) may start as far as its dependencies go, or nullopt while
  // one of them has not run.
  std::optional<double> ready(PipeWork work, int microbatch, int part) const {
    std::array<double, 2> needs{0.0, 0.0};
    switch (work) {
      case PipeWork::kForward:
        if (part > 0) needs[0] = at(PipeWork::kForward, microbatch, part - 1);
        break;
      case PipeWork::kBackward:
      case PipeWork::kBackwardInput:
        needs[0] = at(PipeWork::kForward, microbatch, part);
        if (part + 1 < parts_) needs[1] = input_grad(microbatch, part + 1);
        break;
      case PipeWork::kBackwardWeight: needs[0] = at(PipeWork::kBackwardInput, microbatch, part); break;
    }
    if (needs[0] == kNotRun || needs[1] == kNotRun) return std::nullopt;
    return std::max(needs[0], needs[1]);
  }

  bool has_run(PipeWork work, int microbatch, int part) const {
    if (work == PipeWork::kBackward || work == PipeWork::kBackwardInput) {
      return input_grad(microbatch, part) != kNotRun;
    }
    return at(work, microbatch, part) != kNotRun;
  }

 private:
  int parts_;
  std::array<std::vector<double>, 4> ends_;
};

int part_of(PipelineSchedule schedule, const PipelineShape& shape, int stage, const PipeAction& a) {
  MOESIM_CHECK(a.microbatch >= 0 && a.microbatch < shape.microbatches && a.chunk >= 0 &&
                   a.chunk < chunks_per_stage(schedule, shape),
               describe(a, stage) + " is outside the shape");
  return model_part(schedule, shape, stage, a.chunk);
}

// DualPipe launches an overlapped F&B once the inputs of both have arrived (the reference waits
// for both receives before computing either): the forward at index i starts no earlier than the
// backward after it could, or nullopt while that one's inputs are missing.
std::optional<double> with_partner(PipelineSchedule schedule, const PipelineShape& shape, const PassEnds& ends,
                                   const std::vector<PipeAction>& program, int stage, std::size_t i, double ready) {
  MOESIM_CHECK(i + 1 < program.size() && program[i + 1].work != PipeWork::kForward,
               describe(program[i], stage) + " overlaps a following backward that is not there");
  const PipeAction& partner = program[i + 1];
  const std::optional<double> partner_ready =
      ends.ready(partner.work, partner.microbatch, part_of(schedule, shape, stage, partner));
  if (!partner_ready) return std::nullopt;
  return std::max(ready, *partner_ready);
}

double duration(const PassTimes& t, PipeWork w) {
  switch (w) {
    case PipeWork::kForward: return t.forward;
    case PipeWork::kBackward: return t.backward;
    case PipeWork::kBackwardInput: return t.backward_input;
    case PipeWork::kBackwardWeight: return t.backward_weight;
  }
  return 0.0;
}

}  // namespace

ProgramTiming time_programs(PipelineSchedule schedule, const PipelineShape& shape,
                            const std::vector<std::vector<PipeAction>>& programs, const PassTimes& times) {
  const auto parts = static_cast<std::size_t>(num_model_parts(schedule, shape));
  return time_programs_by_part(schedule, shape, programs, std::vector<PassTimes>(parts, times));
}

ProgramTiming time_programs_by_part(PipelineSchedule schedule, const PipelineShape& shape,
                                    const std::vector<std::vector<PipeAction>>& programs,
                                    const std::vector<PassTimes>& part_times) {
  const int parts = num_model_parts(schedule, shape);
  MOESIM_CHECK(part_times.size() == static_cast<std::size_t>(parts), "one PassTimes per model part");
  MOESIM_CHECK(programs.size() == static_cast<std::size_t>(shape.stages), "one program per stage");
  PassEnds ends(shape.microbatches, parts);
  ProgramTiming timing;
  timing.busy.assign(programs.size(), 0.0);
  std::vector<std::size_t> next(programs.size(), 0);
  std::vector<double> free_at(programs.size(), 0.0);
  for (const auto& program : programs) timing.start.emplace_back(program.size(), 0.0);
  // Start times depend only on dependencies' ends and each stage's order, never on which stage is
  // advanced first, so sweeping the stages until none moves gives the unique timing.
  for (bool moved = true; moved;) {
    moved = false;
    for (std::size_t s = 0; s < programs.size(); ++s) {
      for (std::size_t& i = next[s]; i < programs[s].size(); ++i) {
        const PipeAction& a = programs[s][i];
        const int stage = static_cast<int>(s);
        const int part = part_of(schedule, shape, stage, a);
        std::optional<double> ready = ends.ready(a.work, a.microbatch, part);
        if (ready && a.overlaps_next) ready = with_partner(schedule, shape, ends, programs[s], stage, i, *ready);
        if (!ready) break;
        MOESIM_CHECK(!ends.has_run(a.work, a.microbatch, part), describe(a, stage) + " runs twice");
        const PassTimes& times = part_times[static_cast<std::size_t>(part)];
        const double took =
            a.overlaps_next && times.forward_paired >= 0 ? times.forward_paired : duration(times, a.work);
        timing.start[s][i] = std::max(*ready, free_at[s]);
        free_at[s] = timing.start[s][i] + took;
        ends.at(a.work, a.microbatch, part) = free_at[s];
        timing.busy[s] += took;
        timing.makespan = std::max(timing.makespan, free_at[s]);
        moved = true;
      }
    }
  }
  for (std::size_t s = 0; s < programs.size(); ++s) {
    MOESIM_CHECK(next[s] == programs[s].size(), std::string(to_string(schedule)) + " deadlocks: " +
                                                    describe(programs[s][next[s]], static_cast<int>(s)) +
                                                    " waits for a pass that never runs");
  }
  return timing;
}

}  // namespace moesim
