#include "sim/search/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "sim/core/error.h"
#include "sim/cost/compute_cost.h"
#include "sim/driver/footprint.h"
#include "sim/driver/simulation.h"
#include "sim/memory/model_memory.h"
#include "sim/net/alpha_beta.h"
#include "sim/report/report.h"
#include "sim/search/online_search.h"
#include "sim/search/strategy_model.h"
#include "sim/search/thread_pool.h"

namespace moesim::search {
namespace {

const std::vector<MemoryStrategy> kAllStrategies = {MemoryStrategy::kNone, MemoryStrategy::kS1,
                                                    MemoryStrategy::kS2, MemoryStrategy::kS3,
                                                    MemoryStrategy::kS4};

RunSpec with_config(RunSpec run, std::int64_t tokens, int n, MemoryStrategy s) {
  run.tokens_per_gpu = tokens;
  run.num_chunks = n;
  run.strategy = s;
  return run;
}

std::string config_text(std::int64_t tokens, int n, MemoryStrategy s) {
  return "tokens " + std::to_string(tokens) + ", n = " + std::to_string(n) + ", strategy " +
         std::string(to_string(s));
}

// derive_layer_dims with the configuration named in the message.
LayerDims checked_dims(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run) {
  try {
    check_simulated_layers(model, run.num_moe_layers);
    return derive_layer_dims(model, cluster, run);
  } catch (const InputError& e) {
    throw InputError(e.where(), "configuration " +
                                    config_text(run.tokens_per_gpu, run.num_chunks, run.strategy) +
                                    ": " + e.rule());
  }
}

std::string fmt(double v, const char* format) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// The request's way of running independent simulations, or this process's threads.
std::vector<PlanRow> simulate_rows(const PlanRequest& req, std::size_t count,
                                   const std::function<PlanRow(std::size_t)>& simulate) {
  if (req.simulate_rows) return req.simulate_rows(count, simulate);
  std::vector<PlanRow> rows(count);
  parallel_for(count, req.jobs, [&](std::size_t i) { rows[i] = simulate(i); });
  return rows;
}

struct Key {
  std::int64_t tokens;
  int n;
  MemoryStrategy strategy;
  friend bool operator<(const Key& a, const Key& b) {
    return std::tie(a.tokens, a.n, a.strategy) < std::tie(b.tokens, b.n, b.strategy);
  }
  friend bool operator==(const Key&, const Key&) = default;
};

// Simulated configurations of one plan, evaluated in parallel up front and lazily afterwards.
class EvaluationCache {
 public:
  explicit EvaluationCache(const PlanRequest& request) : request_(request) {}

  void evaluate_all(const std::vector<Key>& keys) {
    std::vector<Key> todo;
    for (const Key& k : keys) {
      if (rows_.count(k) == 0 && std::find(todo.begin(), todo.end(), k) == todo.end()) todo.push_back(k);
    }
    const std::vector<PlanRow> out = simulate_rows(request_, todo.size(), [&](std::size_t i) { return simulate(todo[i]); });
    for (std::size_t i = 0; i < todo.size(); ++i) rows_.emplace(todo[i], out[i]);
  }

  const PlanRow& get(const Key& k) {
    auto it = rows_.find(k);
    if (it == rows_.end()) it = rows_.emplace(k, simulate(k)).first;
    return it->second;
  }

 private:
  PlanRow simulate(const Key& k) const {
    return evaluate_configuration(request_.model, request_.cluster,
                                  with_config(request_.run, k.tokens, k.n, k.strategy));
  }

  const PlanRequest& request_;
  std::map<Key, PlanRow> rows_;
};

void add_relative(PlanRow& row, const PlanRow& baseline) {
  row.speedup = static_cast<double>(baseline.step_ns) / static_cast<double>(row.step_ns);
  row.memory_saved_bytes = baseline.model_peak_bytes - row.model_peak_bytes;
}

const PlanRow* find_row(const PlanTable& t, int n, MemoryStrategy s) {
  for (const PlanRow& r : t.rows) {
    if (r.num_chunks == n && r.strategy == s) return &r;
  }
  return nullptr;
}

TimeNs objective_time(const PlanRow& row, PlanObjective objective) {
  return objective_time_ns(row.step_ns, row.forward_ns, objective);
}

MethodPick make_pick(const std::string& method, const PlanTable& t, const PlanRow& row, PlanObjective objective) {
  MethodPick p;
  p.method = method;
  p.found = true;
  p.num_chunks = row.num_chunks;
  p.strategy = row.strategy;
  p.step_ns = row.step_ns;
  p.forward_ns = row.forward_ns;
  p.fits = row.fits;
  p.loss_ns = t.best >= 0 ? objective_time(row, objective) -
                                objective_time(t.rows[static_cast<std::size_t>(t.best)], objective)
                          : 0;
  return p;
}

StrategyModelParams strategy_params(const PlanRequest& req, std::int64_t tokens, int n) {
  const ClusterSpec& c = req.cluster;
  const GpuSpec& gpu = c.node.gpu;
  double flops = 0, a2a = 0;
  if (c.alpha_beta) {
    flops = 1.0 / c.alpha_beta->gemm_beta_s_per_flop;
    a2a = 1.0 / c.alpha_beta->a2a_beta_s_per_byte;
  } else {
    const ComputeCostModel compute(c);
    flops = compute.peak_flops(req.model.gemm_dtype) * gpu.gemm_efficiency_for(req.model.gemm_dtype);
    if (gpu.calibration && gpu.calibration->gemm.count(req.model.gemm_dtype)) {
      // Measured: the rate of this chunk's FC1 GEMM (top_k x tokens / n rows, d_model -> d_ffn).
      const GemmWork fc1{1, std::max<std::int64_t>(1, req.model.top_k * tokens / n), req.model.d_ffn, req.model.d_model,
                         req.model.gemm_dtype, req.model.element_bytes()};
      flops = compute.gemm_flop_rate(fc1);
    }
    a2a = (c.num_nodes > 1 ? c.inter_node : c.node.intra_node).effective_bandwidth();
  }
  // A node without PCIe cannot run s1-s3 (derive_layer_dims rejects them); none and S4 have no
  // memcpy term, so any positive placeholder leaves their costs unchanged.
  double pcie = c.node.pcie_h2d.effective_bandwidth() > 0 ? c.node.pcie_h2d.effective_bandwidth() : 1.0;
  if (c.node.loopback) {
    // p virtual ranks working in step on one GPU: each has 1/p of its compute and PCIe link, and
    // its all-to-all bytes are read and written in HBM together with the other ranks' (p x 2 x).
    const double p = c.ranks_per_device();
    flops /= p;
    pcie /= p;
    a2a = gpu.hbm_bandwidth * gpu.hbm_efficiency / (2.0 * p);
  }
  const Throughputs w = hardware_throughputs(flops, a2a > 0 ? a2a : 1.0, pcie, req.model.element_bytes());
  StrategyModelParams p;
  p.tokens_per_chunk = std::max<std::int64_t>(1, tokens / n);
  p.model_dim = req.model.d_model;
  p.hidden_dim = req.model.d_ffn;
  p.w_comp = w.w_comp;
  p.w_comm = w.w_comm;
  p.w_mem = w.w_mem;
  const auto& f = c.node.interference.factors;
  p.factors.sigma_comp_with_comm = f[1][0];
  p.factors.mu_comm_with_comp = f[0][1];
  p.factors.sigma_all = f[1][3];
  p.factors.mu_all = f[0][3];
  p.factors.eta_all = f[2][3];
  return p;
}

// The largest estimated footprint among `runs`, times the simulations that run at once, within
// the request's memory limit (InputError otherwise, naming `what`).
void check_plan_memory(const PlanRequest& req, const ClusterSpec& cluster, const std::vector<RunSpec>& runs,
                       const std::string& what) {
  Footprint largest;
  for (const RunSpec& run : runs) {
    const Footprint f = estimate_footprint(derive_layer_dims(req.model, cluster, run), run, build_options_for(cluster, run));
    if (f.total_bytes() > largest.total_bytes()) largest = f;
  }
  const auto concurrent = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(std::max(req.jobs, 1)), runs.size()));
  check_memory_limit(largest, concurrent, req.memory_limit_bytes, what);
}

ReuseStrategy to_reuse(MemoryStrategy s) { return static_cast<ReuseStrategy>(static_cast<int>(s)); }

}  // namespace

std::string_view to_string(PlanMethod m) {
  switch (m) {
    case PlanMethod::kSimulate:
      return "simulate";
    case PlanMethod::kPipeMoE:
      return "pipemoe";
    case PlanMethod::kOnline:
      return "mpipemoe-online";
    case PlanMethod::kMpmoeModel:
      return "mpmoe-model";
  }
  return "?";
}

std::optional<PlanMethod> parse_plan_method(std::string_view s) {
  for (PlanMethod m : {PlanMethod::kSimulate, PlanMethod::kPipeMoE, PlanMethod::kOnline,
                       PlanMethod::kMpmoeModel}) {
    if (s == to_string(m)) return m;
  }
  return std::nullopt;
}

std::vector<std::string> plan_method_names() {
  return {"simulate", "pipemoe", "mpipemoe-online", "mpmoe-model", "all"};
}

void resolve_plan_request(PlanRequest& req) {
  if (req.tokens.empty()) throw InputError("plan: give at least one token count (--tokens)");
  for (std::int64_t t : req.tokens) {
    if (t < 1) throw InputError("plan: token counts must be positive, got " + std::to_string(t));
  }
  // Activation checkpointing replaces the MPipeMoE strategies (derive_layer_dims refuses both).
  if (req.strategies.empty())
    req.strategies = req.run.checkpoint == ActivationCheckpointing::kNone ? kAllStrategies
                                                                          : std::vector<MemoryStrategy>{MemoryStrategy::kNone};
  if (req.run.tp_size > 1) {
    // The PipeMoE and MPipeMoE cost models (pipemoe_model.h, strategy_model.h) time one expert-
    // parallel all-to-all channel and the whole experts on every rank: they have no term for the
    // tensor-parallel all-reduces and all-gathers or the sliced experts, so their pick would be a
    // guess about another layout.
    std::string analytical;
    for (PlanMethod m : req.methods) {
      if (m == PlanMethod::kPipeMoE || m == PlanMethod::kMpmoeModel)
        analytical += (analytical.empty() ? "" : " and ") + std::string(to_string(m));
    }
    if (!analytical.empty())
      throw InputError("--tp " + std::to_string(req.run.tp_size) + ": the method(s) " + analytical +
                       " describe expert parallelism only (one all-to-all channel, whole experts on every rank); "
                       "the methods that take --tp are simulate and mpipemoe-online, which simulate the layout");
  }
  if (std::find(req.methods.begin(), req.methods.end(), PlanMethod::kSimulate) == req.methods.end()) {
    req.methods.insert(req.methods.begin(), PlanMethod::kSimulate);  // the others are judged by it
  }
  if (req.chunk_counts.empty()) {
    // Every degree 1..16 that the smallest capacity C of the token counts allows (a chunk needs a
    // slot per expert). n need not divide C: the chunks then differ by one slot and do all the
    // work (sim/build/layer_dims.h).
    std::int64_t smallest = std::numeric_limits<std::int64_t>::max();
    for (std::int64_t t : req.tokens)
      smallest = std::min(smallest,
                          checked_dims(req.model, req.cluster, with_config(req.run, t, 1, MemoryStrategy::kNone)).capacity);
    for (int n = 1; n <= std::min<std::int64_t>(kDefaultMaxChunks, smallest); ++n) req.chunk_counts.push_back(n);
  }
  std::sort(req.chunk_counts.begin(), req.chunk_counts.end());
  req.chunk_counts.erase(std::unique(req.chunk_counts.begin(), req.chunk_counts.end()), req.chunk_counts.end());
  for (int n : req.chunk_counts) {
    if (n < 1) throw InputError("plan: pipeline degrees n must be >= 1, got " + std::to_string(n));
  }
  std::vector<RunSpec> runs;
  for (std::int64_t t : req.tokens) {
    runs.push_back(with_config(req.run, t, 1, MemoryStrategy::kNone));
    for (int n : req.chunk_counts) {
      for (MemoryStrategy s : req.strategies) runs.push_back(with_config(req.run, t, n, s));
    }
  }
  for (const RunSpec& run : runs) checked_dims(req.model, req.cluster, run);
  check_plan_memory(req, req.cluster, runs, "the plan");
}

PlanRow evaluate_configuration(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run,
                               RoutingStats* routing) {
  const SimulationResult r = simulate_step(model, cluster, run);
  if (routing != nullptr) *routing = r.routing;
  PlanRow row;
  row.num_chunks = run.num_chunks;
  row.strategy = run.strategy;
  row.step_ns = r.metrics.step_ns;
  row.forward_ns = r.metrics.forward_ns;
  row.backward_ns = r.metrics.backward_ns;
  const RankMemory* peak = peak_memory_rank(r.memory);
  row.peak_bytes = peak != nullptr ? peak->peak_device_bytes : 0;
  row.model_peak_bytes = device_peak_bytes(cluster, model_memory(r.graph, r.memory, model.num_layers, run.num_moe_layers));
  row.capacity_bytes = cluster.node.gpu.hbm_capacity_bytes;
  row.fits = row.model_peak_bytes <= row.capacity_bytes;
  return row;
}

int rank_rows(std::vector<PlanRow>& rows, PlanObjective objective) {
  const auto score = [objective](const PlanRow& r) {
    switch (objective) {
      case PlanObjective::kTime:
      case PlanObjective::kForward:
        return std::make_tuple(static_cast<double>(objective_time(r, objective)), static_cast<double>(r.model_peak_bytes));
      case PlanObjective::kMemory:
        return std::make_tuple(static_cast<double>(r.model_peak_bytes), static_cast<double>(r.step_ns));
      case PlanObjective::kBalanced:
        break;
    }
    return std::make_tuple(static_cast<double>(r.step_ns) * static_cast<double>(r.model_peak_bytes),
                           static_cast<double>(r.step_ns));
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const PlanRow& a, const PlanRow& b) {
    if (a.fits != b.fits) return a.fits;
    const auto sa = score(a), sb = score(b);
    if (sa != sb) return sa < sb;
    return std::tie(a.num_chunks, a.strategy) < std::tie(b.num_chunks, b.strategy);
  });
  return !rows.empty() && rows.front().fits ? 0 : -1;
}

namespace {

// The report's description of the request: what is planned, on what, under which options.
PlanReport report_header(const PlanRequest& req, const std::string& tool_version) {
  PlanReport report;
  report.tool_version = tool_version;
  report.model = req.model.name;
  report.cluster = req.cluster.name;
  if (req.cluster.node.gpu.calibration) report.calibration = req.cluster.node.gpu.calibration->file;
  report.num_gpus = req.cluster.num_gpus();
  const LayerDims layout =
      checked_dims(req.model, req.cluster, with_config(req.run, req.tokens.front(), 1, MemoryStrategy::kNone));
  report.layout = layout.layout();
  report.drop_duplicate_tokens = layout.drop_duplicate_tokens;
  report.grad_sync = req.run.grad_sync;
  report.zero_stage = req.run.zero_stage;
  report.checkpoint = req.run.checkpoint;
  report.order = std::string(to_string(req.run.order));
  report.network = std::string(to_string(resolve_network_model(req.cluster, req.run.network)));
  report.routing = req.run.routing.to_string();
  report.num_moe_layers = req.run.num_moe_layers;
  report.objective = req.objective;
  report.chunk_counts = req.chunk_counts;
  report.strategies = req.strategies;
  return report;
}

// The request's token counts in first-seen order, without repeats: one table each.
std::vector<std::int64_t> distinct_tokens(const std::vector<std::int64_t>& tokens) {
  std::vector<std::int64_t> distinct;
  for (std::int64_t t : tokens) {
    if (std::find(distinct.begin(), distinct.end(), t) == distinct.end()) distinct.push_back(t);
  }
  return distinct;
}

// Every configuration the tables show (baseline first), simulated in parallel up front.
void evaluate_grid(const PlanRequest& req, const std::vector<std::int64_t>& distinct, EvaluationCache& cache) {
  std::vector<Key> keys;
  for (std::int64_t t : distinct) {
    keys.push_back({t, 1, MemoryStrategy::kNone});
    for (int n : req.chunk_counts) {
      for (MemoryStrategy s : req.strategies) keys.push_back({t, n, s});
    }
  }
  cache.evaluate_all(keys);
}

// The exhaustive table of one token count, ranked, with the simulator's own pick.
PlanTable simulate_table(const PlanRequest& req, const PlanReport& report, std::int64_t t, EvaluationCache& cache) {
  PlanTable table;
  table.tokens = t;
  // The tp ranks of a tensor-parallel group share their tokens (sim/build/layer_dims.h).
  table.global_tokens = static_cast<std::int64_t>(report.num_gpus / report.layout.tp) * t;
  table.baseline = cache.get({t, 1, MemoryStrategy::kNone});
  add_relative(table.baseline, table.baseline);
  for (int n : req.chunk_counts) {
    for (MemoryStrategy s : req.strategies) {
      PlanRow row = cache.get({t, n, s});
      add_relative(row, table.baseline);
      table.rows.push_back(row);
    }
  }
  table.best = rank_rows(table.rows, req.objective);
  if (table.best >= 0) {
    MethodPick p = make_pick("simulate", table, table.rows[static_cast<std::size_t>(table.best)], req.objective);
    p.detail = "exhaustive over " + std::to_string(table.rows.size()) + " configurations, objective " +
               std::string(to_string(req.objective));
    table.picks.push_back(p);
  } else {
    MethodPick none;
    none.method = "simulate";
    none.detail = "no configuration fits";
    table.picks.push_back(none);
  }
  return table;
}

std::string pipemoe_constants(const PipeMoeSetup& setup) {
  return "a_a " + fmt(setup.params.a2a_alpha_s * 1e6, "%.3f") + " us, b_a " +
         fmt(setup.params.a2a_beta_s_per_byte * 1e12, "%.4f") + " ps/B, a_e " +
         fmt(setup.params.expert_alpha_s * 1e6, "%.3f") + " us, b_e " +
         fmt(setup.params.expert_beta_s_per_unit * 1e15, "%.4f") + " fs/FLOP (" + setup.source + ")";
}

MethodPick pipemoe_method_pick(const PlanRequest& req, const PlanTable& table, const PipeMoeSetup& setup,
                               const DegreePick& dp) {
  // The model has no memory strategy: its pick is plain pipelining when `none` is in the set.
  const MemoryStrategy s =
      std::find(req.strategies.begin(), req.strategies.end(), MemoryStrategy::kNone) != req.strategies.end()
          ? MemoryStrategy::kNone
          : req.strategies.front();
  MethodPick p = make_pick("pipemoe", table, *find_row(table, dp.degree, s), req.objective);
  p.detail = "model T(" + std::to_string(dp.degree) + ") = " + fmt(dp.time_s * 1e3, "%.3f") + " ms, regime " +
             std::string(regime_name(dp.regime)) + ", r* = " + fmt(t3_unconstrained_minimiser(setup.params), "%.2f") +
             "; " + pipemoe_constants(setup);
  return p;
}

// The strategy the Eq. 7-10 cost model prefers at the pipemoe model's degree, fitting rows first.
MethodPick mpmoe_model_pick(const PlanRequest& req, const PlanTable& table, int degree) {
  const StrategyCosts costs = strategy_costs(strategy_params(req, table.tokens, degree));
  const PlanRow* chosen = nullptr;
  bool chosen_fits = false;
  for (MemoryStrategy s : req.strategies) {
    const PlanRow* row = find_row(table, degree, s);
    const bool better = chosen == nullptr || (row->fits && !chosen_fits) ||
                        (row->fits == chosen_fits && costs.total(to_reuse(s)) < costs.total(to_reuse(chosen->strategy)));
    if (better) {
      chosen = row;
      chosen_fits = row->fits;
    }
  }
  MethodPick p = make_pick("mpmoe-model", table, *chosen, req.objective);
  p.detail = "Eq. 7-10 cost per chunk";
  for (MemoryStrategy s : req.strategies) {
    p.detail += " " + std::string(to_string(s)) + " " + fmt(costs.total(to_reuse(s)) * 1e6, "%.1f") + " us";
  }
  p.detail += "; n from the pipemoe model";
  return p;
}

// The analytic models' picks: pipemoe's degree, and mpmoe-model's strategy at that degree.
void add_model_picks(const PlanRequest& req, bool want_pipemoe, bool want_mpmoe, PlanReport& report) {
  for (PlanTable& table : report.tables) {
    const PipeMoeSetup setup = pipemoe_setup(req.model, req.cluster, with_config(req.run, table.tokens, 1, MemoryStrategy::kNone));
    const DegreePick dp = pipemoe_pick(setup.params, req.chunk_counts);
    if (want_pipemoe) table.picks.push_back(pipemoe_method_pick(req, table, setup, dp));
    if (want_mpmoe) table.picks.push_back(mpmoe_model_pick(req, table, dp.degree));
  }
}

// The search walks 1-based positions in the sorted candidate set (its "n" indexes it), so it
// steps from one allowed degree to the next, e.g. 1, 2, 4, 8, 16 by default, and its
// monotonicity invariant carries over to the degrees themselves.
int degree_at(const PlanRequest& req, int position) {
  return req.chunk_counts[static_cast<std::size_t>(position - 1)];
}

// Replays the online search over the request's token sequence into report.online.
void replay_online_search(const PlanRequest& req, std::size_t num_distinct, EvaluationCache& cache,
                          OnlineGranularitySearch& search, OnlineReplay& replay) {
  replay.sequence = req.tokens;
  const int num_s = static_cast<int>(req.strategies.size());
  const auto strategy = [&](int s) { return req.strategies[static_cast<std::size_t>(s)]; };
  for (std::int64_t t : req.tokens) {
    search.choose_pair(
        t,
        [&](int n, int s) {
          const PlanRow& row = cache.get({t, degree_at(req, n), strategy(s)});
          return static_cast<double>(objective_time(row, req.objective));
        },
        num_s);
    search.check_invariants();
  }
  for (const GranularityTrial& g : search.trials()) {
    replay.trials.push_back({g.tokens, degree_at(req, g.n), strategy(g.strategy), static_cast<TimeNs>(g.time)});
  }
  replay.cache_hits = search.cache_hits();
  replay.range_hits = search.range_hits();
  replay.exhaustive_trials =
      static_cast<std::int64_t>(num_distinct) * static_cast<std::int64_t>(req.chunk_counts.size()) * num_s;
  for (const TokenRange& r : search.ranges()) {
    replay.ranges.push_back({r.lo, r.hi, degree_at(req, r.choice.n), strategy(r.choice.strategy)});
  }
}

void add_online_picks(const PlanRequest& req, std::size_t num_distinct, EvaluationCache& cache, PlanReport& report) {
  const std::vector<int>& degrees = req.chunk_counts;
  OnlineGranularitySearch search(1, static_cast<int>(degrees.size()));
  replay_online_search(req, num_distinct, cache, search, report.online);
  report.has_online = true;
  for (PlanTable& table : report.tables) {
    const GranularityChoice c = search.cache().at(table.tokens);
    const MemoryStrategy s = req.strategies[static_cast<std::size_t>(c.strategy)];
    PlanRow row = cache.get({table.tokens, degree_at(req, c.n), s});
    MethodPick p = make_pick("mpipemoe-online", table, row, req.objective);
    std::int64_t spent = 0;
    for (const OnlineTrialRecord& tr : report.online.trials) spent += tr.tokens == table.tokens ? 1 : 0;
    p.detail = std::to_string(spent) + " trial(s) at this token count; n searched over the " +
               std::to_string(degrees.size()) + " degree(s) in [" + std::to_string(degrees.front()) + ", " +
               std::to_string(degrees.back()) + "]";
    table.picks.push_back(p);
  }
}

}  // namespace

PlanReport plan(const PlanRequest& req, const std::string& tool_version) {
  PlanReport report = report_header(req, tool_version);
  const auto wants = [&](PlanMethod m) {
    return std::find(req.methods.begin(), req.methods.end(), m) != req.methods.end();
  };
  const std::vector<std::int64_t> distinct = distinct_tokens(req.tokens);
  EvaluationCache cache(req);
  evaluate_grid(req, distinct, cache);
  for (std::int64_t t : distinct) report.tables.push_back(simulate_table(req, report, t, cache));
  if (wants(PlanMethod::kPipeMoE) || wants(PlanMethod::kMpmoeModel)) {
    add_model_picks(req, wants(PlanMethod::kPipeMoE), wants(PlanMethod::kMpmoeModel), report);
  }
  if (wants(PlanMethod::kOnline)) add_online_picks(req, distinct.size(), cache, report);
  return report;
}

FitReport fit_cluster(const PlanRequest& req, int max_nodes, TimeNs max_step_ns) {
  if (max_nodes < 1) throw InputError("--max-nodes must be at least 1, got " + std::to_string(max_nodes));
  if (max_step_ns < 0) throw InputError("--max-step-ms must not be negative");
  if (req.run.ep_size != 0) {
    throw InputError("--fit grows the cluster with the expert-parallel group spanning every GPU; "
                     "do not give --ep with --fit");
  }
  FitReport fit;
  fit.max_nodes = max_nodes;
  fit.max_step_ns = max_step_ns;
  const std::int64_t tokens = req.tokens.front();
  for (int k = 1; k <= max_nodes; ++k) {
    FitStep step;
    step.num_nodes = k;
    ClusterSpec cluster = req.cluster;
    cluster.num_nodes = k;
    step.num_gpus = cluster.num_gpus();
    step.tp_size = req.run.tp_size;
    if (k > 1 && cluster.node.loopback) {
      step.reason = "a loopback node is one GPU shared by virtual ranks; it does not grow by nodes";
      fit.steps.push_back(step);
      break;
    }
    if (k > 1 && !(cluster.inter_node.effective_bandwidth() > 0)) {
      step.reason = "the preset has no inter_node link to join nodes";
      fit.steps.push_back(step);
      break;  // no larger size can work either
    }
    std::vector<RunSpec> runs;
    for (int n : req.chunk_counts) {
      for (MemoryStrategy s : req.strategies) {
        const RunSpec run = with_config(req.run, tokens, n, s);
        try {
          derive_layer_dims(req.model, cluster, run);
          runs.push_back(run);
        } catch (const InputError& e) {
          if (step.reason.empty()) step.reason = e.rule();
        }
      }
    }
    step.valid = !runs.empty();
    if (step.valid) {
      check_plan_memory(req, cluster, runs, "--fit at " + std::to_string(k) + " node(s)");
      step.ep_size = step.num_gpus / step.tp_size;  // ep_size 0: the GPUs of one tensor index
      std::vector<PlanRow> rows = simulate_rows(
          req, runs.size(), [&](std::size_t i) { return evaluate_configuration(req.model, cluster, runs[i]); });
      const int best = rank_rows(rows, PlanObjective::kTime);
      if (best < 0) {
        step.reason = "nothing fits: smallest whole-model peak " +
                      format_gib(std::min_element(rows.begin(), rows.end(), [](const PlanRow& a, const PlanRow& b) {
                                   return a.model_peak_bytes < b.model_peak_bytes;
                                 })->model_peak_bytes) +
                      " GiB of " + format_gib(rows.front().capacity_bytes) + " GiB";
      } else {
        step.best = rows[static_cast<std::size_t>(best)];
        step.found = max_step_ns == 0 || step.best.step_ns <= max_step_ns;
        step.reason = step.found ? "" : "fits, but the fastest step is " + format_ms(step.best.step_ns) + " ms";
      }
    }
    fit.steps.push_back(step);
    if (step.found) {
      fit.answer = static_cast<int>(fit.steps.size()) - 1;
      break;
    }
  }
  return fit;
}

}  // namespace moesim::search
