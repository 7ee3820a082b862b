// The step's HTML report: the page, its header and tables; the charts are in step_html_charts.cc.
#include "sim/step/step_html.h"

#include <sstream>

#include "sim/report/plan_report.h"
#include "sim/report/svg_chart.h"
#include "sim/step/step_html_parts.h"

namespace moesim {
namespace step_html_detail {

std::string json_text(const Json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); }

double gib_of(const Json& bytes) { return static_cast<double>(bytes.get<std::int64_t>()) / static_cast<double>(kGiB); }

}  // namespace step_html_detail

namespace {

using namespace step_html_detail;

// A table cell: the value rounded for reading, the JSON's own text (and unit) in its tooltip.
std::string cell(const Json& value, const std::string& shown, const char* unit) {
  return "<td title=\"" + html_escape(json_text(value) + (*unit ? std::string(" ") + unit : "")) + "\">" +
         html_escape(shown) + "</td>";
}
std::string seconds_cell(const Json& v) { return cell(v, format_fixed(v.get<double>(), 4), "s"); }
std::string gib_cell(const Json& bytes) { return cell(bytes, format_fixed(gib_of(bytes), 2), "bytes"); }

// The layout's keys as the JSON names them, and what the header calls them; keys the table does
// not know are shown by their JSON name.
const char* layout_name(const std::string& key) {
  static const std::pair<const char*, const char*> names[] = {
      {"gpus", "GPUs"}, {"tp", "tensor parallel (tp)"}, {"pp", "pipeline stages (pp)"},
      {"vpp", "virtual stages (vpp)"}, {"ep", "expert parallel (ep)"}, {"cp", "context parallel (cp)"},
      {"dp", "data parallel (dp)"}, {"etp", "experts' tensor parallel (etp)"},
      {"edp", "experts' data parallel (edp)"}, {"global_batch", "global batch (sequences)"}, {"micro_batch", "micro-batch"},
      {"microbatches_per_pipeline", "microbatches per pipeline"}, {"seq", "sequence length"},
      {"schedule", "schedule"}, {"recompute", "recompute"}, {"recompute_modules", "recomputed modules"},
      {"sequence_parallel", "sequence parallel (SP)"},
      {"attention", "attention"}, {"gemm_dtype", "precision (GEMMs)"}, {"fp8_recipe", "FP8 scaling"},
      {"zero", "ZeRO stage"},
      {"overlap_grad_reduce", "gradient reduction overlapped"}, {"moe_chunks", "MoE chunks"}, {"moe_strategy", "MoE memory reuse"},
      {"host_launch_s", "host time per launch (s)"}};
  for (const auto& [k, name] : names)
    if (key == k) return name;
  return nullptr;
}

void write_head(std::ostream& o, const std::string& title) {
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << html_escape(title)
    << "</title>\n<style>\n"
    << html_report_style() << ".facts{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}"
    << ".scroll{overflow-x:auto;max-width:100%}td.fit{color:#1a7f37}td.nofit{color:#b42318;font-weight:bold}"
    << timeline_css() << "\n</style></head><body>\n<h1>" << html_escape(title) << "</h1>\n";
}

void write_layout(std::ostream& o, const Json& report) {
  o << "<table data-table=\"layout\"><tr><th colspan=\"2\">layout</th></tr>\n";
  for (const auto& [key, value] : report["layout"].items()) {
    const char* name = layout_name(key);
    o << "<tr><td class=\"l\">" << html_escape(name ? name : key) << "</td>" << cell(value, json_text(value), "")
      << "</tr>\n";
  }
  o << "</table>\n";
}

void metric_row(std::ostream& o, const char* name, const std::string& value_cell) {
  o << "<tr><td class=\"l\">" << name << "</td>" << value_cell << "</tr>\n";
}

void write_metrics(std::ostream& o, const Json& r) {
  o << "<table data-table=\"metrics\"><tr><th colspan=\"2\">step</th></tr>\n";
  metric_row(o, "step time (s)", seconds_cell(r["step_time_s"]));
  metric_row(o, "tokens/s per GPU", cell(r["tokens_per_s_per_gpu"], format_fixed(r["tokens_per_s_per_gpu"].get<double>(), 1), ""));
  metric_row(o, "model TFLOP/s per GPU",
             cell(r["model_tflops_per_gpu"], format_fixed(r["model_tflops_per_gpu"].get<double>(), 1), ""));
  metric_row(o, "FLOPs formula", "<td class=\"l\">" + html_escape(json_text(r["flops_formula"])) + "</td>");
  metric_row(o, "MFU", cell(r["mfu"], format_fixed(100 * r["mfu"].get<double>(), 1) + "%", ""));
  metric_row(o, "bubble fraction", cell(r["bubble_fraction"], format_fixed(r["bubble_fraction"].get<double>(), 3), ""));
  metric_row(o, "peak memory (GiB)", gib_cell(r["peak_memory_bytes"]));
  metric_row(o, "GPU memory (GiB)", gib_cell(r["memory_capacity_bytes"]));
  metric_row(o, "reserve (GiB)", gib_cell(r["memory_reserve_bytes"]));
  const bool fits = r["fits"].get<bool>();
  metric_row(o, "fits", std::string("<td class=\"") + (fits ? "fit" : "nofit") + "\" title=\"" + json_text(r["fits"]) +
                            "\">" + (fits ? "fits" : "does not fit") + "</td>");
  metric_row(o, "tasks simulated", cell(r["tasks"], json_text(r["tasks"]), ""));
  o << "</table>\n";
}

void write_stage_table(std::ostream& o, const Json& report) {
  o << "<table data-table=\"stages\"><tr><th>stage</th><th>rank</th><th>layers</th>";
  for (const StageTimeField& f : stage_time_fields()) o << "<th>" << f.name << " (s)</th>";
  o << "<th>peak memory (GiB)</th><th>model states (GiB)</th><th>activations and other (GiB)</th></tr>\n";
  for (const Json& s : report["stages"]) {
    o << "<tr data-stage=\"" << json_text(s["stage"]) << "\">" << cell(s["stage"], json_text(s["stage"]), "")
      << cell(s["rank"], json_text(s["rank"]), "") << cell(s["layers"], json_text(s["layers"]), "");
    for (const StageTimeField& f : stage_time_fields()) o << seconds_cell(s[f.key]);
    const std::int64_t rest = s["peak_memory_bytes"].get<std::int64_t>() - s["model_state_bytes"].get<std::int64_t>();
    o << gib_cell(s["peak_memory_bytes"]) << gib_cell(s["model_state_bytes"]) << gib_cell(Json(rest)) << "</tr>\n";
  }
  o << "</table>\n";
}

void write_stages(std::ostream& o, const Json& report) {
  std::vector<std::pair<std::string, std::string>> time_legend;
  for (const StageTimeField& f : stage_time_fields()) time_legend.emplace_back(f.name, f.color);
  o << "<h2>Pipeline stages</h2>\n<p class=\"note\">Per stage, its representative rank's compute (the union of "
       "its compute-stream tasks), its bubble (the time it runs nothing but pipeline transfers) and the time each "
       "kind of communication runs while no other kind does. They are separate measures, stacked for comparison: "
       "they need not add up to the step. Hover a bar for its value.</p>\n"
    << html_legend(time_legend) << stage_time_chart(report)
    << "<p class=\"note\">Peak memory: the model states, held all step, and the rest of the simulated peak "
       "(activations kept for the backward, recomputed ones); the step fits when every stage's peak is at most the "
       "GPU's memory less the reserve.</p>\n"
    << html_legend({{"model states", kModelStatesColor}, {"activations and other", kActivationsColor},
                    {"usable: capacity less the reserve", kUsableColor}, {"capacity", kCapacityColor}})
    << stage_memory_chart(report);
  write_stage_table(o, report);
}

}  // namespace

std::string step_html(const SimulatedStep& sim, const ModelSpec& model, const ClusterSpec& cluster,
                      const StepSpec& spec, const std::string& version) {
  const Json report = Json::parse(step_report_json(sim.report, model, cluster, spec, version));
  std::ostringstream o;
  write_head(o, "moesim training step: " + model.name + " on " + std::to_string(sim.report.shape.layout.gpus) + " x " +
                    cluster.node.gpu.name + " (" + cluster.name + ")");
  o << "<p class=\"note\">moesim " << html_escape(version)
    << ": one whole training step simulated as events (docs/training-step.md). The same numbers as "
       "<code>--json</code>; hover a cell for the JSON's value.</p>\n<div class=\"facts\">";
  write_layout(o, report);
  write_metrics(o, report);
  o << "</div>\n";
  write_stages(o, report);
  o << "<h2>Timeline</h2>\n<p class=\"note\">One lane per pipeline stage (its representative rank): each pass of "
       "a microbatch through a model chunk from its first kernel or collective to its last, numbered by its "
       "microbatch; other work outside the passes; bubbles. A pass that began while the previous one's last "
       "collective ran is drawn from that collective's end (its tooltip gives both). Hover a bar for its pass and "
       "times.</p>\n"
    << timeline_section(step_lanes(sim.graph, sim.run), report["step_time_s"].get<double>());
  o << "</body></html>\n";
  return o.str();
}

}  // namespace moesim
