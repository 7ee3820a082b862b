// The sweep's HTML report: the page, its filter and the step-time plots of every group; the derived
// views are in sweep_html_views.cc.
#include <algorithm>
#include <sstream>
#include <utility>

#include "sim/report/ordered_groups.h"
#include "sim/report/plan_report.h"
#include "sim/report/svg_chart.h"
#include "sim/report/sweep_html_parts.h"
#include "sim/report/sweep_report.h"

namespace moesim {
namespace sweep_html_detail {

std::string figure(const std::string& caption, const std::string& svg, const Tags& tags) {
  std::string s = "<figure class=\"plot\"";
  for (const auto& [name, value] : tags) s += " data-" + name + "=\"" + html_escape(value) + "\"";
  return s + "><figcaption>" + html_escape(caption) + "</figcaption>\n" + svg + "</figure>\n";
}

const char* axis_tokens_label(const SweepTable& t) {
  return t.token_unit == TokenUnit::kGlobal ? "global tokens per step" : "tokens per GPU";
}

std::string tokens_text(const SweepTable& t, std::int64_t tokens) {
  return std::to_string(tokens) + (t.token_unit == TokenUnit::kGlobal ? " tokens per step" : " tokens per GPU");
}

std::string format_count(double value) {
  std::string digits = format_fixed(value, 0);
  const std::size_t first = digits.front() == '-' ? 1 : 0;
  for (std::size_t at = digits.size(); at > first + 3; at -= 3) digits.insert(at - 3, ",");
  return digits;
}

std::string record_tooltip(const SweepRecord& r) {
  return r.model + " on " + r.hardware + "\n" + r.layout.describe() + ", routing " + r.routing + "\n" +
         std::to_string(r.tokens) + " tokens per GPU, " + std::to_string(r.global_tokens) + " per step\n" +
         "strategy " + std::string(to_string(r.strategy)) + ", n = " + std::to_string(r.num_chunks) + "\nstep " +
         format_ms(r.step_ns) + " ms, " + format_count(tokens_per_second(r)) + " tokens/s\nmodel peak " +
         format_gib(r.model_peak_bytes) + " of " + format_gib(r.capacity_bytes) + " GiB: " +
         (r.fits ? "fits" : "does not fit");
}

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

Series series_of(std::string name, std::string color, bool line) {
  Series s;
  s.name = std::move(name);
  s.color = std::move(color);
  s.line = line;
  return s;
}

}  // namespace sweep_html_detail

namespace {

using namespace sweep_html_detail;

constexpr MemoryStrategy kStrategies[] = {MemoryStrategy::kNone, MemoryStrategy::kS1, MemoryStrategy::kS2,
                                          MemoryStrategy::kS3, MemoryStrategy::kS4};

// The sweep-wide options, for the preamble.
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

void write_head(std::ostream& o, const SweepTable& t) {
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>moesim sweep: "
    << html_escape(t.name) << "</title>\n<style>\n" << html_report_style()
    << ".filters{position:sticky;top:0;background:#fff;padding:6px 0;border-bottom:1px solid #ddd;font-size:13px;"
       "z-index:1}.filters label{margin-right:12px}\n</style></head><body>\n";
  o << "<h1>moesim sweep: " << html_escape(t.name) << "</h1>\n<p class=\"note\">moesim " << html_escape(t.tool_version)
    << ", " << t.records.size() << " configurations"
    << (t.step_target_ns > 0 ? ", step-time target " + format_ms(t.step_target_ns) + " ms" : "")
    << ". Times are simulated training steps (forward and backward of the MoE layers); memory is the "
       "whole model's device peak on the fullest GPU (all its layers, extrapolated from the simulated ones). "
       "Hover a marker for its configuration.</p>\n"
    << "<p class=\"note\">" << html_escape(options_text(t)) << "</p>\n";
}

// One <select> per dimension in which the sweep varies; the page's script shows the form and hides
// the plots that do not match. Without the script the form stays hidden and every plot shows.
template <typename F>
void write_filter(std::ostream& o, const SweepTable& t, const char* name, F value) {
  if (!varies(t, value)) return;
  OrderedGroups<std::string> values;
  for (const SweepRecord& r : t.records) values.add(value(r), 0);
  o << "<label>" << name << " <select name=\"" << name << "\"><option value=\"\">all</option>";
  for (const auto& [v, unused] : values.entries()) o << "<option>" << html_escape(v) << "</option>";
  o << "</select></label>\n";
}

void write_filters(std::ostream& o, const SweepTable& t) {
  o << "<form id=\"filters\" class=\"filters\" hidden>Show only: \n";
  write_filter(o, t, "model", [](const SweepRecord& r) { return r.model; });
  write_filter(o, t, "hardware", [](const SweepRecord& r) { return r.hardware; });
  write_filter(o, t, "gpus", [](const SweepRecord& r) { return std::to_string(r.gpus); });
  write_filter(o, t, "tokens", [&](const SweepRecord& r) { return std::to_string(axis_tokens(t, r)); });
  write_filter(o, t, "tp", [](const SweepRecord& r) { return std::to_string(r.layout.tp); });
  write_filter(o, t, "routing", [](const SweepRecord& r) { return r.routing; });
  o << "<output id=\"shown\"></output></form>\n";
}

// A plot that filters do not apply to (it has no such attribute) stays.
constexpr const char* kFilterScript = R"(<script>
(function () {
  var form = document.getElementById('filters');
  var selects = form.querySelectorAll('select');
  if (selects.length === 0) return;
  var figures = document.querySelectorAll('figure.plot');
  function apply() {
    var shown = 0;
    figures.forEach(function (f) {
      var keep = true;
      selects.forEach(function (s) {
        var v = f.getAttribute('data-' + s.name);
        if (s.value !== '' && v !== null && v !== s.value) keep = false;
      });
      f.hidden = !keep;
      if (keep) shown += 1;
    });
    document.getElementById('shown').textContent = shown + ' of ' + figures.length + ' plots shown';
  }
  form.addEventListener('change', apply);
  form.hidden = false;
  apply();
})();
</script>
)";

std::string group_caption(const SweepTable& t, const BestChoice& b, bool several_tp) {
  return b.model + " | " + b.hardware + " | " + std::to_string(b.gpus) + " GPUs" +
         (several_tp ? " | tp " + std::to_string(b.tp_size) : "") + " | " +
         tokens_text(t, t.token_unit == TokenUnit::kGlobal ? b.global_tokens : b.tokens) +
         (b.routing == "uniform" ? "" : " | " + b.routing);
}

// Step time against n: one small plot per group, every group drawn, the strategies as in the
// legend above them, the group's fastest fitting configuration outlined.
void write_step_plots(std::ostream& o, const SweepTable& t, const std::vector<BestChoice>& choices) {
  const std::vector<std::vector<int>> members = group_members(t);
  const bool several_tp = varies(t, [](const SweepRecord& r) { return r.layout.tp; });
  o << "<h2>Step time against n, per group</h2>\n<p class=\"note\">" << choices.size()
    << " groups, one plot each: a group is one model, hardware, GPU count, token count, tp and routing.</p>\n"
    << "<div class=\"legend\">";
  for (MemoryStrategy s : kStrategies) {
    o << "<span><i style=\"background:" << strategy_color(s) << "\"></i>" << to_string(s) << "</span>";
  }
  o << "<span>hollow: does not fit in GPU memory</span><span>outlined: the group's fastest fitting "
       "configuration</span></div>\n<div class=\"grid\">\n";
  const ChartStyle style{"step-vs-n", "step time against n", 300, 210, true, true, false};
  for (std::size_t g = 0; g < choices.size(); ++g) {
    const BestChoice& b = choices[g];
    std::vector<Series> series;
    for (MemoryStrategy s : kStrategies) {
      Series line = series_of(std::string(to_string(s)), strategy_color(s), true);
      for (int i : members[g]) {
        const SweepRecord& r = t.records[static_cast<std::size_t>(i)];
        if (r.strategy == s) line.points.push_back({static_cast<double>(r.num_chunks), ns_to_ms(r.step_ns), r.fits, record_tooltip(r)});
      }
      std::stable_sort(line.points.begin(), line.points.end(),
                       [](const ChartPoint& a, const ChartPoint& c) { return a.x < c.x; });
      if (!line.points.empty()) series.push_back(std::move(line));
    }
    if (b.best >= 0) {
      const SweepRecord& r = t.records[static_cast<std::size_t>(b.best)];
      Series best = series_of("fastest fitting", strategy_color(r.strategy), false);
      best.points.push_back({static_cast<double>(r.num_chunks), ns_to_ms(r.step_ns), true, "fastest fitting: " + record_tooltip(r)});
      best.emphasis = true;
      series.push_back(std::move(best));
    }
    const Tags tags = {{"model", b.model}, {"hardware", b.hardware}, {"gpus", std::to_string(b.gpus)},
                       {"tokens", std::to_string(t.token_unit == TokenUnit::kGlobal ? b.global_tokens : b.tokens)},
                       {"tp", std::to_string(b.tp_size)}, {"routing", b.routing}};
    o << figure(group_caption(t, b, several_tp), svg_chart("pipeline degree n", "step time (ms)", series, style), tags);
  }
  o << "</div>\n";
}

}  // namespace

std::string sweep_html(const SweepTable& t) {
  std::ostringstream o;
  write_head(o, t);
  write_filters(o, t);
  const std::vector<BestChoice> choices = best_per_group(t);
  write_step_plots(o, t, choices);
  write_pareto(o, t);
  write_best_n(o, t, choices);
  if (varies(t, [](const SweepRecord& r) { return r.layout.tp; })) write_layouts(o, t, choices);
  write_capacity(o, t);
  o << kFilterScript << "</body></html>\n";
  return o.str();
}

}  // namespace moesim
