#include "sim/report/sweep_columns.h"

#include "sim/report/plan_report.h"

namespace moesim {
namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string us(TimeNs t) { return format_fixed(static_cast<double>(t) / 1e3, 3); }
std::string flag(bool b) { return b ? "1" : "0"; }

using J = nlohmann::ordered_json;

// A column of the record: the CSV spelling, and the same value in the JSON records.
#define MOESIM_RECORD_COLUMN(name, meaning, csv_expr, key, json_expr)              \
  SweepColumn {                                                                    \
    name, meaning, [](const SweepRow& row) -> std::string {                        \
      const SweepRecord& r = row.record;                                           \
      return csv_expr;                                                             \
    },                                                                             \
        key, [](const SweepRecord& r) -> J { return json_expr; }                   \
  }
// A column derived from the table or the sweep's options: CSV only.
#define MOESIM_TABLE_COLUMN(name, meaning, csv_expr)                               \
  SweepColumn {                                                                    \
    name, meaning, [](const SweepRow& row) -> std::string { return csv_expr; }, nullptr, nullptr \
  }

// Up to the group's best: the columns of the first sweeps, whose order earlier readers keep.
std::vector<SweepColumn> first_columns() {
  return {
      MOESIM_RECORD_COLUMN("model", "the configuration's model file", csv_field(r.model), "model", r.model),
      MOESIM_RECORD_COLUMN("hardware", "the configuration's hardware file", csv_field(r.hardware), "hardware",
                           r.hardware),
      MOESIM_RECORD_COLUMN("gpus", "the configuration's GPU count", std::to_string(r.gpus), "gpus", r.gpus),
      MOESIM_RECORD_COLUMN("tokens", "tokens per GPU (B), given or derived from global_tokens",
                           std::to_string(r.tokens), "tokens", r.tokens),
      MOESIM_RECORD_COLUMN("routing", "as in `moesim simulate`", csv_field(r.routing), "routing", r.routing),
      MOESIM_RECORD_COLUMN("strategy", "as in `moesim simulate`", std::string(to_string(r.strategy)), "strategy",
                           std::string(to_string(r.strategy))),
      MOESIM_RECORD_COLUMN("n", "pipeline chunks, as in `moesim simulate`", std::to_string(r.num_chunks), "n",
                           r.num_chunks),
      MOESIM_RECORD_COLUMN("step_us", "the simulated step (JSON: step_ns)", us(r.step_ns), "step_ns", r.step_ns),
      MOESIM_RECORD_COLUMN("forward_us", "its forward passes (JSON: forward_ns)", us(r.forward_ns), "forward_ns",
                           r.forward_ns),
      MOESIM_RECORD_COLUMN("backward_us", "its backward passes (JSON: backward_ns)", us(r.backward_ns),
                           "backward_ns", r.backward_ns),
      MOESIM_RECORD_COLUMN("peak_bytes", "the simulated layers' device peak on the fullest rank",
                           std::to_string(r.peak_bytes), "peak_bytes", r.peak_bytes),
      MOESIM_RECORD_COLUMN("capacity_bytes", "one GPU's memory", std::to_string(r.capacity_bytes), "capacity_bytes",
                           r.capacity_bytes),
      MOESIM_RECORD_COLUMN("fits", "1 when the whole model (model_peak_bytes) fits in capacity_bytes", flag(r.fits),
                           "fits", r.fits),
      MOESIM_TABLE_COLUMN("speedup_vs_n1_none", "the group's (n = 1, none) step over this one; empty without it",
                          row.has_speedup ? format_fixed(row.speedup, 4) : ""),
      MOESIM_TABLE_COLUMN("best",
                          "1 for the group's fastest fitting configuration; a group is one model, hardware, GPU "
                          "count, tokens, tp and routing",
                          flag(row.best)),
  };
}

// The routing's statistics, the layout, and the whole-model verdict, added since.
std::vector<SweepColumn> later_columns() {
  return {
      MOESIM_RECORD_COLUMN("expert_imbalance", "the routing's max / mean tokens per expert (docs/network.md)",
                           format_fixed(r.expert_imbalance, 4), "expert_imbalance", r.expert_imbalance),
      MOESIM_RECORD_COLUMN("rank_imbalance", "max / mean rows a rank's experts compute",
                           format_fixed(r.rank_imbalance, 4), "rank_imbalance", r.rank_imbalance),
      MOESIM_RECORD_COLUMN("dropped_fraction", "the tokens dropped at capacity", format_fixed(r.dropped_fraction, 6),
                           "dropped_fraction", r.dropped_fraction),
      MOESIM_RECORD_COLUMN("tp", "tensor-parallel degree", std::to_string(r.layout.tp), "tp", r.layout.tp),
      MOESIM_RECORD_COLUMN("ep", "expert-parallel group (GPUs / tp)", std::to_string(r.layout.ep), "ep",
                           r.layout.ep),
      MOESIM_RECORD_COLUMN("dp", "data-parallel replicas (1)", std::to_string(r.layout.dp), "dp", r.layout.dp),
      MOESIM_RECORD_COLUMN("global_tokens", "the step's batch over the cluster: GPUs / tp x tokens",
                           std::to_string(r.global_tokens), "global_tokens", r.global_tokens),
      MOESIM_TABLE_COLUMN("best_layout",
                          "1 for the fastest fitting configuration of any layout at one model, hardware, GPU count, "
                          "global_tokens and routing",
                          flag(row.best_layout)),
      MOESIM_RECORD_COLUMN("drop_duplicate_tokens", "1 where duplicate token dropping is in effect (tp > 1, not "
                                                    "turned off)",
                           flag(r.drop_duplicate_tokens), "drop_duplicate_tokens", r.drop_duplicate_tokens),
      MOESIM_TABLE_COLUMN("grad_sync", "the sweep-wide option, on every row (JSON: at the top level)",
                          flag(row.table.grad_sync)),
      MOESIM_TABLE_COLUMN("zero_stage", "the sweep-wide option, on every row (JSON: at the top level)",
                          std::to_string(row.table.zero_stage)),
      MOESIM_TABLE_COLUMN("checkpoint", "the sweep-wide option, on every row (JSON: at the top level)",
                          std::string(to_string(row.table.checkpoint))),
      MOESIM_RECORD_COLUMN("model_peak_bytes",
                           "the whole model's device peak on the fullest GPU (all `num_layers` layers, "
                           "[concepts.md](concepts.md#memory)): what `fits` compares, what the HTML plots",
                           std::to_string(r.model_peak_bytes), "model_peak_bytes", r.model_peak_bytes),
  };
}

std::vector<SweepColumn> make_columns() {
  std::vector<SweepColumn> columns = first_columns();
  for (const SweepColumn& c : later_columns()) columns.push_back(c);
  return columns;
}

#undef MOESIM_RECORD_COLUMN
#undef MOESIM_TABLE_COLUMN

}  // namespace

const std::vector<SweepColumn>& sweep_columns() {
  static const std::vector<SweepColumn> columns = make_columns();
  return columns;
}

std::string sweep_csv_header() {
  std::string s;
  for (const SweepColumn& c : sweep_columns()) s += (s.empty() ? "" : ",") + std::string(c.name);
  return s;
}

nlohmann::ordered_json sweep_json_record(const SweepRecord& record) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const SweepColumn& c : sweep_columns())
    if (c.json_key) j[c.json_key] = c.json(record);
  return j;
}

std::string sweep_columns_markdown() {
  std::string s = "| column | meaning |\n|---|---|\n";
  for (const SweepColumn& c : sweep_columns()) s += std::string("| ") + c.name + " | " + c.meaning + " |\n";
  return s;
}

}  // namespace moesim
