// The derived views of the sweep's HTML report: the Pareto front of each workload, the best n, the
// layouts at one global batch and the capacity view, each as small plots and a table.
#include <algorithm>
#include <cstddef>
#include <ostream>
#include <tuple>

#include "sim/report/ordered_groups.h"
#include "sim/report/plan_report.h"
#include "sim/report/svg_chart.h"
#include "sim/report/sweep_html_parts.h"

namespace moesim::sweep_html_detail {
namespace {

using ModelHardware = std::pair<std::string, std::string>;

const SweepRecord& at(const SweepTable& t, int i) { return t.records[static_cast<std::size_t>(i)]; }

double gib(std::int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(kGiB); }

void sort_by_x(Series& s) {
  std::stable_sort(s.points.begin(), s.points.end(), [](const ChartPoint& a, const ChartPoint& b) { return a.x < b.x; });
}

// The i-th line of a chart: palette colour, dashed past the tenth.
Series nth_series(std::size_t i, std::string name) {
  Series s = series_of(std::move(name), palette_color(i), true);
  s.dashed = palette_dashed(i);
  return s;
}

std::string workload_caption(const SweepTable& t, const WorkloadFront& w) {
  return w.model + " | " + w.hardware + " | " + tokens_text(t, w.tokens) +
         (w.routing == "uniform" ? "" : " | " + w.routing) + ": " + std::to_string(w.front.size()) +
         " on the front of " + std::to_string(w.records.size());
}

// A workload's configurations: coloured by GPU count where it has several (by strategy otherwise),
// dominated ones faded, the front outlined and joined.
std::vector<Series> pareto_series(const SweepTable& t, const WorkloadFront& w) {
  const bool by_gpus = std::any_of(w.records.begin(), w.records.end(),
                                   [&](int i) { return at(t, i).gpus != at(t, w.records.front()).gpus; });
  std::vector<Series> dominated, front;
  OrderedGroups<std::string> colours;
  for (int i : w.records) {
    const SweepRecord& r = at(t, i);
    const std::string name = by_gpus ? std::to_string(r.gpus) + " GPUs" : std::string(to_string(r.strategy));
    const std::size_t k = colours.add(name, i);
    if (k == dominated.size()) {
      const std::string colour = by_gpus ? palette_color(k) : strategy_color(r.strategy);
      dominated.push_back(series_of(name, colour, false));
      dominated.back().faded = true;
      front.push_back(series_of(name, colour, false));
      front.back().emphasis = true;
    }
    const bool on_front = std::find(w.front.begin(), w.front.end(), i) != w.front.end();
    (on_front ? front : dominated)[k].points.push_back({ns_to_ms(r.step_ns), gib(r.model_peak_bytes), r.fits,
                                                        (on_front ? "on the Pareto front: " : "") + record_tooltip(r)});
  }
  Series line = series_of("Pareto front", "#000000", true);
  line.markers = false;
  for (int i : w.front) line.points.push_back({ns_to_ms(at(t, i).step_ns), gib(at(t, i).model_peak_bytes), true, ""});
  std::vector<Series> out = std::move(dominated);
  out.push_back(std::move(line));
  out.insert(out.end(), front.begin(), front.end());
  return out;
}

void write_best_table(std::ostream& o, const SweepTable& t, const std::vector<BestChoice>& choices) {
  o << "<table><tr><th>model</th><th>hardware</th><th>GPUs</th><th>tp</th><th>tokens</th><th>best n</th>"
       "<th>strategy</th><th>step (ms)</th><th>model peak (GiB)</th><th>speed-up vs n=1 none</th></tr>\n";
  for (const BestChoice& b : choices) {
    o << "<tr><td class=\"l\">" << html_escape(b.model) << "</td><td class=\"l\">" << html_escape(b.hardware)
      << "</td><td>" << b.gpus << "</td><td>" << b.tp_size << "</td><td>" << b.tokens << "</td>";
    if (b.best < 0) {
      o << "<td colspan=\"5\" class=\"l\">nothing fits</td></tr>\n";
      continue;
    }
    const SweepRecord& r = at(t, b.best);
    o << "<td>" << r.num_chunks << "</td><td>" << to_string(r.strategy) << "</td><td>" << format_ms(r.step_ns)
      << "</td><td>" << format_gib(r.model_peak_bytes) << "</td><td>"
      << (b.baseline < 0 ? std::string("-")
                         : format_fixed(static_cast<double>(at(t, b.baseline).step_ns) / static_cast<double>(r.step_ns),
                                        3) + "x")
      << "</td></tr>\n";
  }
  o << "</table>\n";
}

void write_layout_table(std::ostream& o, const SweepTable& t, const std::vector<BestChoice>& choices,
                        const std::vector<LayoutChoice>& batches) {
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
      const SweepRecord& r = at(t, b.best);
      o << "<td class=\"l\">" << r.layout.describe() << "</td><td>" << r.tokens << "</td><td>" << r.num_chunks
        << "</td><td>" << to_string(r.strategy) << "</td><td>" << format_ms(r.step_ns) << "</td><td>"
        << format_gib(r.model_peak_bytes) << "</td><td class=\"l\">" << (b.best == l.best ? "fastest" : "")
        << "</td></tr>\n";
    }
  }
  o << "</table>\n";
}

// Tokens per second are shown in the unit that keeps the axis' numbers short.
std::pair<double, const char*> throughput_unit(double largest) {
  if (largest >= 1e6) return {1e6, "million tokens/s"};
  if (largest >= 1e3) return {1e3, "thousand tokens/s"};
  return {1, "tokens/s"};
}

std::string capacity_tooltip(const SweepRecord& r, bool meets_target) {
  return "fastest fitting at " + std::to_string(r.gpus) + " GPUs" + (meets_target ? "" : " (misses the step-time target)") +
         ": " + record_tooltip(r) + "\nmemory headroom " + format_gib(memory_headroom_bytes(r)) + " GiB";
}

// The capacity answer: the last point of a line, outlined.
Series answer_mark(const Series& line) {
  Series mark = series_of(line.name, line.color, false);
  mark.emphasis = true;
  mark.in_legend = false;
  mark.points.push_back(line.points.back());
  mark.points.back().tooltip = "the smallest GPU count that meets the target: " + mark.points.back().tooltip;
  return mark;
}

// One model and hardware's throughput and memory headroom against the GPU count, a line per value
// of the token axis, its capacity answers outlined.
void write_capacity_charts(std::ostream& o, const SweepTable& t, const std::vector<CapacityPoint>& curve,
                           const std::vector<int>& points, const std::vector<CapacityAnswer>& answers) {
  double largest = 0;
  for (int p : points) {
    if (curve[static_cast<std::size_t>(p)].record >= 0)
      largest = std::max(largest, tokens_per_second(at(t, curve[static_cast<std::size_t>(p)].record)));
  }
  const auto [scale, unit] = throughput_unit(largest);
  std::vector<Series> throughput, headroom, throughput_marks, headroom_marks;
  OrderedGroups<std::int64_t> lines;
  for (int p : points) {
    const CapacityPoint& c = curve[static_cast<std::size_t>(p)];
    const std::size_t k = lines.add(c.tokens, p);
    if (k == throughput.size()) {
      throughput.push_back(nth_series(k, tokens_text(t, c.tokens)));
      headroom.push_back(nth_series(k, tokens_text(t, c.tokens)));
    }
    if (c.record < 0) continue;
    const SweepRecord& r = at(t, c.record);
    const std::string tip = capacity_tooltip(r, c.meets_target);
    throughput[k].points.push_back({static_cast<double>(c.gpus), tokens_per_second(r) / scale, c.meets_target, tip});
    headroom[k].points.push_back({static_cast<double>(c.gpus), gib(memory_headroom_bytes(r)), c.meets_target, tip});
    if (std::any_of(answers.begin(), answers.end(), [&](const CapacityAnswer& a) { return a.record == c.record; })) {
      throughput_marks.push_back(answer_mark(throughput[k]));
      headroom_marks.push_back(answer_mark(headroom[k]));
    }
  }
  throughput.insert(throughput.end(), throughput_marks.begin(), throughput_marks.end());
  headroom.insert(headroom.end(), headroom_marks.begin(), headroom_marks.end());
  const CapacityPoint& first = curve[static_cast<std::size_t>(points.front())];
  const Tags tags = {{"model", first.model}, {"hardware", first.hardware}};
  const std::string what = first.model + " | " + first.hardware;
  o << figure(what + ": throughput",
              svg_chart("GPUs", unit, throughput, {"capacity-throughput", "tokens per second against GPUs", 460, 300, true, true, true}),
              tags)
    << figure(what + ": memory headroom",
              svg_chart("GPUs", "memory headroom (GiB)", headroom,
                        {"capacity-headroom", "memory headroom against GPUs", 460, 300, true, true, true}),
              tags);
}

void write_capacity_table(std::ostream& o, const SweepTable& t, const std::vector<CapacityAnswer>& answers) {
  o << "<table><tr><th>model</th><th>hardware</th><th>" << axis_tokens_label(t)
    << "</th><th>smallest GPUs</th><th>layout</th><th>n</th><th>strategy</th><th>step (ms)</th><th>tokens/s</th>"
       "<th>model peak (GiB)</th><th>headroom (GiB)</th></tr>\n";
  for (const CapacityAnswer& a : answers) {
    o << "<tr><td class=\"l\">" << html_escape(a.model) << "</td><td class=\"l\">" << html_escape(a.hardware)
      << "</td><td>" << a.tokens << "</td>";
    if (a.record < 0) {
      o << "<td colspan=\"8\" class=\"l\">none in the grid</td></tr>\n";
      continue;
    }
    const SweepRecord& r = at(t, a.record);
    o << "<td>" << a.gpus << "</td><td class=\"l\">" << r.layout.describe() << "</td><td>" << r.num_chunks
      << "</td><td>" << to_string(r.strategy) << "</td><td>" << format_ms(r.step_ns) << "</td><td>"
      << format_count(tokens_per_second(r)) << "</td><td>" << format_gib(r.model_peak_bytes) << "</td><td>"
      << format_gib(memory_headroom_bytes(r)) << "</td></tr>\n";
  }
  o << "</table>\n";
}

}  // namespace

void write_pareto(std::ostream& o, const SweepTable& t) {
  o << "<h2>Memory against time: the Pareto front of each workload</h2>\n<p class=\"note\">One plot per workload "
       "(model, hardware, value of the token axis and routing) with every configuration of it (GPU count, layout, "
       "strategy, n). Outlined markers joined by the black line are the Pareto front: no other configuration of "
       "the workload is both faster and smaller. Faded markers are dominated; hollow ones do not fit in GPU "
       "memory.</p>\n<div class=\"grid\">\n";
  const ChartStyle style{"pareto", "whole-model peak memory against step time", 380, 260, false, false, true};
  for (const WorkloadFront& w : pareto_per_workload(t)) {
    const Tags tags = {{"model", w.model}, {"hardware", w.hardware}, {"tokens", std::to_string(w.tokens)},
                       {"routing", w.routing}};
    o << figure(workload_caption(t, w), svg_chart("step time (ms)", "model peak memory (GiB)", pareto_series(t, w), style),
                tags);
  }
  o << "</div>\n";
}

void write_best_n(std::ostream& o, const SweepTable& t, const std::vector<BestChoice>& choices) {
  const bool several_tp = varies(t, [](const SweepRecord& r) { return r.layout.tp; });
  const bool several_routings = varies(t, [](const SweepRecord& r) { return r.routing; });
  o << "<h2>Best n against token count</h2>\n<p class=\"note\">Per model and hardware: the pipeline degree n of each "
       "group's fastest fitting configuration, a line per GPU count"
    << (several_tp ? " and tp" : "") << (several_routings ? " and routing" : "") << ".</p>\n<div class=\"grid\">\n";
  OrderedGroups<ModelHardware> charts;
  for (std::size_t g = 0; g < choices.size(); ++g) charts.add({choices[g].model, choices[g].hardware}, static_cast<int>(g));
  const ChartStyle style{"best-n", "best n against token count", 460, 300, true, true, true};
  for (const auto& [key, groups] : charts.entries()) {
    std::vector<Series> series;
    OrderedGroups<std::tuple<int, int, std::string>> lines;
    for (int g : groups) {
      const BestChoice& b = choices[static_cast<std::size_t>(g)];
      const std::size_t k = lines.add({b.gpus, b.tp_size, b.routing}, g);
      if (k == series.size()) {
        series.push_back(nth_series(k, std::to_string(b.gpus) + " GPUs" +
                                           (several_tp ? ", tp " + std::to_string(b.tp_size) : "") +
                                           (several_routings ? ", " + b.routing : "")));
      }
      if (b.best < 0) continue;
      const SweepRecord& r = at(t, b.best);
      series[k].points.push_back({static_cast<double>(axis_tokens(t, r)), static_cast<double>(r.num_chunks), true,
                                  "fastest fitting: " + record_tooltip(r)});
    }
    for (Series& s : series) sort_by_x(s);
    o << figure(key.first + " | " + key.second, svg_chart(axis_tokens_label(t), "best n", series, style),
                {{"model", key.first}, {"hardware", key.second}});
  }
  o << "</div>\n";
  write_best_table(o, t, choices);
}

void write_layouts(std::ostream& o, const SweepTable& t, const std::vector<BestChoice>& choices) {
  const std::vector<LayoutChoice> batches = best_layout_per_batch(t);
  o << "<h2>Layouts at one global batch: tensor x expert x data</h2>\n";
  if (std::none_of(batches.begin(), batches.end(), [](const LayoutChoice& l) { return l.groups.size() > 1; })) {
    // Tokens per GPU that do not scale with tp give every layout its own global batch.
    o << "<p class=\"note\">No global batch of this grid has more than one layout: give the token axis as "
         "global_tokens (or tokens per GPU that scale with tp) to compare layouts.</p>\n";
    return;
  }
  o << "<p class=\"note\">Per model, hardware and routing: each layout's fastest fitting step at one global batch, "
       "a line per GPU count and batch.</p>\n<div class=\"grid\">\n";
  OrderedGroups<std::tuple<std::string, std::string, std::string>> charts;
  for (std::size_t i = 0; i < batches.size(); ++i) {
    if (batches[i].groups.size() > 1) charts.add({batches[i].model, batches[i].hardware, batches[i].routing}, static_cast<int>(i));
  }
  const ChartStyle style{"layouts", "fastest fitting step per layout", 460, 300, true, true, true};
  for (const auto& [key, members] : charts.entries()) {
    std::vector<Series> series;
    for (int i : members) {
      const LayoutChoice& l = batches[static_cast<std::size_t>(i)];
      Series line = nth_series(series.size(), std::to_string(l.gpus) + " GPUs, " + std::to_string(l.global_tokens) + " tokens");
      for (int g : l.groups) {
        const BestChoice& b = choices[static_cast<std::size_t>(g)];
        if (b.best >= 0) {
          line.points.push_back({static_cast<double>(b.tp_size), ns_to_ms(at(t, b.best).step_ns), true,
                                 (b.best == l.best ? "fastest layout: " : "") + record_tooltip(at(t, b.best))});
        }
      }
      sort_by_x(line);
      series.push_back(std::move(line));
    }
    const auto& [model, hardware, routing] = key;
    o << figure(model + " | " + hardware + (routing == "uniform" ? "" : " | " + routing),
                svg_chart("tensor-parallel degree tp", "step time (ms)", series, style),
                {{"model", model}, {"hardware", hardware}, {"routing", routing}});
  }
  o << "</div>\n";
  write_layout_table(o, t, choices, batches);
}

void write_capacity(std::ostream& o, const SweepTable& t) {
  const std::string target = t.step_target_ns > 0 ? format_ms(t.step_target_ns) + " ms" : "";
  o << "<h2>Capacity: GPUs against tokens per second and memory headroom</h2>\n<p class=\"note\">Per model and "
       "hardware, at each GPU count, the fastest fitting configuration of any layout: the cluster's throughput "
       "(global tokens per step / step time) and the memory it leaves free on its fullest GPU (GPU memory minus the "
       "whole model's peak). A line per value of the token axis; "
    << (target.empty() ? "outlined markers are the smallest GPU count that fits."
                       : "hollow markers miss the step-time target of " + target +
                             "; outlined ones are the smallest GPU count that meets it.")
    << " The table gives that answer.</p>\n<div class=\"grid\">\n";
  const std::vector<CapacityPoint> curve = capacity_curve(t);
  const std::vector<CapacityAnswer> answers = capacity_view(t);
  OrderedGroups<ModelHardware> charts;
  for (std::size_t i = 0; i < curve.size(); ++i) charts.add({curve[i].model, curve[i].hardware}, static_cast<int>(i));
  for (const auto& [key, points] : charts.entries()) write_capacity_charts(o, t, curve, points, answers);
  o << "</div>\n";
  write_capacity_table(o, t, answers);
}

}  // namespace moesim::sweep_html_detail
