#include "sim/cost/host_copy_model.h"

#include <algorithm>
#include <string>

#include "sim/core/error.h"
#include "sim/cost/compute_cost.h"
#include "sim/engine/interference.h"

namespace moesim {

bool is_host_copy(const Task& task) {
  const auto* copy = std::get_if<CopyWork>(&task.work);
  return copy != nullptr && copy->direction != CopyDirection::kDeviceToDevice;
}

HostCopyModel::HostCopyModel(const TaskGraph& graph, const ClusterSpec& cluster)
    : graph_(graph), cluster_(cluster) {}

void HostCopyModel::prepare() {
  if (links_) return;
  links_.emplace(cluster_);
  const std::vector<int>& simulated = graph_.simulated_ranks();
  if (simulated.empty()) return;
  const auto num_simulated = static_cast<int>(simulated.size());
  for (CopyDirection d : {CopyDirection::kDeviceToHost, CopyDirection::kHostToDevice}) {
    std::map<int, std::map<HostLinks::Link, int>> count;  // simulated rank -> shared link -> GPUs
    for (int g = 0; g < graph_.world_size(); ++g) {
      const int device = cluster_.device_of(g);
      if (device >= links_->num_devices()) continue;  // a rank without a GPU: refused if it copies
      const int rep = graph_.is_simulated(g) ? g : simulated[static_cast<std::size_t>(g % num_simulated)];
      for (HostLinks::Link l : links_->shared_path(device, d)) ++count[rep][l];
    }
    for (const auto& [rank, links] : count) {
      Weights& w = shared_[rank][static_cast<std::size_t>(HostLinks::dir_index(d))];
      for (const auto& [link, gpus] : links) w.push_back(WeightedLink{link, static_cast<double>(gpus)});
    }
  }
}

double HostCopyModel::factor_of(const Task& task, const Concurrency& concurrency) const {
  return interference_factor(cluster_.node.interference, task.stream, task.rank, concurrency);
}

void HostCopyModel::start(TaskIndex task, TimeNs now, const Concurrency& concurrency) {
  const Task& t = graph_.task(task);
  const auto& work = std::get<CopyWork>(t.work);
  if (work.bytes < 0) throw InputError("copy size must not be negative");
  prepare();
  Copy c;
  c.device = cluster_.device_of(t.rank);
  if (c.device < 0 || c.device >= links_->num_devices() || shared_.count(t.rank) == 0)
    throw InputError("copy '" + t.id + "' runs on rank " + std::to_string(t.rank) + ", which has no GPU in cluster " +
                     cluster_.name);
  c.dir = HostLinks::dir_index(work.direction);
  c.own = links_->gpu_link(c.device, work.direction);
  const bool d2h = work.direction == CopyDirection::kDeviceToHost;
  if (!(links_->capacity(c.own) > 0.0)) {
    throw InputError(cluster_.node.origin, "node " + cluster_.node.name + " has no " +
                                               (d2h ? "pcie_d2h" : "pcie_h2d") + " bandwidth, needed by a " +
                                               std::string(to_string(work.direction)) + " copy");
  }
  for (const WeightedLink& w : shared_.at(t.rank)[static_cast<std::size_t>(c.dir)]) {
    if (!(links_->capacity(w.link) > 0.0))
      throw InputError(cluster_.node.origin, "node " + cluster_.node.name + " has a PCIe link or host memory of no "
                                                 "bandwidth on the path of copy '" + t.id + "'");
  }
  c.factor = factor_of(t, concurrency);
  copies_.emplace(task, c);
  const std::pair<int, int> key{c.device, c.dir};
  if (engaged_[key] >= cluster_.node.copy_engines) {
    waiting_[key].push_back(task);
    return;
  }
  engage(task, now);
  if (copies_.at(task).moving_at == now) {
    begin_moving(task, now);
    share_links(now);
  }
}

void HostCopyModel::engage(TaskIndex task, TimeNs now) {
  Copy& c = copies_.at(task);
  ++engaged_[{c.device, c.dir}];
  const LinkSpec& pcie = c.dir == 0 ? cluster_.node.pcie_d2h : cluster_.node.pcie_h2d;
  c.moving_at = now + pcie.latency_ns;
}

void HostCopyModel::begin_moving(TaskIndex task, TimeNs now) {
  const Copy& c = copies_.at(task);
  const auto& work = std::get<CopyWork>(graph_.task(task).work);
  // Work in ns at the GPU's own rate, so that the rate factor is the share of that rate it gets.
  const double own = links_->capacity(c.own);
  moving_.add(task, round_duration_ns(static_cast<double>(work.bytes) / own, work.bytes > 0), now, 1.0);
}

std::vector<HostCopyModel::Crossed> HostCopyModel::crossed_links(TaskIndex task) const {
  const Copy& c = copies_.at(task);
  std::vector<Crossed> crossed{{c.own, 1.0, links_->capacity(c.own) * c.factor}};
  for (const WeightedLink& w : shared_.at(graph_.task(task).rank)[static_cast<std::size_t>(c.dir)])
    crossed.push_back({w.link, w.weight, links_->capacity(w.link)});
  return crossed;
}

double HostCopyModel::alone_rate(TaskIndex task) const {
  std::vector<Crossed> crossed = crossed_links(task);
  std::stable_sort(crossed.begin(), crossed.end(), [](const Crossed& a, const Crossed& b) { return a.link < b.link; });
  double rate = kUnlimitedRate;
  for (std::size_t i = 0; i < crossed.size();) {
    const HostLinks::Link link = crossed[i].link;
    double weight = 0;
    double capacity = kUnlimitedRate;  // the lowest given, as share_links' slots keep
    for (; i < crossed.size() && crossed[i].link == link; ++i) {
      weight += crossed[i].weight;
      capacity = std::min(capacity, crossed[i].capacity);
    }
    if (weight > 1e-12) rate = std::min(rate, capacity / weight);
  }
  return std::max(rate, 0.0);
}

void HostCopyModel::share_links(TimeNs now) {
  const std::vector<TaskIndex> tasks = moving_.running();
  if (tasks.empty()) return;
  if (tasks.size() == 1) {  // nothing to share: no solver (most host copies of a step move alone)
    const double rate = alone_rate(tasks.front());
    MOESIM_CHECK(rate > 0.0 && rate < kUnlimitedRate, "a host copy got no finite positive rate");
    moving_.set_rate(tasks.front(), std::min(1.0, rate / links_->capacity(copies_.at(tasks.front()).own)), now);
    return;
  }
  // The links the moving copies cross, numbered densely for the solver (crossed_links).
  std::map<HostLinks::Link, std::size_t> index;
  std::vector<double> capacity;
  auto slot = [&](HostLinks::Link l, double cap) {
    const auto [it, added] = index.emplace(l, capacity.size());
    if (added) {
      capacity.push_back(cap);
    } else {
      capacity[it->second] = std::min(capacity[it->second], cap);
    }
    return it->second;
  };
  std::vector<std::vector<WeightedLink>> flows;
  flows.reserve(tasks.size());
  for (TaskIndex task : tasks) {
    std::vector<WeightedLink> flow;
    for (const Crossed& x : crossed_links(task)) flow.push_back({static_cast<LinkId>(slot(x.link, x.capacity)), x.weight});
    flows.push_back(std::move(flow));
  }
  std::vector<std::span<const WeightedLink>> spans(flows.begin(), flows.end());
  MaxMinSolver solver(std::move(capacity));
  const std::vector<double> rates = solver.solve(spans);
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const Copy& c = copies_.at(tasks[i]);
    const double own = links_->capacity(c.own);
    MOESIM_CHECK(rates[i] > 0.0 && rates[i] < kUnlimitedRate, "a host copy got no finite positive rate");
    moving_.set_rate(tasks[i], std::min(1.0, rates[i] / own), now);
  }
}

void HostCopyModel::on_concurrency_change(std::span<const int> ranks, TimeNs now,
                                          const Concurrency& concurrency) {
  bool changed = false;
  for (auto& [task, c] : copies_) {
    const Task& t = graph_.task(task);
    if (!std::binary_search(ranks.begin(), ranks.end(), t.rank)) continue;
    const double f = factor_of(t, concurrency);
    if (f == c.factor) continue;
    c.factor = f;
    changed = changed || moving_.contains(task);
  }
  if (changed) share_links(now);
}

TimeNs HostCopyModel::next_completion() const {
  TimeNs next = moving_.next_completion();
  for (const auto& [task, c] : copies_) {
    if (c.moving_at >= 0 && !moving_.contains(task)) next = std::min(next, c.moving_at);
  }
  return next;
}

void HostCopyModel::advance_to(TimeNs now, std::vector<TaskIndex>& finished) {
  const std::size_t first = finished.size();
  moving_.advance_to(now, finished);
  bool changed = finished.size() > first;
  for (std::size_t i = first; i < finished.size(); ++i) {
    const Copy c = copies_.at(finished[i]);
    copies_.erase(finished[i]);
    const std::pair<int, int> key{c.device, c.dir};
    --engaged_[key];
    auto& queue = waiting_[key];
    if (!queue.empty()) {
      const TaskIndex next = queue.front();
      queue.pop_front();
      engage(next, now);
      served_.emplace_back(next, now);
    }
  }
  for (const auto& [task, c] : copies_) {
    if (c.moving_at >= 0 && c.moving_at <= now && !moving_.contains(task)) {
      begin_moving(task, now);
      changed = true;
    }
  }
  if (changed) share_links(now);
}

void HostCopyModel::take_served(std::vector<std::pair<TaskIndex, TimeNs>>& served) {
  served.insert(served.end(), served_.begin(), served_.end());
  served_.clear();
}

double HostCopyModel::rate_bytes_per_ns(TaskIndex task) const {
  MOESIM_CHECK(moving_.contains(task), "task " + std::to_string(task) + " is not moving bytes");
  return moving_.rate(task) * links_->capacity(copies_.at(task).own);
}

}  // namespace moesim
