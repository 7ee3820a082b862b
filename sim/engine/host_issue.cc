#include "sim/engine/host_issue.h"

#include <algorithm>
#include <string>

#include "sim/core/error.h"

namespace moesim {

HostIssuer::HostIssuer(HostIssueSpec spec, const std::vector<std::vector<int>>& ranks_of_task, const TaskGraph& graph)
    : spec_(std::move(spec)), ranks_of_task_(&ranks_of_task) {
  const int world_size = graph.world_size();
  const std::size_t n = ranks_of_task.size();
  MOESIM_CHECK(spec_.launch_ns.size() == n, "the host issue model needs one launch time per task");
  hosts_.resize(static_cast<std::size_t>(world_size));
  ranks_left_.assign(n, 0);
  issued_at_.assign(n, 0);
  host_read_.assign(n, false);
  position_.resize(n);
  if (spec_.issue_order.empty()) {
    for (TaskIndex i = 0; i < n; ++i) position_[i] = i;
  } else {
    MOESIM_CHECK(spec_.issue_order.size() == n, "the host issue order must list every task once");
    std::vector<bool> seen(n, false);
    for (std::size_t k = 0; k < n; ++k) {
      const TaskIndex i = spec_.issue_order[k];
      MOESIM_CHECK(i < n && !seen[i], "the host issue order must list every task once");
      seen[i] = true;
      position_[i] = static_cast<TaskIndex>(k);
    }
  }
  for (std::size_t k = 0; k < n; ++k) {
    const TaskIndex i = spec_.issue_order.empty() ? static_cast<TaskIndex>(k) : spec_.issue_order[k];
    const TimeNs launch = spec_.launch_ns[i];
    if (launch == kNotIssued) continue;
    MOESIM_CHECK(launch >= 0, "a negative host launch time");
    MOESIM_CHECK(!ranks_of_task[i].empty(), "an issued task runs on no simulated rank");
    for (int r : ranks_of_task[i]) {
      MOESIM_CHECK(r >= 0 && r < world_size, "an issued task's rank is outside the world");
      hosts_[static_cast<std::size_t>(r)].order.push_back(i);
    }
    ranks_left_[i] = static_cast<std::uint32_t>(ranks_of_task[i].size());
  }
  check_program_order(graph);
  for (TaskIndex i : spec_.host_reads) {
    MOESIM_CHECK(i < n && spec_.launch_ns[i] != kNotIssued,
                 "a host read (task " + std::to_string(i) + ") that the host does not issue");
    host_read_[i] = true;
  }
}

void HostIssuer::check_program_order(const TaskGraph& graph) const {
  const auto& ranks = *ranks_of_task_;
  for (TaskIndex i = 0; i < ranks.size(); ++i) {
    if (spec_.launch_ns[i] == kNotIssued) continue;
    for (TaskIndex p : graph.predecessors(i)) {
      if (position_[p] < position_[i] || spec_.launch_ns[p] == kNotIssued) continue;
      for (int r : ranks[i])
        if (std::find(ranks[p].begin(), ranks[p].end(), r) != ranks[p].end())
          throw InternalError("rank " + std::to_string(r) + " would issue task '" + graph.task(i).id +
                              "' before its predecessor '" + graph.task(p).id +
                              "': the issue order is not the rank's program order (host issue model)");
    }
  }
}

void HostIssuer::begin(Issued& out) {
  for (std::size_t r = 0; r < hosts_.size(); ++r) advance(static_cast<int>(r), out);
}

void HostIssuer::ended(TaskIndex task, TimeNs now, Issued& out) {
  if (!active() || !host_read_[task]) return;
  for (int r : (*ranks_of_task_)[task]) {
    Host& h = hosts_[static_cast<std::size_t>(r)];
    // The host issued this read last and has waited for it since (a gated task cannot end before
    // every one of its ranks has issued it).
    MOESIM_CHECK(h.blocked && h.next > 0 && h.order[h.next - 1] == task, "a host read ended that its host did not wait for");
    h.blocked = false;
    h.clock = std::max(h.clock, now);
    advance(r, out);
  }
}

void HostIssuer::advance(int rank, Issued& out) {
  Host& h = hosts_[static_cast<std::size_t>(rank)];
  while (!h.blocked && h.next < h.order.size()) {
    const TaskIndex task = h.order[h.next++];
    h.clock += spec_.launch_ns[task];
    issued_at_[task] = std::max(issued_at_[task], h.clock);
    if ((*ranks_of_task_)[task].size() > 1) issues_by_rank_[task].emplace_back(rank, h.clock);
    if (--ranks_left_[task] == 0) out.emplace_back(issued_at_[task], task);
    h.blocked = host_read_[task];
  }
}

const std::vector<std::pair<int, TimeNs>>& HostIssuer::issues_by_rank(TaskIndex task) const {
  static const std::vector<std::pair<int, TimeNs>> kNone;
  const auto it = issues_by_rank_.find(task);
  return it == issues_by_rank_.end() ? kNone : it->second;
}

}  // namespace moesim
