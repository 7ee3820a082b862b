// The discrete-event engine.
//
// Runs a TaskGraph to completion: a task starts when all its predecessors are done (stream edges
// make streams in-order and collectives rendezvous); its model advances it; the engine jumps to
// the earliest completion among all models. Deterministic: at equal times, completions are
// processed in (model registration order, task index) order and ready tasks start in task index
// order, so identical inputs give identical traces.
#pragma once

#include <memory>
#include <vector>

#include "sim/engine/activity_model.h"
#include "sim/engine/host_issue.h"
#include "sim/engine/kernel_queue.h"
#include "sim/engine/observer.h"
#include "sim/graph/task_graph.h"

namespace moesim {

class Engine {
 public:
  explicit Engine(const TaskGraph& graph);

  // Models are consulted in registration order; every task must be handled by exactly one.
  void add_model(std::unique_ptr<ActivityModel> model);
  // Observers are not owned and must outlive run().
  void add_observer(EngineObserver* observer);
  // Ranks with equal entries run on one physical device (loopback virtual ranks): models see
  // their busy streams together (Concurrency). Default: every rank its own device.
  void share_devices(std::vector<int> device_of_rank);
  // One KernelRole per task: tasks that queue behind the kernels running on their device
  // (sim/engine/kernel_queue.h). Default: no task waits for another's kernels.
  void queue_kernels(std::vector<KernelRole> role_of_task);
  // Tasks wait for their ranks' hosts to issue them (sim/engine/host_issue.h). Default: the host
  // is not modelled; a task starts when its predecessors end.
  void issue_from_host(HostIssueSpec spec);

  // Runs every task; returns the time the last one finished. Throws InternalError if a task has
  // no model or the run stalls (a model that never completes its activities).
  TimeNs run();

 private:
  const TaskGraph& graph_;
  std::vector<std::unique_ptr<ActivityModel>> models_;
  std::vector<EngineObserver*> observers_;
  std::vector<int> device_of_rank_;
  std::vector<KernelRole> kernel_roles_;
  HostIssueSpec host_issue_;
};

}  // namespace moesim
