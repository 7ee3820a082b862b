#include "sim/net/flow_network.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "sim/core/checked_math.h"
#include "sim/core/duration.h"
#include "sim/core/error.h"
#include "sim/engine/interference.h"

namespace moesim {
namespace {

std::vector<double> capacities(const ClusterTopology& topo) {
  std::vector<double> c(topo.num_links());
  for (std::size_t l = 0; l < c.size(); ++l) c[l] = topo.link(static_cast<LinkId>(l)).capacity;
  return c;
}

}  // namespace

FlowSimulator::FlowSimulator(const ClusterTopology& topo) : rates_(capacities(topo)) {}

void FlowSimulator::start(std::uint64_t id, std::shared_ptr<const CollectivePlan> plan, TimeNs now,
                          double factor) {
  MOESIM_CHECK(plans_.count(id) == 0, "plan " + std::to_string(id) + " started twice");
  settle(now);
  Running& r = plans_[id];
  r.plan = std::move(plan);
  r.factor = factor;
  begin_phase(id, r, now);
}

void FlowSimulator::set_factor(std::uint64_t id, double factor, TimeNs now) {
  auto it = plans_.find(id);
  if (it == plans_.end() || it->second.factor == factor) return;
  settle(now);
  it->second.factor = factor;
  recompute(now);
}

void FlowSimulator::begin_phase(std::uint64_t id, Running& r, TimeNs now) {
  if (r.phase >= r.plan->phases.size()) {
    r.done = true;
    return;
  }
  const PlanPhase& phase = r.plan->phases[r.phase];
  if (phase.local_ns > 0) {
    r.in_local = true;
    r.local_end = now + phase.local_ns;
  } else {
    launch_flows(id, r, now);
  }
}

void FlowSimulator::launch_flows(std::uint64_t id, Running& r, TimeNs now) {
  r.in_local = false;
  r.local_end = kNever;
  const PlanPhase& phase = r.plan->phases[r.phase];
  for (const FlowSpec& spec : phase.flows) {
    Flow f;
    f.plan = id;
    f.spec = &spec;
    f.remaining = spec.bytes;
    f.start_at = now;
    flows_.push_back(f);
  }
  r.flows_left = static_cast<int>(phase.flows.size());
}

bool FlowSimulator::phase_done(std::uint64_t id, Running& r, TimeNs now) {
  if (++r.repeat_done < r.plan->phases[r.phase].repeat) {
    begin_phase(id, r, now);
    return false;
  }
  r.repeat_done = 0;
  ++r.phase;
  begin_phase(id, r, now);
  return r.done;
}

void FlowSimulator::settle(TimeNs now) {
  const auto dt = static_cast<double>(now - last_update_);
  if (dt > 0) {
    for (Flow& f : flows_) {
      if (f.active && std::isfinite(f.rate)) f.remaining -= f.rate * dt;
    }
  }
  last_update_ = now;
}

void FlowSimulator::recompute(TimeNs now) {
  rates_.resolve();
  // Every active flow's completion is derived again from its settled bytes, as when every rate
  // was solved again on each event: the same integer ns, whichever flows' rates moved.
  for (Flow& f : flows_) {
    if (!f.active) continue;
    f.rate = rates_.rate(f.slot) * plans_.at(f.plan).factor;
    if (f.remaining <= 0 || std::isinf(f.rate)) {
      f.drain_at = now;
      continue;
    }
    MOESIM_CHECK(f.rate > 0, "a flow got no bandwidth");
    const double ns = std::ceil(f.remaining / f.rate - 1e-6);
    f.drain_at = now + to_duration_ns(std::max(ns, 0.0), false, "a network flow");
  }
  dirty_ = false;
}

TimeNs FlowSimulator::next_event() const {
  TimeNs t = kNever;
  for (const Flow& f : flows_) t = std::min(t, f.active ? f.drain_at : f.start_at);
  for (const auto& [id, r] : plans_) {
    if (r.in_local) t = std::min(t, r.local_end);
    if (r.done) t = std::min(t, last_update_);
  }
  return t;
}

void FlowSimulator::advance_to(TimeNs now, std::vector<std::uint64_t>& finished) {
  settle(now);
  const std::size_t first_finished = finished.size();
  for (bool changed = true; changed;) {
    changed = false;
    std::size_t kept = 0;
    for (std::size_t i = 0; i < flows_.size(); ++i) {
      Flow& f = flows_[i];
      if (!f.active && f.start_at <= now) {
        f.active = true;
        f.slot = rates_.add(f.spec->links);
        f.drain_at = f.remaining <= 0 ? now : kNever;
        dirty_ = true;
      }
      if (f.active && f.drain_at <= now) {
        rates_.remove(f.slot);
        --plans_.at(f.plan).flows_left;
        dirty_ = true;
        changed = true;
        continue;
      }
      flows_[kept++] = f;
    }
    flows_.resize(kept);
    for (auto it = plans_.begin(); it != plans_.end();) {
      Running& r = it->second;
      if (r.in_local && r.local_end <= now) {
        launch_flows(it->first, r, now);
        changed = true;
      }
      if (!r.done && !r.in_local && r.flows_left == 0) {
        phase_done(it->first, r, now);
        changed = true;
      }
      if (r.done) {
        finished.push_back(it->first);
        it = plans_.erase(it);
        changed = true;
      } else {
        ++it;
      }
    }
  }
  std::sort(finished.begin() + static_cast<std::ptrdiff_t>(first_finished), finished.end());
  if (dirty_) recompute(now);
}

TimeNs FlowSimulator::run_alone(const ClusterTopology& topo, std::shared_ptr<const CollectivePlan> plan) {
  // Alone, every repetition of a phase (a ring's steps) starts from an empty network with the same
  // flows, so it takes as long as the first: each phase is run once and its time multiplied. A
  // ring over 4,096 ranks is then 2 phases of 4,096 flows instead of 8,190.
  TimeNs total = 0;
  for (const PlanPhase& phase : plan->phases) {
    auto once = std::make_shared<CollectivePlan>();
    once->phases.push_back(phase);
    once->phases.back().repeat = 1;
    FlowSimulator sim(topo);
    sim.start(0, std::move(once), 0, 1.0);
    std::vector<std::uint64_t> finished;
    while (finished.empty()) {
      const TimeNs t = sim.next_event();
      MOESIM_CHECK(t != kNever, "a collective plan stalled");
      sim.advance_to(t, finished);
    }
    total = checked_add(total, checked_mul(sim.last_update_, static_cast<TimeNs>(phase.repeat)));
  }
  return total;
}

FlowNetwork::FlowNetwork(const TaskGraph& graph, const ClusterSpec& cluster, FlowNetworkOptions options)
    : graph_(graph), cluster_(cluster), options_(options), topo_(cluster), sim_(topo_) {
  if (graph_.world_size() > topo_.num_gpus()) {
    throw InputError(cluster_.origin, "the job has " + std::to_string(graph_.world_size()) +
                                          " ranks but cluster " + cluster_.name + " has only " +
                                          std::to_string(topo_.num_gpus()) + " GPUs");
  }
}

std::shared_ptr<const CollectivePlan> FlowNetwork::plan_for(const CollectiveWork& work,
                                                            const std::vector<int>& group) const {
  if (work.bytes_per_peer < 0) throw InputError("collective size must not be negative");
  const PlanKey key = plan_key(work, group);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  std::shared_ptr<const CollectivePlan> plan;
  if (work.is_all_to_allv()) {
    if (work.op != CollectiveOp::kAllToAll || work.traffic->size != static_cast<int>(group.size()))
      throw InputError("a traffic matrix of " + std::to_string(work.traffic->size) +
                       " ranks on a " + std::string(to_string(work.op)) + " over " + std::to_string(group.size()) +
                       " ranks: all-to-allv needs one row and column per group member");
    if (options_.plan.all_to_all != AllToAllAlgorithm::kPairwise)
      throw InputError("the " + std::string(to_string(options_.plan.all_to_all)) +
                       " all-to-all is for uniform traffic; imbalanced routing (all-to-allv) runs pairwise");
    plan = std::make_shared<const CollectivePlan>(plan_all_to_allv(
        topo_, cluster_, group, [&work](int a, int b) { return work.pair_bytes(a, b); },
        options_.plan.aggregate, work.transposed));
  } else {
    plan = std::make_shared<const CollectivePlan>(plan_collective(topo_, cluster_, work, group, options_.plan));
  }
  plans_.emplace(key, plan);
  return plan;
}

TimeNs FlowNetwork::isolated_duration(const CollectiveWork& work, const std::vector<int>& group) const {
  const PlanKey key = plan_key(work, group);
  if (auto it = durations_.find(key); it != durations_.end()) return it->second;
  const TimeNs t = FlowSimulator::run_alone(topo_, plan_for(work, group));
  durations_.emplace(key, t);
  return t;
}

FlowNetwork::PlanKey FlowNetwork::plan_key(const CollectiveWork& work, const std::vector<int>& group) {
  return {static_cast<int>(work.op), group, work.bytes_per_peer, work.traffic, work.transposed};
}

double FlowNetwork::factor(TaskIndex task, const Concurrency& concurrency) const {
  return interference_factor(cluster_.node.interference, graph_.task(task).stream, ranks_.at(task),
                             concurrency);
}

void FlowNetwork::start(TaskIndex task, TimeNs now, const Concurrency& concurrency) {
  const Task& t = graph_.task(task);
  const auto* work = std::get_if<CollectiveWork>(&t.work);
  MOESIM_CHECK(work != nullptr, "FlowNetwork started a non-collective task '" + t.id + "'");
  ranks_[task] = graph_.ranks_of(task);
  sim_.start(task, plan_for(*work, graph_.group(work->group)), now, factor(task, concurrency));
}

void FlowNetwork::on_concurrency_change(std::span<const int> ranks, TimeNs now,
                                        const Concurrency& concurrency) {
  for (const auto& [task, members] : ranks_) {
    const bool affected = std::any_of(members.begin(), members.end(), [&](int r) {
      return std::binary_search(ranks.begin(), ranks.end(), r);
    });
    if (affected) sim_.set_factor(task, factor(task, concurrency), now);
  }
}

void FlowNetwork::advance_to(TimeNs now, std::vector<TaskIndex>& finished) {
  std::vector<std::uint64_t> done;
  sim_.advance_to(now, done);
  for (std::uint64_t id : done) {
    finished.push_back(static_cast<TaskIndex>(id));
    ranks_.erase(static_cast<TaskIndex>(id));
  }
}

}  // namespace moesim
