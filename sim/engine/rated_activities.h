// RatedActivities: bookkeeping for models whose activities have a fixed amount of isolated work.
//
// An activity needs `work_ns` of work measured at full speed and progresses at a rate factor in
// (0, 1] (an interference factor, a bandwidth share). Between rate changes progress is linear, so
// the completion time is stored as an exact integer:
//   completion = last_update + ceil(remaining_work / rate)
// and only recomputed when the rate changes (the remaining work is then reduced by
// (now - last_update) * old_rate). Completions are therefore exact and deterministic and do not
// drift with the number of engine steps. Zero-work activities complete at their start time.
// An activity may open with a fixed wait (a collective's latency, which holds no link): it
// elapses at wall-clock speed whatever the rate, and the work starts after it.
#pragma once

#include <cstddef>
#include <map>
#include <vector>

#include "sim/core/units.h"
#include "sim/graph/task.h"

namespace moesim {

class RatedActivities {
 public:
  // Starts `task` at `now` with a fixed wait of `fixed_ns`, then `work_ns` of isolated work
  // progressing at `rate`.
  void add(TaskIndex task, TimeNs work_ns, TimeNs now, double rate, TimeNs fixed_ns = 0);
  // Changes the rate of a running task from `now` on; a no-op when the rate is unchanged.
  void set_rate(TaskIndex task, double rate, TimeNs now);

  bool contains(TaskIndex task) const { return activities_.count(task) != 0; }
  double rate(TaskIndex task) const;
  std::size_t size() const { return activities_.size(); }
  // Running tasks in ascending index.
  std::vector<TaskIndex> running() const;

  // Earliest completion among running activities, or kNever.
  TimeNs next_completion() const;
  // Removes the activities that complete at or before `now` and appends them in ascending index.
  void advance_to(TimeNs now, std::vector<TaskIndex>& finished);

 private:
  struct Activity {
    double remaining_ns = 0;  // isolated work left as of last_update
    double rate = 1;
    TimeNs last_update = 0;
    TimeNs work_from = 0;  // the end of the fixed wait: no work is done before it
    TimeNs completion = 0;
  };
  static TimeNs completion_of(const Activity& a);

  std::map<TaskIndex, Activity> activities_;
};

}  // namespace moesim
