#include "sim/engine/rated_activities.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "sim/core/duration.h"
#include "sim/core/error.h"

namespace moesim {
namespace {

// Work left below this is rounding noise from rate products such as 500 * 0.96, not work.
constexpr double kAbsoluteSlackNs = 1e-6;
constexpr double kRelativeSlack = 1e-12;

void check_rate(double rate) {
  MOESIM_CHECK(rate > 0.0 && rate <= 1.0,
               "activity rate must be in (0, 1], got " + std::to_string(rate));
}

}  // namespace

TimeNs RatedActivities::completion_of(const Activity& a) {
  const TimeNs from = std::max(a.last_update, a.work_from);
  const double span = a.remaining_ns / a.rate;
  const double slack = std::max(kAbsoluteSlackNs, span * kRelativeSlack);
  if (span <= slack) return from;
  const double end = static_cast<double>(from) + std::ceil(span - slack);
  if (!(end <= kMaxDurationNs)) {
    throw InputError("simulated time would exceed 2^62 ns (an activity slowed to rate " +
                     std::to_string(a.rate) + "): check the interference factors and sizes");
  }
  return static_cast<TimeNs>(end);
}

void RatedActivities::add(TaskIndex task, TimeNs work_ns, TimeNs now, double rate, TimeNs fixed_ns) {
  MOESIM_CHECK(work_ns >= 0 && fixed_ns >= 0, "negative work for task " + std::to_string(task));
  check_rate(rate);
  Activity a;
  a.remaining_ns = static_cast<double>(work_ns);
  a.rate = rate;
  a.last_update = now;
  a.work_from = now + fixed_ns;
  a.completion = completion_of(a);
  const bool inserted = activities_.emplace(task, a).second;
  MOESIM_CHECK(inserted, "task " + std::to_string(task) + " started twice");
}

void RatedActivities::set_rate(TaskIndex task, double rate, TimeNs now) {
  check_rate(rate);
  auto it = activities_.find(task);
  MOESIM_CHECK(it != activities_.end(), "task " + std::to_string(task) + " is not running");
  Activity& a = it->second;
  if (a.rate == rate) return;
  MOESIM_CHECK(now >= a.last_update && now <= a.completion,
               "rate change outside the activity's lifetime");
  // Work was done only since the fixed wait ended.
  const TimeNs worked_from = std::max(a.last_update, a.work_from);
  if (now > worked_from)
    a.remaining_ns = std::max(0.0, a.remaining_ns - static_cast<double>(now - worked_from) * a.rate);
  a.last_update = now;
  a.rate = rate;
  a.completion = completion_of(a);
}

double RatedActivities::rate(TaskIndex task) const {
  auto it = activities_.find(task);
  MOESIM_CHECK(it != activities_.end(), "task " + std::to_string(task) + " is not running");
  return it->second.rate;
}

std::vector<TaskIndex> RatedActivities::running() const {
  std::vector<TaskIndex> out;
  out.reserve(activities_.size());
  for (const auto& [task, a] : activities_) out.push_back(task);
  return out;
}

TimeNs RatedActivities::next_completion() const {
  TimeNs next = kNever;
  for (const auto& [task, a] : activities_) next = std::min(next, a.completion);
  return next;
}

void RatedActivities::advance_to(TimeNs now, std::vector<TaskIndex>& finished) {
  for (auto it = activities_.begin(); it != activities_.end();) {
    if (it->second.completion <= now) {
      finished.push_back(it->first);
      it = activities_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace moesim
