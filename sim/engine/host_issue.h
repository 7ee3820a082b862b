// HostIssuer: the CPU thread that issues each rank's device work.
//
// A framework such as PyTorch launches every kernel, copy and collective of a rank from one host
// thread, in program order, and each launch costs host time (the framework's dispatch, the CUDA
// driver's launch). A task cannot start on the GPU before its launch has been issued. Launches are
// asynchronous, so the host runs ahead of the GPU, until it needs a value the GPU computes (the
// MoE dispatcher's split sizes, `.item()` of the gradient norm): there it waits for that task to
// end before it issues anything that follows.
//
// Model: each rank's issued tasks are issued in ascending task index (the graph's emission order,
// which the step builder keeps as each rank's program order, or the spec's issue_order where it
// interleaves two passes' streams), one after the other, `launch_ns`
// each; a task on several ranks (a collective) is issued when the last of them has issued it; a
// host read blocks its ranks' hosts from its issue until its end. Not modelled: a bound on how far
// the host runs ahead (a stream's launch queue holds about 1,000 kernels before a launch blocks:
// measured on a 2018 GPU, https://forums.developer.nvidia.com/t/68937; the host only gets that far
// ahead where it is not the bottleneck), host work other than launches (Python between launches
// is folded into the per-launch time).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/core/units.h"
#include "sim/graph/task.h"
#include "sim/graph/task_graph.h"

namespace moesim {

// A task the host model does not gate: it starts when its predecessors end, as without a host.
inline constexpr TimeNs kNotIssued = -1;

struct HostIssueSpec {
  std::vector<TimeNs> launch_ns;      // per task: host time to issue it, or kNotIssued
  std::vector<TaskIndex> host_reads;  // issued tasks whose end their hosts wait for
  // The program order: every task index once. Empty: ascending index (the graph's emission
  // order); given where the graph's streams run tasks in another order (hold_stream_order).
  std::vector<TaskIndex> issue_order;
};

class HostIssuer {
 public:
  // (time, task): the task has been issued by every rank it runs on at that time.
  using Issued = std::vector<std::pair<TimeNs, TaskIndex>>;

  HostIssuer() = default;  // inactive: nothing is gated
  // `ranks_of_task`: the simulated ranks each task runs on; `world_size` bounds them. Throws
  // InternalError when a rank would issue a task before one of its own predecessors (the graph's
  // emission order is not that rank's program order): its host would wait for itself.
  HostIssuer(HostIssueSpec spec, const std::vector<std::vector<int>>& ranks_of_task, const TaskGraph& graph);

  bool active() const { return !spec_.launch_ns.empty(); }
  // Whether `task` waits for its issue besides its predecessors.
  bool gates(TaskIndex task) const { return active() && spec_.launch_ns[task] != kNotIssued; }
  // Issues what every host can issue from time 0; appends the tasks issued.
  void begin(Issued& out);
  // `task` ended at `now`: the hosts that waited for it issue on; appends the tasks issued.
  void ended(TaskIndex task, TimeNs now, Issued& out);
  // (rank, time) of each rank's issue of `task`, a task on several ranks, once every rank issued
  // it (empty for a task on one rank): each GPU's kernel of a collective arrives when its own host
  // launched it (sim/engine/kernel_queue.h).
  const std::vector<std::pair<int, TimeNs>>& issues_by_rank(TaskIndex task) const;

 private:
  struct Host {
    std::vector<TaskIndex> order;  // the tasks this rank issues, in program order
    std::size_t next = 0;          // the next one to issue
    TimeNs clock = 0;              // when the host is free to issue it
    bool blocked = false;          // waiting for the end of the task it issued last (a host read)
  };
  void advance(int rank, Issued& out);
  void check_program_order(const TaskGraph& graph) const;

  HostIssueSpec spec_;
  std::vector<Host> hosts_;
  std::vector<std::uint32_t> ranks_left_;  // per task: ranks that have not issued it yet
  std::vector<TimeNs> issued_at_;          // per task: the latest issue among its ranks so far
  std::vector<TaskIndex> position_;        // per task: its place in the program order
  // Per task on several ranks: each rank's issue, in the order the ranks issued it.
  std::unordered_map<TaskIndex, std::vector<std::pair<int, TimeNs>>> issues_by_rank_;
  std::vector<bool> host_read_;
  const std::vector<std::vector<int>>* ranks_of_task_ = nullptr;
};

}  // namespace moesim
