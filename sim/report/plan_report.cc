#include "sim/report/plan_report.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>

namespace moesim {

std::string_view to_string(PlanObjective o) {
  switch (o) {
    case PlanObjective::kTime:
      return "time";
    case PlanObjective::kForward:
      return "forward";
    case PlanObjective::kMemory:
      return "memory";
    case PlanObjective::kBalanced:
      return "balanced";
  }
  return "?";
}

std::optional<PlanObjective> parse_plan_objective(std::string_view s) {
  for (PlanObjective o : {PlanObjective::kTime, PlanObjective::kForward, PlanObjective::kMemory, PlanObjective::kBalanced}) {
    if (s == to_string(o)) return o;
  }
  return std::nullopt;
}

std::vector<std::string> plan_objective_names() { return {"time", "forward", "memory", "balanced"}; }

TimeNs objective_time_ns(TimeNs step_ns, TimeNs forward_ns, PlanObjective objective) {
  return objective == PlanObjective::kForward ? forward_ns : step_ns;
}

std::string format_fixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

std::string format_ms(TimeNs t) { return format_fixed(ns_to_ms(t), 3); }

std::string format_gib(std::int64_t bytes) {
  return format_fixed(static_cast<double>(bytes) / static_cast<double>(kGiB), 2);
}

std::string layout_text(const ParallelLayout& layout, bool drop_duplicate_tokens, bool grad_sync, int zero_stage,
                        std::int64_t tokens_per_gpu) {
  std::string s = layout.describe();
  if (layout.tp > 1) {
    const int groups = layout.world() / layout.tp;
    s += "; experts 1/" + std::to_string(layout.tp) + " per rank (TED), duplicate token dropping " +
         (drop_duplicate_tokens ? "on" : "off") + "; a tensor-parallel group shares its B tokens: global batch " +
         std::to_string(groups) + " x B";
    if (tokens_per_gpu > 0) s += " = " + std::to_string(groups * tokens_per_gpu) + " tokens";
  }
  s += std::string("; gradient all-reduces ") + (grad_sync ? "simulated (comm.grad)" : "not simulated (--grad-sync)");
  if (zero_stage > 0) s += "; ZeRO-" + std::to_string(zero_stage);
  return s;
}

namespace {

std::string pad(const std::string& s, std::size_t width, bool left = false) {
  if (s.size() >= width) return s;
  return left ? s + std::string(width - s.size(), ' ') : std::string(width - s.size(), ' ') + s;
}

std::string config_name(int n, MemoryStrategy s) {
  return "n=" + std::to_string(n) + " " + std::string(to_string(s));
}

// tensor_parallel: the tokens per GPU are not the cluster's batch over the GPUs, so say it.
void write_table(std::ostream& out, const PlanTable& t, bool tensor_parallel, PlanObjective objective) {
  out << "\ntokens per GPU: " << t.tokens;
  if (tensor_parallel) out << " (global batch " << t.global_tokens << ")";
  out << "   baseline (n=1, none): step " << format_ms(t.baseline.step_ns)
      << " ms, peak " << format_gib(t.baseline.peak_bytes) << " GiB (simulated layers), whole model "
      << format_gib(t.baseline.model_peak_bytes) << " GiB\n";
  out << pad("rank", 4) << pad("n", 4) << "  " << pad("strategy", 8, true) << pad("step_ms", 10)
      << pad("fwd_ms", 10) << pad("bwd_ms", 10) << pad("peak_GiB", 10) << pad("model_GiB", 10) << pad("fits", 5)
      << pad("speedup", 9) << pad("saved_GiB", 10) << "\n";
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    const PlanRow& r = t.rows[i];
    out << pad(std::to_string(i + 1), 4) << pad(std::to_string(r.num_chunks), 4) << "  "
        << pad(std::string(to_string(r.strategy)), 8, true) << pad(format_ms(r.step_ns), 10)
        << pad(format_ms(r.forward_ns), 10) << pad(format_ms(r.backward_ns), 10)
        << pad(format_gib(r.peak_bytes), 10) << pad(format_gib(r.model_peak_bytes), 10) << pad(r.fits ? "yes" : "no", 5)
        << pad(format_fixed(r.speedup, 3) + "x", 9) << pad(format_gib(r.memory_saved_bytes), 10)
        << (static_cast<int>(i) == t.best ? "  <- best" : "") << "\n";
  }
  if (t.best < 0) out << "no configuration fits in " << format_gib(t.baseline.capacity_bytes) << " GiB\n";
  if (!t.picks.empty()) {
    out << "methods:\n";
    for (const MethodPick& p : t.picks) {
      out << "  " << pad(p.method, 16, true);
      if (!p.found) {
        out << "  no pick";
      } else {
        out << "  " << pad(config_name(p.num_chunks, p.strategy), 10, true) << "  step "
            << format_ms(p.step_ns) << " ms";
        if (objective == PlanObjective::kForward) out << ", forward " << format_ms(p.forward_ns) << " ms";
        out << (p.fits ? "" : " (does not fit)");
        out << (p.loss_ns == 0 ? "  = exhaustive best"
                               : "  loses " + format_ms(p.loss_ns) + " ms against the exhaustive best");
      }
      if (!p.detail.empty()) out << "  [" << p.detail << "]";
      out << "\n";
    }
  }
}

void write_online(std::ostream& out, const OnlineReplay& o, PlanObjective objective) {
  out << "\nmpipemoe-online replay over tokens";
  for (std::int64_t t : o.sequence) out << " " << t;
  out << "\n  trials: " << o.trials.size() << " (exhaustive search: " << o.exhaustive_trials
      << "), cache hits: " << o.cache_hits << ", range hits: " << o.range_hits << "\n";
  for (const OnlineTrialRecord& t : o.trials) {
    out << "  trial B=" << t.tokens << " " << config_name(t.num_chunks, t.strategy)
        << (objective == PlanObjective::kForward ? " forward " : " step ") << format_ms(t.step_ns) << " ms\n";
  }
  out << "  final ranges:";
  for (const OnlineRange& r : o.ranges) {
    out << " [" << r.lo << ", " << r.hi << "] -> " << config_name(r.num_chunks, r.strategy) << ";";
  }
  out << "\n";
}

void write_fit(std::ostream& out, const FitReport& f) {
  out << "\nfit: smallest cluster (up to " << f.max_nodes << " nodes) where the model fits";
  if (f.max_step_ns > 0) out << " and a step takes at most " << format_ms(f.max_step_ns) << " ms";
  out << "\n";
  for (const FitStep& s : f.steps) {
    out << "  " << pad(std::to_string(s.num_nodes), 3) << " node(s) " << pad(std::to_string(s.num_gpus), 5)
        << " GPUs";
    if (s.valid && s.tp_size > 1) out << " (tp " << s.tp_size << " x ep " << s.ep_size << ")";
    out << ": ";
    if (!s.valid) {
      out << "skipped (" << s.reason << ")\n";
    } else if (!s.found) {
      out << "no (" << s.reason << ")\n";
    } else {
      out << "yes: " << config_name(s.best.num_chunks, s.best.strategy) << ", step "
          << format_ms(s.best.step_ns) << " ms, whole model " << format_gib(s.best.model_peak_bytes) << " GiB\n";
    }
  }
  if (f.answer < 0) {
    out << "answer: none up to " << f.max_nodes << " nodes\n";
  } else {
    const FitStep& s = f.steps[static_cast<std::size_t>(f.answer)];
    out << "answer: " << s.num_nodes << " node(s), " << s.num_gpus << " GPUs\n";
  }
}

nlohmann::ordered_json row_json(const PlanRow& r) {
  return {{"n", r.num_chunks},
          {"strategy", std::string(to_string(r.strategy))},
          {"step_ns", r.step_ns},
          {"forward_ns", r.forward_ns},
          {"backward_ns", r.backward_ns},
          {"peak_bytes", r.peak_bytes},
          {"model_peak_bytes", r.model_peak_bytes},
          {"capacity_bytes", r.capacity_bytes},
          {"fits", r.fits},
          {"speedup", r.speedup},
          {"memory_saved_bytes", r.memory_saved_bytes}};
}

nlohmann::ordered_json pick_json(const MethodPick& p) {
  return {{"method", p.method},
          {"found", p.found},
          {"n", p.num_chunks},
          {"strategy", std::string(to_string(p.strategy))},
          {"step_ns", p.step_ns},
          {"forward_ns", p.forward_ns},
          {"fits", p.fits},
          {"loss_ns", p.loss_ns},
          {"detail", p.detail}};
}

nlohmann::ordered_json table_json(const PlanTable& t) {
  using nlohmann::ordered_json;
  ordered_json tj;
  tj["tokens"] = t.tokens;
  tj["global_tokens"] = t.global_tokens;
  tj["baseline"] = row_json(t.baseline);
  ordered_json rows = ordered_json::array();
  for (const PlanRow& row : t.rows) rows.push_back(row_json(row));
  tj["rows"] = rows;
  tj["best"] = t.best < 0 ? ordered_json() : row_json(t.rows[static_cast<std::size_t>(t.best)]);
  ordered_json picks = ordered_json::array();
  for (const MethodPick& p : t.picks) picks.push_back(pick_json(p));
  tj["methods"] = picks;
  return tj;
}

nlohmann::ordered_json online_json(const OnlineReplay& online) {
  using nlohmann::ordered_json;
  ordered_json o;
  o["sequence"] = online.sequence;
  ordered_json trials = ordered_json::array();
  for (const OnlineTrialRecord& t : online.trials) {
    trials.push_back({{"tokens", t.tokens},
                      {"n", t.num_chunks},
                      {"strategy", std::string(to_string(t.strategy))},
                      {"step_ns", t.step_ns}});
  }
  o["trials"] = trials;
  o["cache_hits"] = online.cache_hits;
  o["range_hits"] = online.range_hits;
  o["exhaustive_trials"] = online.exhaustive_trials;
  ordered_json ranges = ordered_json::array();
  for (const OnlineRange& g : online.ranges) {
    ranges.push_back({{"lo", g.lo}, {"hi", g.hi}, {"n", g.num_chunks},
                      {"strategy", std::string(to_string(g.strategy))}});
  }
  o["ranges"] = ranges;
  return o;
}

nlohmann::ordered_json fit_json(const FitReport& fit) {
  using nlohmann::ordered_json;
  ordered_json f;
  f["max_nodes"] = fit.max_nodes;
  f["max_step_ns"] = fit.max_step_ns;
  ordered_json steps = ordered_json::array();
  for (const FitStep& s : fit.steps) {
    ordered_json sj = {{"num_nodes", s.num_nodes}, {"num_gpus", s.num_gpus}, {"tp_size", s.tp_size},
                       {"ep_size", s.ep_size},     {"valid", s.valid},       {"found", s.found},
                       {"reason", s.reason}};
    if (s.found) sj["best"] = row_json(s.best);
    steps.push_back(sj);
  }
  f["steps"] = steps;
  f["answer_nodes"] = fit.answer < 0 ? ordered_json()
                                     : ordered_json(fit.steps[static_cast<std::size_t>(fit.answer)].num_nodes);
  return f;
}

// The report's description of the request, in the order the JSON lists it.
void add_request_fields(nlohmann::ordered_json& j, const PlanReport& r) {
  j["schema_version"] = 1;
  j["tool"] = "moesim " + r.tool_version;
  j["model"] = r.model;
  j["cluster"] = r.cluster;
  if (!r.calibration.empty()) j["calibration"] = r.calibration;
  j["num_gpus"] = r.num_gpus;
  j["ep_size"] = r.layout.ep;
  j["tp_size"] = r.layout.tp;
  j["dp_size"] = r.layout.dp;
  j["layout"] = r.layout.describe();
  j["drop_duplicate_tokens"] = r.drop_duplicate_tokens;
  j["grad_sync"] = r.grad_sync;
  j["zero_stage"] = r.zero_stage;
  j["checkpoint"] = std::string(to_string(r.checkpoint));
  j["order"] = r.order;
  j["network"] = r.network;
  j["routing"] = r.routing;
  j["num_moe_layers"] = r.num_moe_layers;
  j["objective"] = std::string(to_string(r.objective));
  j["chunk_counts"] = r.chunk_counts;
  nlohmann::ordered_json strategies = nlohmann::ordered_json::array();
  for (MemoryStrategy s : r.strategies) strategies.push_back(std::string(to_string(s)));
  j["strategies"] = strategies;
}

}  // namespace

void write_plan_text(std::ostream& out, const PlanReport& r) {
  out << "# moesim " << r.tool_version << " plan\n";
  out << "# model " << r.model << " on " << r.cluster << " (" << r.num_gpus << " GPUs, EP " << r.layout.ep
      << "), order " << r.order << ", network " << r.network << ", routing " << r.routing << ", " << r.num_moe_layers << " MoE layer(s), objective "
      << to_string(r.objective) << "\n";
  if (layout_line_wanted(r.layout.tp, r.grad_sync, r.zero_stage)) {
    out << "# layout    " << layout_text(r.layout, r.drop_duplicate_tokens, r.grad_sync, r.zero_stage, 0) << "\n";
  }
  if (!r.calibration.empty()) out << "# calibrated " << r.calibration << "\n";
  out << "# n:";
  for (int n : r.chunk_counts) out << " " << n;
  out << "; strategies:";
  for (MemoryStrategy s : r.strategies) out << " " << to_string(s);
  if (r.checkpoint != ActivationCheckpointing::kNone)
    out << "; activation checkpointing " << to_string(r.checkpoint);
  out << "\n";
  for (const PlanTable& t : r.tables) write_table(out, t, r.layout.tp > 1, r.objective);
  if (r.has_online) write_online(out, r.online, r.objective);
  if (r.has_fit) write_fit(out, r.fit);
}

std::string plan_json(const PlanReport& r) {
  using nlohmann::ordered_json;
  ordered_json j;
  add_request_fields(j, r);
  ordered_json tables = ordered_json::array();
  for (const PlanTable& t : r.tables) tables.push_back(table_json(t));
  j["tables"] = tables;
  if (r.has_online) j["online"] = online_json(r.online);
  if (r.has_fit) j["fit"] = fit_json(r.fit);
  return j.dump(2) + "\n";
}

}  // namespace moesim
