#include "sim/cli/sweep_command.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sim/cli/layout_flags.h"
#include "sim/cli/list_args.h"
#include "sim/cli/memory_limit_flag.h"
#include "sim/cli/mpi_world.h"
#include "sim/cli/output_file.h"
#include "sim/cli/progress.h"
#include "sim/core/error.h"
#include "sim/report/plan_report.h"
#include "sim/report/sweep_report.h"
#include "sim/search/sweep.h"
#include "sim/search/thread_pool.h"
#include "sim/spec/loader.h"
#include "sim/spec/presets.h"
#include "sim/spec/sweep_spec.h"
#include "sim/spec/yaml_reader.h"


namespace moesim::cli {
namespace {

using Clock = std::chrono::steady_clock;

// A sweep outcome as the integers that travel between MPI ranks (the doubles as their bit patterns).
constexpr std::size_t kOutcomeFields = 8;

void outcome_to_fields(const search::SweepOutcome& o, std::int64_t* f) {
  const std::int64_t v[kOutcomeFields] = {o.step_ns, o.forward_ns, o.backward_ns, o.peak_bytes, o.model_peak_bytes,
                                          std::bit_cast<std::int64_t>(o.expert_imbalance),
                                          std::bit_cast<std::int64_t>(o.rank_imbalance),
                                          std::bit_cast<std::int64_t>(o.dropped_fraction)};
  std::copy(v, v + kOutcomeFields, f);
}

search::SweepOutcome outcome_from_fields(const std::int64_t* v) {
  return {v[0], v[1], v[2], v[3], v[4], std::bit_cast<double>(v[5]), std::bit_cast<double>(v[6]),
          std::bit_cast<double>(v[7])};
}

// A flag replaces the grid file's axis; errors about it then carry no file position.
template <typename T>
void override_axis(SweepAxis<T>& axis, std::vector<T> values) {
  axis.values = std::move(values);
  axis.where = SourceLocation{};
}

// The CSV, JSON and HTML outputs; the CSV goes to stdout when none is named.
std::vector<Output> outputs_of(const SweepArgs& a) {
  const bool any = !a.csv_path.empty() || !a.json_path.empty() || !a.html_path.empty();
  return {{"--csv", any ? a.csv_path : "-"}, {"--json", a.json_path}, {"--html", a.html_path}};
}

// What each output holds.
std::string output_text(const std::string& flag, const SweepTable& table) {
  if (flag == "--csv") return sweep_csv(table);
  return flag == "--json" ? sweep_json(table) : sweep_html(table);
}

SweepSpec spec_from(const SweepArgs& a) {
  SweepSpec spec;
  if (!a.grid_path.empty()) spec = load_sweep_spec(a.grid_path);
  if (!a.models.empty()) {
    std::vector<std::string> models = split_list("--model", a.models);
    for (std::string& m : models) m = resolve_model_arg(m, "--model");
    override_axis(spec.models, std::move(models));
  }
  if (!a.hardware.empty()) {
    std::vector<std::string> hardware = split_list("--hardware", a.hardware);
    for (std::string& h : hardware) h = resolve_hardware_arg(h, "--hardware");
    override_axis(spec.hardware, std::move(hardware));
  }
  if (!a.gpus.empty()) {
    std::vector<int> g;
    for (std::int64_t v : parse_int_list("--gpus", a.gpus, 1, kMaxGroupSize)) g.push_back(static_cast<int>(v));
    override_axis(spec.gpus, g);
  }
  if (!a.tokens.empty() && !a.global_tokens.empty())
    throw InputError("give either --tokens (per GPU) or --global-tokens (per step of the whole cluster), not both");
  // Either flag replaces the file's token axis, whichever unit the file used.
  if (!a.tokens.empty()) {
    override_axis(spec.tokens, run_option_list("tokens_per_gpu", "--tokens", a.tokens));
    spec.token_unit = TokenUnit::kPerGpu;
  }
  if (!a.global_tokens.empty()) {
    override_axis(spec.tokens, parse_int_list("--global-tokens", a.global_tokens, 1, kMaxTokensPerGpu));
    spec.token_unit = TokenUnit::kGlobal;
  }
  if (!a.tp.empty()) {
    std::vector<int> tp;
    for (std::int64_t v : run_option_list("tp_size", "--tp", a.tp)) tp.push_back(static_cast<int>(v));
    override_axis(spec.tp, tp);
  }
  if (!a.chunks.empty()) override_axis(spec.chunks, parse_chunk_list("--chunks", a.chunks));
  if (!a.strategies.empty()) override_axis(spec.strategies, parse_strategy_list("--strategies", a.strategies));
  if (!a.routing.empty()) override_axis(spec.routing, split_list("--routing", a.routing));
  if (a.grid_path.empty()) {
    // Without a grid file the flags are the grid: axes a user rarely varies get defaults.
    if (spec.chunks.values.empty() && a.chunks.empty()) spec.chunks.values = {1, 2, 4, 8};
    if (spec.strategies.values.empty() && a.strategies.empty()) spec.strategies.values = {MemoryStrategy::kNone};
    if (spec.routing.values.empty() && a.routing.empty()) spec.routing.values = {"uniform"};
    if (a.models.empty()) throw InputError("sweep: give a grid file (--grid) or --model");
    if (a.hardware.empty()) throw InputError("sweep: give a grid file (--grid) or --hardware");
    if (a.tokens.empty() && a.global_tokens.empty())
      throw InputError("sweep: give a grid file (--grid) or --tokens (or --global-tokens)");
  }
  a.fixed.apply(spec.fixed);
  const auto max_tp = std::max_element(spec.tp.values.begin(), spec.tp.values.end());
  if (max_tp != spec.tp.values.end())
    check_no_dtd_flag(a.fixed.switched_on("drop_duplicate_tokens"), *max_tp);
  if (a.step_target_ms >= 0) spec.step_target_ns = static_cast<TimeNs>(std::llround(a.step_target_ms * 1e6));
  return spec;
}

}  // namespace

int run_sweep_command(const SweepArgs& a, const std::string& version) {
  World world;
  // Every rank validates the same grid, so a bad grid fails everywhere before any work.
  std::optional<search::SweepPlan> plan;
  int jobs = 1;
  std::string error;
  try {
    jobs = a.jobs == 0 ? search::default_jobs() : a.jobs;
    // Only rank 0 writes the files, so only its paths must be writable; a bad one fails every rank
    // before the sweep runs.
    if (world.rank() == 0) check_outputs(outputs_of(a));
    plan = search::prepare_sweep(spec_from(a));
    search::check_sweep_memory(*plan, jobs, memory_limit_from_flag(a.memory_limit));
  } catch (const InputError& e) {
    error = e.what();
  }
  // The same grid fails the same way on every rank: rank 0 reports it, the others stay quiet.
  if (!world.agree(error)) return 0;

  const std::size_t total = plan->configs.size();
  const std::vector<std::size_t> mine = world.my_share(total);
  if (world.rank() == 0 && world.size() > 1) {
    std::fprintf(stderr, "sweep: %zu configurations on %d MPI ranks x %d threads\n", total, world.size(), jobs);
  }
  const auto start = Clock::now();
  std::vector<search::SweepOutcome> outcomes;
  try {
    Progress progress(mine.size(), "sweep", "configurations");
    const bool show = world.rank() == 0;
    outcomes = search::run_sweep(*plan, mine, jobs, [&](std::size_t done) {
      if (show) progress.update(done);
    });
  } catch (const InputError& e) {
    error = e.what();
  }
  if (!world.agree(error)) return 0;
  std::vector<std::int64_t> fields(outcomes.size() * kOutcomeFields);
  for (std::size_t k = 0; k < outcomes.size(); ++k) outcome_to_fields(outcomes[k], &fields[k * kOutcomeFields]);
  fields = world.join(fields, total, kOutcomeFields, false);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (world.rank() != 0) return 0;

  std::vector<search::SweepOutcome> all;
  for (std::size_t i = 0; i < total; ++i) all.push_back(outcome_from_fields(&fields[i * kOutcomeFields]));
  const SweepTable table = search::sweep_table(*plan, all, version);
  for (const Output& o : outputs_of(a)) {
    if (!o.path.empty()) write_output(o.flag, o.path, output_text(o.flag, table));
  }
  if (a.timing) {
    std::fprintf(stderr, "timing: %zu configurations in %.3f s (%.3f ms each) with %d rank(s) x %d job(s)\n", total,
                 seconds, total == 0 ? 0.0 : seconds * 1e3 / static_cast<double>(total), world.size(), jobs);
  }
  return 0;
}

}  // namespace moesim::cli
