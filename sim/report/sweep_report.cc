#include "sim/report/sweep_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "sim/report/plan_report.h"
#include "sim/report/svg_chart.h"

namespace moesim {
namespace {

using GroupKey = std::tuple<std::string, std::string, int, int, std::int64_t, std::string>;

GroupKey group_of(const SweepRecord& r) { return {r.model, r.hardware, r.gpus, r.layout.tp, r.tokens, r.routing}; }

using BatchKey = std::tuple<std::string, std::string, int, std::int64_t, std::string>;
BatchKey batch_of(const BestChoice& b) { return {b.model, b.hardware, b.gpus, b.global_tokens, b.routing}; }

// The value and the label of the token axis as the sweep gave it.
std::int64_t axis_tokens(const SweepTable& t, const BestChoice& b) {
  return t.token_unit == TokenUnit::kGlobal ? b.global_tokens : b.tokens;
}
const char* axis_tokens_label(const SweepTable& t) {
  return t.token_unit == TokenUnit::kGlobal ? "global tokens per step" : "tokens per GPU";
}

bool several_layouts(const SweepTable& t) {
  return std::any_of(t.records.begin(), t.records.end(),
                     [&](const SweepRecord& r) { return r.layout.tp != t.records.front().layout.tp; });
}

// Groups in order of first appearance (grid order), each with its record indices.
std::vector<std::pair<GroupKey, std::vector<int>>> groups(const SweepTable& t) {
  std::vector<std::pair<GroupKey, std::vector<int>>> out;
  std::map<GroupKey, std::size_t> index;
  for (std::size_t i = 0; i < t.records.size(); ++i) {
    const GroupKey k = group_of(t.records[i]);
    auto it = index.find(k);
    if (it == index.end()) {
      it = index.emplace(k, out.size()).first;
      out.emplace_back(k, std::vector<int>{});
    }
    out[it->second].second.push_back(static_cast<int>(i));
  }
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string us(TimeNs t) { return format_fixed(static_cast<double>(t) / 1e3, 3); }

const char* strategy_color(MemoryStrategy s) {
  switch (s) {
    case MemoryStrategy::kNone: return "#1f77b4";
    case MemoryStrategy::kS1: return "#ff7f0e";
    case MemoryStrategy::kS2: return "#2ca02c";
    case MemoryStrategy::kS3: return "#d62728";
    case MemoryStrategy::kS4: return "#9467bd";
  }
  return "#000000";
}

const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string group_label(const GroupKey& k) {
  const int tp = std::get<3>(k);
  return std::get<0>(k) + " | " + std::get<1>(k) + " | " + std::to_string(std::get<2>(k)) + " GPUs" +
         (tp > 1 ? " | tp " + std::to_string(tp) : "") + " | B=" + std::to_string(std::get<4>(k)) +
         (std::get<5>(k) == "uniform" ? "" : " | " + std::get<5>(k));
}

// The record index that is faster, the first of equals (grid order); -1 stands for none.
int faster(const SweepTable& t, int a, int b) {
  if (a < 0) return b;
  if (b < 0) return a;
  return t.records[static_cast<std::size_t>(b)].step_ns < t.records[static_cast<std::size_t>(a)].step_ns ? b : a;
}

// The sweep-wide options, for the HTML preamble.
std::string options_text(const SweepTable& t) {
  std::vector<int> tps;
  bool dtd = false;
  for (const SweepRecord& r : t.records) {
    if (std::find(tps.begin(), tps.end(), r.layout.tp) == tps.end()) tps.push_back(r.layout.tp);
    dtd = dtd || r.drop_duplicate_tokens;
  }
  std::string s = t.token_unit == TokenUnit::kGlobal
                      ? "Token axis: global tokens per step; a configuration's tokens per GPU are global / (GPUs / tp)."
                      : "Token axis: tokens per GPU; a configuration's global batch is GPUs / tp x tokens.";
  s += " Layouts: tensor-parallel degree";
  for (std::size_t i = 0; i < tps.size(); ++i) s += (i ? ", " : " ") + std::to_string(tps[i]);
  s += ", the expert-parallel group spanning GPUs / tp";
  if (std::any_of(tps.begin(), tps.end(), [](int tp) { return tp > 1; }))
    s += std::string(", duplicate token dropping ") + (dtd ? "on" : "off");
  s += std::string(". Gradient all-reduces ") + (t.grad_sync ? "simulated" : "not simulated") + "; ZeRO stage " +
       std::to_string(t.zero_stage) + "; activation checkpointing " + std::string(to_string(t.checkpoint)) + ".";
  return s;
}

// Section 5: each layout's fastest fitting configuration at one global batch, and the fastest.
void write_layouts(std::ostream& o, const SweepTable& t, const std::vector<BestChoice>& choices) {
  constexpr std::size_t kMaxSeries = std::size(kPalette);
  const std::vector<LayoutChoice> batches = best_layout_per_batch(t);
  o << "<h2>Layouts at one global batch: tensor x expert x data</h2>\n";
  if (std::none_of(batches.begin(), batches.end(), [](const LayoutChoice& l) { return l.groups.size() > 1; })) {
    // Tokens per GPU that do not scale with tp give every layout its own global batch.
    o << "<p class=\"note\">No global batch of this grid has more than one layout: give the token axis as "
         "global_tokens (or tokens per GPU that scale with tp) to compare layouts.</p>\n";
    return;
  }
  std::vector<Series> series;
  for (const LayoutChoice& l : batches) {
    if (l.groups.size() < 2 || series.size() == kMaxSeries) continue;
    Series line{l.model + " / " + std::to_string(l.gpus) + " GPUs / " + std::to_string(l.global_tokens) + " tokens",
                kPalette[series.size()], {}, true, {}};
    for (int g : l.groups) {
      const BestChoice& b = choices[static_cast<std::size_t>(g)];
      if (b.best >= 0)
        line.points.emplace_back(b.tp_size, ns_to_ms(t.records[static_cast<std::size_t>(b.best)].step_ns));
    }
    std::sort(line.points.begin(), line.points.end());
    if (!line.points.empty()) series.push_back(std::move(line));
  }
  o << svg_chart("fastest fitting step per layout", "tensor-parallel degree tp", "step time (ms)", series, true);
  o << "<table><tr><th>model</th><th>hardware</th><th>GPUs</th><th>global tokens</th><th>layout</th>"
       "<th>tokens per GPU</th><th>best n</th><th>strategy</th><th>step (ms)</th><th>model peak (GiB)</th><th></th></tr>\n";
  for (const LayoutChoice& l : batches) {
    for (int g : l.groups) {
      const BestChoice& b = choices[static_cast<std::size_t>(g)];
      o << "<tr><td class=\"l\">" << html_escape(l.model) << "</td><td class=\"l\">" << html_escape(l.hardware)
        << "</td><td>" << l.gpus << "</td><td>" << l.global_tokens << "</td>";
      if (b.best < 0) {
        o << "<td>tp " << b.tp_size << "</td><td>" << b.tokens
          << "</td><td colspan=\"5\" class=\"l\">nothing fits</td></tr>\n";
        continue;
      }
      const SweepRecord& r = t.records[static_cast<std::size_t>(b.best)];
      o << "<td class=\"l\">" << r.layout.describe() << "</td><td>" << r.tokens << "</td><td>" << r.num_chunks
        << "</td><td>" << to_string(r.strategy) << "</td><td>" << format_ms(r.step_ns) << "</td><td>"
        << format_gib(r.model_peak_bytes) << "</td><td class=\"l\">" << (b.best == l.best ? "fastest" : "")
        << "</td></tr>\n";
    }
  }
  o << "</table>\n";
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

std::vector<LayoutChoice> best_layout_per_batch(const SweepTable& t) {
  std::vector<LayoutChoice> out;
  std::map<BatchKey, std::size_t> index;
  const std::vector<BestChoice> choices = best_per_group(t);
  for (std::size_t g = 0; g < choices.size(); ++g) {
    const BestChoice& b = choices[g];
    auto it = index.find(batch_of(b));
    if (it == index.end()) {
      it = index.emplace(batch_of(b), out.size()).first;
      out.push_back(LayoutChoice{b.model, b.hardware, b.routing, b.gpus, b.global_tokens, {}, -1});
    }
    LayoutChoice& l = out[it->second];
    l.groups.push_back(static_cast<int>(g));
    l.best = faster(t, l.best, b.best);
  }
  return out;
}

std::vector<CapacityAnswer> capacity_view(const SweepTable& t) {
  std::vector<CapacityAnswer> out;
  std::map<std::tuple<std::string, std::string, std::int64_t>, std::size_t> index;
  for (const BestChoice& b : best_per_group(t)) {
    const auto key = std::make_tuple(b.model, b.hardware, axis_tokens(t, b));
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, out.size()).first;
      out.push_back(CapacityAnswer{b.model, b.hardware, axis_tokens(t, b), 0, -1});
    }
    if (b.best < 0) continue;
    const SweepRecord& r = t.records[static_cast<std::size_t>(b.best)];
    if (t.step_target_ns > 0 && r.step_ns > t.step_target_ns) continue;
    CapacityAnswer& a = out[it->second];
    // At the smallest GPU count, the fastest of its layouts.
    if (a.gpus == 0 || b.gpus < a.gpus) {
      a.gpus = b.gpus;
      a.record = b.best;
    } else if (b.gpus == a.gpus) {
      a.record = faster(t, a.record, b.best);
    }
  }
  return out;
}

std::vector<int> pareto_front(const SweepTable& t) {
  std::vector<int> order(t.records.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
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
  // The columns after dropped_fraction came with tensor parallelism; earlier readers keep theirs.
  std::string out =
      "model,hardware,gpus,tokens,routing,strategy,n,step_us,forward_us,backward_us,peak_bytes,capacity_bytes,fits,"
      "speedup_vs_n1_none,best,expert_imbalance,rank_imbalance,dropped_fraction,tp,ep,dp,global_tokens,best_layout,"
      "drop_duplicate_tokens,grad_sync,zero_stage,checkpoint,model_peak_bytes\n";
  for (std::size_t i = 0; i < t.records.size(); ++i) {
    const SweepRecord& r = t.records[i];
    out += csv_field(r.model) + "," + csv_field(r.hardware) + "," + std::to_string(r.gpus) + "," +
           std::to_string(r.tokens) + "," + csv_field(r.routing) + "," + std::string(to_string(r.strategy)) + "," +
           std::to_string(r.num_chunks) + "," + us(r.step_ns) + "," + us(r.forward_ns) + "," + us(r.backward_ns) +
           "," + std::to_string(r.peak_bytes) + "," + std::to_string(r.capacity_bytes) + "," + (r.fits ? "1" : "0") +
           "," + (has_speedup[i] ? format_fixed(speedup[i], 4) : "") + "," + (best[i] ? "1" : "0") + "," +
           format_fixed(r.expert_imbalance, 4) + "," + format_fixed(r.rank_imbalance, 4) + "," +
           format_fixed(r.dropped_fraction, 6) + "," + std::to_string(r.layout.tp) + "," + std::to_string(r.layout.ep) +
           "," + std::to_string(r.layout.dp) + "," + std::to_string(r.global_tokens) + "," +
           (best_layout[i] ? "1" : "0") + "," + (r.drop_duplicate_tokens ? "1" : "0") + "," +
           (t.grad_sync ? "1" : "0") + "," + std::to_string(t.zero_stage) + "," + std::string(to_string(t.checkpoint)) +
           "," + std::to_string(r.model_peak_bytes) + "\n";
  }
  return out;
}

std::string sweep_json(const SweepTable& t) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["schema_version"] = 1;
  j["tool"] = "moesim " + t.tool_version;
  j["name"] = t.name;
  j["step_target_ns"] = t.step_target_ns;
  j["token_axis"] = token_axis_key(t.token_unit);
  j["grad_sync"] = t.grad_sync;
  j["zero_stage"] = t.zero_stage;
  j["checkpoint"] = std::string(to_string(t.checkpoint));
  ordered_json records = ordered_json::array();
  for (const SweepRecord& r : t.records) {
    records.push_back({{"model", r.model},
                       {"hardware", r.hardware},
                       {"gpus", r.gpus},
                       {"tokens", r.tokens},
                       {"routing", r.routing},
                       {"strategy", std::string(to_string(r.strategy))},
                       {"n", r.num_chunks},
                       {"step_ns", r.step_ns},
                       {"forward_ns", r.forward_ns},
                       {"backward_ns", r.backward_ns},
                       {"peak_bytes", r.peak_bytes},
                       {"model_peak_bytes", r.model_peak_bytes},
                       {"capacity_bytes", r.capacity_bytes},
                       {"fits", r.fits},
                       {"expert_imbalance", r.expert_imbalance},
                       {"rank_imbalance", r.rank_imbalance},
                       {"dropped_fraction", r.dropped_fraction},
                       {"tp", r.layout.tp},
                       {"ep", r.layout.ep},
                       {"dp", r.layout.dp},
                       {"global_tokens", r.global_tokens},
                       {"drop_duplicate_tokens", r.drop_duplicate_tokens}});
  }
  j["records"] = records;
  const auto record_or_null = [](int i) { return i < 0 ? ordered_json() : ordered_json(i); };
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
  ordered_json cap = ordered_json::array();
  for (const CapacityAnswer& a : capacity_view(t)) {
    cap.push_back({{"model", a.model}, {"hardware", a.hardware}, {token_axis_key(t.token_unit), a.tokens},
                   {"smallest_gpus", a.gpus == 0 ? ordered_json() : ordered_json(a.gpus)},
                   {"record", record_or_null(a.record)}});
  }
  j["capacity"] = cap;
  j["pareto_front"] = pareto_front(t);
  return j.dump(2) + "\n";
}

std::string sweep_html(const SweepTable& t) {
  constexpr std::size_t kMaxGroupPlots = 12;
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>moesim sweep: "
    << html_escape(t.name) << "</title>\n<style>\nbody{font-family:sans-serif;margin:24px;color:#222;max-width:1250px}"
    << "h1{font-size:22px}h2{font-size:17px;margin-top:32px;border-bottom:1px solid #ccc}"
    << ".grid{display:flex;flex-wrap:wrap;gap:12px}table{border-collapse:collapse;font-size:12px}"
    << "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#eee}"
    << "td.l{text-align:left}.note{color:#666;font-size:12px}\n</style></head><body>\n";
  o << "<h1>moesim sweep: " << html_escape(t.name) << "</h1>\n<p class=\"note\">moesim " << html_escape(t.tool_version)
    << ", " << t.records.size() << " configurations"
    << (t.step_target_ns > 0 ? ", step-time target " + format_ms(t.step_target_ns) + " ms" : "")
    << ". Times are simulated training steps (forward and backward of the MoE layers); memory is the "
       "whole model's device peak on the fullest GPU (all its layers, extrapolated from the simulated ones). "
       "Hollow markers do not fit in GPU memory.</p>\n"
    << "<p class=\"note\">" << html_escape(options_text(t)) << "</p>\n";

  const auto all_groups = groups(t);
  o << "<h2>Step time against n, per strategy</h2>\n<div class=\"grid\">\n";
  for (std::size_t g = 0; g < all_groups.size() && g < kMaxGroupPlots; ++g) {
    std::vector<Series> series;
    for (MemoryStrategy s : {MemoryStrategy::kNone, MemoryStrategy::kS1, MemoryStrategy::kS2, MemoryStrategy::kS3,
                             MemoryStrategy::kS4}) {
      Series line{std::string(to_string(s)), strategy_color(s), {}, true, {}};
      std::vector<std::pair<double, std::pair<double, bool>>> pts;
      for (int i : all_groups[g].second) {
        const SweepRecord& r = t.records[static_cast<std::size_t>(i)];
        if (r.strategy == s) pts.push_back({static_cast<double>(r.num_chunks), {ns_to_ms(r.step_ns), r.fits}});
      }
      std::sort(pts.begin(), pts.end());
      for (const auto& [x, yf] : pts) {
        line.points.emplace_back(x, yf.first);
        line.filled.push_back(yf.second);
      }
      if (!line.points.empty()) series.push_back(std::move(line));
    }
    o << svg_chart(group_label(all_groups[g].first), "pipeline degree n", "step time (ms)", series);
  }
  o << "</div>\n";
  if (all_groups.size() > kMaxGroupPlots) {
    o << "<p class=\"note\">" << all_groups.size() - kMaxGroupPlots
      << " more groups are in the CSV and JSON outputs (only the first " << kMaxGroupPlots << " are plotted).</p>\n";
  }

  o << "<h2>Memory against time: the Pareto front</h2>\n";
  {
    std::vector<Series> series;
    for (MemoryStrategy s : {MemoryStrategy::kNone, MemoryStrategy::kS1, MemoryStrategy::kS2, MemoryStrategy::kS3,
                             MemoryStrategy::kS4}) {
      Series dots{std::string(to_string(s)), strategy_color(s), {}, false, {}};
      for (const SweepRecord& r : t.records) {
        if (r.strategy != s) continue;
        dots.points.emplace_back(ns_to_ms(r.step_ns), static_cast<double>(r.model_peak_bytes) / static_cast<double>(kGiB));
        dots.filled.push_back(r.fits);
      }
      if (!dots.points.empty()) series.push_back(std::move(dots));
    }
    Series front{"Pareto front", "#000000", {}, true, {}};
    for (int i : pareto_front(t)) {
      const SweepRecord& r = t.records[static_cast<std::size_t>(i)];
      front.points.emplace_back(ns_to_ms(r.step_ns), static_cast<double>(r.model_peak_bytes) / static_cast<double>(kGiB));
    }
    series.push_back(std::move(front));
    o << svg_chart("whole-model peak memory against step time (all configurations)", "step time (ms)", "model peak memory (GiB)", series);
  }

  const auto choices = best_per_group(t);
  const bool several = several_layouts(t);
  o << "<h2>Best n against token count</h2>\n";
  {
    std::vector<Series> series;
    std::map<std::tuple<std::string, std::string, int, int, std::string>, std::size_t> index;
    for (const BestChoice& b : choices) {
      if (b.best < 0) continue;
      const auto key = std::make_tuple(b.model, b.hardware, b.gpus, b.tp_size, b.routing);
      auto it = index.find(key);
      if (it == index.end()) {
        it = index.emplace(key, series.size()).first;
        series.push_back(Series{b.model + " / " + std::to_string(b.gpus) + " GPUs" +
                                    (several ? " / tp " + std::to_string(b.tp_size) : ""),
                                kPalette[series.size() % std::size(kPalette)], {}, true, {}});
      }
      series[it->second].points.emplace_back(static_cast<double>(b.tokens),
                                             t.records[static_cast<std::size_t>(b.best)].num_chunks);
    }
    for (Series& s : series) std::sort(s.points.begin(), s.points.end());
    o << svg_chart("n of the fastest fitting configuration", "tokens per GPU", "best n", series, true);
  }
  o << "<table><tr><th>model</th><th>hardware</th><th>GPUs</th><th>tp</th><th>tokens</th><th>best n</th>"
       "<th>strategy</th><th>step (ms)</th><th>model peak (GiB)</th><th>speed-up vs n=1 none</th></tr>\n";
  for (const BestChoice& b : choices) {
    o << "<tr><td class=\"l\">" << html_escape(b.model) << "</td><td class=\"l\">" << html_escape(b.hardware)
      << "</td><td>" << b.gpus << "</td><td>" << b.tp_size << "</td><td>" << b.tokens << "</td>";
    if (b.best < 0) {
      o << "<td colspan=\"5\" class=\"l\">nothing fits</td></tr>\n";
      continue;
    }
    const SweepRecord& r = t.records[static_cast<std::size_t>(b.best)];
    o << "<td>" << r.num_chunks << "</td><td>" << to_string(r.strategy) << "</td><td>" << format_ms(r.step_ns)
      << "</td><td>" << format_gib(r.model_peak_bytes) << "</td><td>"
      << (b.baseline < 0 ? std::string("-")
                         : format_fixed(static_cast<double>(t.records[static_cast<std::size_t>(b.baseline)].step_ns) /
                                            static_cast<double>(r.step_ns), 3) + "x")
      << "</td></tr>\n";
  }
  o << "</table>\n";

  if (several) write_layouts(o, t, choices);

  o << "<h2>Capacity: the smallest GPU count that fits"
    << (t.step_target_ns > 0 ? " and meets " + format_ms(t.step_target_ns) + " ms" : "") << "</h2>\n";
  const auto capacity = capacity_view(t);
  {
    std::vector<Series> series;
    std::map<std::pair<std::string, std::string>, std::size_t> index;
    for (const CapacityAnswer& a : capacity) {
      if (a.gpus == 0) continue;
      auto it = index.find({a.model, a.hardware});
      if (it == index.end()) {
        it = index.emplace(std::make_pair(a.model, a.hardware), series.size()).first;
        series.push_back(Series{a.model, kPalette[series.size() % std::size(kPalette)], {}, true, {}});
      }
      series[it->second].points.emplace_back(static_cast<double>(a.tokens), a.gpus);
    }
    o << svg_chart("smallest GPU count per token count", axis_tokens_label(t), "GPUs", series, true);
  }
  o << "<table><tr><th>model</th><th>hardware</th><th>" << axis_tokens_label(t)
    << "</th><th>smallest GPUs</th><th>layout</th><th>n</th><th>strategy</th><th>step (ms)</th><th>model peak (GiB)</th>"
       "</tr>\n";
  for (const CapacityAnswer& a : capacity) {
    o << "<tr><td class=\"l\">" << html_escape(a.model) << "</td><td class=\"l\">" << html_escape(a.hardware)
      << "</td><td>" << a.tokens << "</td>";
    if (a.record < 0) {
      o << "<td colspan=\"6\" class=\"l\">none in the grid</td></tr>\n";
      continue;
    }
    const SweepRecord& r = t.records[static_cast<std::size_t>(a.record)];
    o << "<td>" << a.gpus << "</td><td class=\"l\">" << r.layout.describe() << "</td><td>" << r.num_chunks
      << "</td><td>" << to_string(r.strategy) << "</td><td>" << format_ms(r.step_ns) << "</td><td>"
      << format_gib(r.model_peak_bytes) << "</td></tr>\n";
  }
  o << "</table>\n</body></html>\n";
  return o.str();
}

}  // namespace moesim
