// The pieces the sweep's HTML report (sim/report/sweep_html.cc) is made of, shared by its two
// files: the page and the step-time plots there, the derived views in sweep_html_views.cc.
// Every plot is an SVG inside a <figure class="plot"> whose data-* attributes (model, hardware,
// gpus, tokens, tp, routing) say what it shows, so that the page's filter can select on them.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "sim/report/svg_chart.h"
#include "sim/report/sweep_report.h"

namespace moesim::sweep_html_detail {

// A figure's data-* attributes: (name, value).
using Tags = std::vector<std::pair<std::string, std::string>>;

// A <figure> holding an SVG chart under its caption.
std::string figure(const std::string& caption, const std::string& svg, const Tags& tags);

// A whole number with thousands separators: 17,688,300.
std::string format_count(double value);

// The configuration of a record, for its marker's tooltip.
std::string record_tooltip(const SweepRecord& r);

// A series of the given name and colour, joined by a line or markers alone.
Series series_of(std::string name, std::string color, bool line);

// The colour of a memory strategy, the same in every plot of the page.
const char* strategy_color(MemoryStrategy s);

// "tokens per GPU" or "global tokens per step", as the sweep's token axis counted.
const char* axis_tokens_label(const SweepTable& t);
// "4096 tokens per GPU" / "65536 tokens per step": one value of the token axis.
std::string tokens_text(const SweepTable& t, std::int64_t tokens);

// True when the records have more than one value of `key`.
template <typename F>
bool varies(const SweepTable& t, F key) {
  for (const SweepRecord& r : t.records) {
    if (key(r) != key(t.records.front())) return true;
  }
  return false;
}

// The sections after the step-time plots, in page order.
void write_pareto(std::ostream& o, const SweepTable& t);
void write_best_n(std::ostream& o, const SweepTable& t, const std::vector<BestChoice>& choices);
void write_layouts(std::ostream& o, const SweepTable& t, const std::vector<BestChoice>& choices);
void write_capacity(std::ostream& o, const SweepTable& t);

}  // namespace moesim::sweep_html_detail
