#include "sim/report/sweep_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "sim/report/plan_report.h"
#include "sim/report/sweep_columns.h"
#include "sim/report/ordered_groups.h"

namespace moesim {
namespace {

using GroupKey = std::tuple<std::string, std::string, int, int, std::int64_t, std::string>;

GroupKey group_of(const SweepRecord& r) { return {r.model, r.hardware, r.gpus, r.layout.tp, r.tokens, r.routing}; }

using BatchKey = std::tuple<std::string, std::string, int, std::int64_t, std::string>;
BatchKey batch_of(const BestChoice& b) { return {b.model, b.hardware, b.gpus, b.global_tokens, b.routing}; }

// Groups in order of first appearance (grid order), each with its record indices.
std::vector<std::pair<GroupKey, std::vector<int>>> groups(const SweepTable& t) {
  OrderedGroups<GroupKey> out;
  for (std::size_t i = 0; i < t.records.size(); ++i) out.add(group_of(t.records[i]), static_cast<int>(i));
  return out.entries();
}

// The record index that is faster, the first of equals (grid order); -1 stands for none.
int faster(const SweepTable& t, int a, int b) {
  if (a < 0) return b;
  if (b < 0) return a;
  return t.records[static_cast<std::size_t>(b)].step_ns < t.records[static_cast<std::size_t>(a)].step_ns ? b : a;
}

// The records on the time/memory front among the given ones, by increasing step time.
std::vector<int> front_of(const SweepTable& t, std::vector<int> order) {
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const SweepRecord& x = t.records[static_cast<std::size_t>(a)];
    const SweepRecord& y = t.records[static_cast<std::size_t>(b)];
    return std::tie(x.step_ns, x.model_peak_bytes) < std::tie(y.step_ns, y.model_peak_bytes);
  });
  std::vector<int> front;
  std::int64_t lowest = -1;
  for (int i : order) {
    const std::int64_t peak = t.records[static_cast<std::size_t>(i)].model_peak_bytes;
    if (lowest < 0 || peak < lowest) {
      front.push_back(i);
      lowest = peak;
    }
  }
  return front;
}

}  // namespace

std::vector<BestChoice> best_per_group(const SweepTable& t) {
  std::vector<BestChoice> out;
  for (const auto& [key, members] : groups(t)) {
    BestChoice b;
    std::tie(b.model, b.hardware, b.gpus, b.tp_size, b.tokens, b.routing) = key;
    b.global_tokens = t.records[static_cast<std::size_t>(members.front())].global_tokens;
    for (int i : members) {
      const SweepRecord& r = t.records[static_cast<std::size_t>(i)];
      if (r.num_chunks == 1 && r.strategy == MemoryStrategy::kNone && b.baseline < 0) b.baseline = i;
      if (r.fits) b.best = faster(t, b.best, i);
    }
    out.push_back(b);
  }
  return out;
}

std::vector<std::vector<int>> group_members(const SweepTable& t) {
  std::vector<std::vector<int>> out;
  for (auto& [key, members] : groups(t)) out.push_back(members);
  return out;
}

std::int64_t axis_tokens(const SweepTable& t, const SweepRecord& r) {
  return t.token_unit == TokenUnit::kGlobal ? r.global_tokens : r.tokens;
}

std::vector<LayoutChoice> best_layout_per_batch(const SweepTable& t) {
  std::vector<LayoutChoice> out;
  OrderedGroups<BatchKey> batches;
  const std::vector<BestChoice> choices = best_per_group(t);
  for (std::size_t g = 0; g < choices.size(); ++g) {
    const BestChoice& b = choices[g];
    const std::size_t slot = batches.add(batch_of(b), static_cast<int>(g));
    if (slot == out.size()) out.push_back(LayoutChoice{b.model, b.hardware, b.routing, b.gpus, b.global_tokens, {}, -1});
    LayoutChoice& l = out[slot];
    l.groups.push_back(static_cast<int>(g));
    l.best = faster(t, l.best, b.best);
  }
  return out;
}

double tokens_per_second(const SweepRecord& r) {
  return r.step_ns > 0 ? static_cast<double>(r.global_tokens) * 1e9 / static_cast<double>(r.step_ns) : 0.0;
}

std::int64_t memory_headroom_bytes(const SweepRecord& r) { return r.capacity_bytes - r.model_peak_bytes; }

std::vector<CapacityPoint> capacity_curve(const SweepTable& t) {
  const std::vector<BestChoice> choices = best_per_group(t);
  OrderedGroups<std::tuple<std::string, std::string, std::int64_t>> workloads;
  for (std::size_t g = 0; g < choices.size(); ++g) {
    const BestChoice& b = choices[g];
    workloads.add({b.model, b.hardware, t.token_unit == TokenUnit::kGlobal ? b.global_tokens : b.tokens},
                  static_cast<int>(g));
  }
  std::vector<CapacityPoint> out;
  for (const auto& [key, members] : workloads.entries()) {
    std::vector<CapacityPoint> at;
    for (int g : members) {
      const BestChoice& b = choices[static_cast<std::size_t>(g)];
      auto p = std::find_if(at.begin(), at.end(), [&](const CapacityPoint& c) { return c.gpus == b.gpus; });
      if (p == at.end()) p = at.insert(at.end(), CapacityPoint{b.model, b.hardware, std::get<2>(key), b.gpus, -1, false});
      p->record = faster(t, p->record, b.best);  // the fastest of the layouts at this GPU count
    }
    std::stable_sort(at.begin(), at.end(), [](const CapacityPoint& a, const CapacityPoint& b) { return a.gpus < b.gpus; });
    for (CapacityPoint& p : at) {
      p.meets_target = p.record >= 0 && (t.step_target_ns <= 0 ||
                                         t.records[static_cast<std::size_t>(p.record)].step_ns <= t.step_target_ns);
      out.push_back(p);
    }
  }
  return out;
}

std::vector<CapacityAnswer> capacity_view(const SweepTable& t) {
  // The first point of each workload's curve that meets the target: the fastest layout meets it
  // whenever any layout at that GPU count does.
  std::vector<CapacityAnswer> out;
  for (const CapacityPoint& p : capacity_curve(t)) {
    if (out.empty() || out.back().model != p.model || out.back().hardware != p.hardware || out.back().tokens != p.tokens) {
      out.push_back(CapacityAnswer{p.model, p.hardware, p.tokens, 0, -1});
    }
    CapacityAnswer& a = out.back();
    if (a.gpus == 0 && p.meets_target) {
      a.gpus = p.gpus;
      a.record = p.record;
    }
  }
  return out;
}

std::vector<int> pareto_front(const SweepTable& t) {
  std::vector<int> all(t.records.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  return front_of(t, std::move(all));
}

std::vector<WorkloadFront> pareto_per_workload(const SweepTable& t) {
  using Key = std::tuple<std::string, std::string, std::int64_t, std::string>;
  OrderedGroups<Key> workloads;
  for (std::size_t i = 0; i < t.records.size(); ++i) {
    const SweepRecord& r = t.records[i];
    workloads.add({r.model, r.hardware, axis_tokens(t, r), r.routing}, static_cast<int>(i));
  }
  std::vector<WorkloadFront> out;
  for (const auto& [key, members] : workloads.entries()) {
    WorkloadFront w;
    std::tie(w.model, w.hardware, w.tokens, w.routing) = key;
    w.records = members;
    w.front = front_of(t, members);
    out.push_back(std::move(w));
  }
  return out;
}

std::string sweep_csv(const SweepTable& t) {
  std::vector<double> speedup(t.records.size(), 0.0);
  std::vector<bool> has_speedup(t.records.size(), false), best(t.records.size(), false),
      best_layout(t.records.size(), false);
  // best_per_group lists the groups in the order groups() gives them.
  const auto choices = best_per_group(t);
  const auto all_groups = groups(t);
  for (std::size_t g = 0; g < all_groups.size(); ++g) {
    const BestChoice& c = choices[g];
    if (c.best >= 0) best[static_cast<std::size_t>(c.best)] = true;
    if (c.baseline < 0) continue;
    for (int i : all_groups[g].second) {
      speedup[static_cast<std::size_t>(i)] =
          static_cast<double>(t.records[static_cast<std::size_t>(c.baseline)].step_ns) /
          static_cast<double>(t.records[static_cast<std::size_t>(i)].step_ns);
      has_speedup[static_cast<std::size_t>(i)] = true;
    }
  }
  for (const LayoutChoice& l : best_layout_per_batch(t)) {
    if (l.best >= 0) best_layout[static_cast<std::size_t>(l.best)] = true;
  }
  std::string out = sweep_csv_header() + "\n";
  for (std::size_t i = 0; i < t.records.size(); ++i) {
    const SweepRow row{t, t.records[i], has_speedup[i], speedup[i], best[i], best_layout[i]};
    std::string line;
    for (const SweepColumn& c : sweep_columns()) line += (line.empty() ? "" : ",") + c.csv(row);
    out += line + "\n";
  }
  return out;
}

namespace {

nlohmann::ordered_json record_or_null(int i) { return i < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(i); }

// The capacity answer and curve and the Pareto fronts, as the HTML report draws them.
void add_capacity_and_fronts(nlohmann::ordered_json& j, const SweepTable& t) {
  using nlohmann::ordered_json;
  const std::string tokens_key = token_axis_key(t.token_unit);
  ordered_json cap = ordered_json::array();
  for (const CapacityAnswer& a : capacity_view(t)) {
    cap.push_back({{"model", a.model}, {"hardware", a.hardware}, {tokens_key, a.tokens},
                   {"smallest_gpus", a.gpus == 0 ? ordered_json() : ordered_json(a.gpus)},
                   {"record", record_or_null(a.record)}});
  }
  j["capacity"] = cap;
  ordered_json curve = ordered_json::array();
  for (const CapacityPoint& p : capacity_curve(t)) {
    ordered_json point = {{"model", p.model}, {"hardware", p.hardware}, {tokens_key, p.tokens}, {"gpus", p.gpus},
                          {"record", record_or_null(p.record)}, {"meets_target", p.meets_target}};
    if (p.record >= 0) {
      const SweepRecord& r = t.records[static_cast<std::size_t>(p.record)];
      point["tokens_per_s"] = std::llround(tokens_per_second(r));
      point["memory_headroom_bytes"] = memory_headroom_bytes(r);
    }
    curve.push_back(point);
  }
  j["capacity_curve"] = curve;
  j["pareto_front"] = pareto_front(t);
  ordered_json fronts = ordered_json::array();
  for (const WorkloadFront& w : pareto_per_workload(t)) {
    fronts.push_back({{"model", w.model}, {"hardware", w.hardware}, {tokens_key, w.tokens}, {"routing", w.routing},
                      {"front", w.front}});
  }
  j["pareto_per_workload"] = fronts;
}

}  // namespace

std::string sweep_json(const SweepTable& t) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["schema_version"] = 1;
  j["tool"] = "moesim " + t.tool_version;
  j["name"] = t.name;
  j["step_target_ns"] = t.step_target_ns;
  j["token_axis"] = token_axis_key(t.token_unit);
  j["network"] = std::string(to_string(t.network));
  j["grad_sync"] = t.grad_sync;
  j["zero_stage"] = t.zero_stage;
  j["checkpoint"] = std::string(to_string(t.checkpoint));
  ordered_json records = ordered_json::array();
  for (const SweepRecord& r : t.records) {
    records.push_back(sweep_json_record(r));
  }
  j["records"] = records;
  const std::vector<BestChoice> choices = best_per_group(t);
  ordered_json best = ordered_json::array();
  for (const BestChoice& b : choices) {
    best.push_back({{"model", b.model}, {"hardware", b.hardware}, {"gpus", b.gpus}, {"tokens", b.tokens},
                    {"routing", b.routing}, {"best_record", record_or_null(b.best)},
                    {"baseline_record", record_or_null(b.baseline)}, {"tp", b.tp_size},
                    {"global_tokens", b.global_tokens}});
  }
  j["best_per_group"] = best;
  ordered_json layouts = ordered_json::array();
  for (const LayoutChoice& l : best_layout_per_batch(t)) {
    ordered_json per_tp = ordered_json::array();
    for (int g : l.groups) {
      const BestChoice& b = choices[static_cast<std::size_t>(g)];
      per_tp.push_back({{"tp", b.tp_size}, {"best_record", record_or_null(b.best)}});
    }
    layouts.push_back({{"model", l.model}, {"hardware", l.hardware}, {"gpus", l.gpus},
                       {"global_tokens", l.global_tokens}, {"routing", l.routing}, {"layouts", per_tp},
                       {"best_record", record_or_null(l.best)}});
  }
  j["best_layout_per_batch"] = layouts;
  add_capacity_and_fronts(j, t);
  return j.dump(2) + "\n";
}

}  // namespace moesim
