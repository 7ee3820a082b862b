// Choosing the pipeline degree n and the memory-reuse strategy for a model on a cluster
// (`moesim plan`), by four methods reported side by side:
//   simulate         exhaustive: every (n, strategy) is simulated; the objective picks among them.
//   pipemoe          PipeMoE (INFOCOM'23): the exact integer minimiser of the linear model
//                    T(r) = max(2*a_r + r*e_r, 2*r*a_r) (pipemoe_model.h) over the n set, with the
//                    constants of the hardware file's alpha_beta section, or fitted by least squares
//                    to the simulator's own cost models (per-chunk all-to-all and FC1+FC2 times at
//                    r = 1..16). The model has no memory strategy: it picks `none`.
//   mpipemoe-online  MPipeMoE (IPDPS'23 Alg. 1, MPMoE's pair extension): the online range search
//                    replayed over the token sequence, each trial one simulated step; n is searched
//                    over [min, max] of the n set.
//   mpmoe-model      MPipeMoE Eq. 7-10 (strategy_model.h) for the strategy, at the pipemoe
//                    method's n: the cheapest strategy whose configuration fits in memory (the
//                    memory verdict is the simulator's accounting, which has no timing in it).
// Each pick is then looked up in the exhaustive table: its simulated step and its loss against the
// exhaustive best. fit_cluster() answers `plan --fit`: the smallest node count of a preset family
// on which some configuration fits (and meets a step-time target).
//
// With a DeepSpeed-TED layout (run.tp_size > 1) only simulate and mpipemoe-online apply: they
// simulate the layout, while pipemoe and mpmoe-model model one expert-parallel all-to-all channel
// and whole experts, with no term for the tensor-parallel collectives; resolve_plan_request
// refuses them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/report/plan_report.h"
#include "sim/routing/routing.h"
#include "sim/search/pipemoe_model.h"
#include "sim/spec/hardware_spec.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/run_spec.h"

namespace moesim::search {

enum class PlanMethod { kSimulate, kPipeMoE, kOnline, kMpmoeModel };
std::string_view to_string(PlanMethod m);
std::optional<PlanMethod> parse_plan_method(std::string_view s);
std::vector<std::string> plan_method_names();

inline constexpr int kDefaultMaxChunks = 16;

struct PlanRequest {
  ModelSpec model;
  ClusterSpec cluster;
  RunSpec run;                            // tokens_per_gpu, num_chunks and strategy are ignored
  std::vector<std::int64_t> tokens;       // one table per distinct value; the online replay uses
                                          // the sequence as given (repeats are cache hits)
  std::vector<int> chunk_counts;          // empty: the n in 1..16 dividing every capacity C
  std::vector<MemoryStrategy> strategies; // empty: none, s1..s4
  PlanObjective objective = PlanObjective::kTime;
  std::vector<PlanMethod> methods{PlanMethod::kSimulate};
  int jobs = 1;
  // The largest estimated memory of the simulations that run at once (sim/driver/footprint.h),
  // checked before any simulation (and before each node count of --fit); 0: no limit.
  std::int64_t memory_limit_bytes = 0;
  // Runs `count` independent simulations, simulate(i) for each i, and returns their rows in index
  // order. Empty: on `jobs` threads of this process; `moesim plan` under mpirun spreads them over
  // the ranks (sim/cli/mpi_world.h) and every rank gets every row, so all ranks walk the same plan.
  std::function<std::vector<PlanRow>(std::size_t count, const std::function<PlanRow(std::size_t)>& simulate)>
      simulate_rows;
};

// Fills the defaults and checks every configuration (derive_layer_dims) before any simulation, so a
// bad request fails at once with an InputError naming the configuration and the rule. The default
// n set is the degrees 1..16 whose n x share divides every capacity C (share: tp with duplicate
// token dropping, else 1), so that no chunk loses rows to rounding.
void resolve_plan_request(PlanRequest& request);

// Simulates one configuration; the routing's imbalance goes to *routing when given.
PlanRow evaluate_configuration(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run,
                               RoutingStats* routing = nullptr);

// Sorts rows by the objective (fitting rows first; ties -> smaller n, then strategy order) and
// returns the index of the objective's pick, or -1 when no row fits.
int rank_rows(std::vector<PlanRow>& rows, PlanObjective objective);

// The PipeMoE constants for a layer (n_d and n_e at r = 1).
struct PipeMoeSetup {
  PipeMoeParams params;
  std::string source;  // "alpha_beta section" or "fitted to the cost models (...)"
};
PipeMoeSetup pipemoe_setup(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run);

// The exact minimiser of T(r) over `degrees` (ties -> smaller r).
struct DegreePick {
  int degree = 1;
  double time_s = 0;
  PipeMoeRegime regime = PipeMoeRegime::kT1NoPipeline;
};
DegreePick pipemoe_pick(const PipeMoeParams& params, const std::vector<int>& degrees);

// Runs every requested method. `request` must be resolved.
PlanReport plan(const PlanRequest& request, const std::string& tool_version);

// plan --fit: node counts 1..max_nodes of the request's cluster (its node and inter-node link; the
// expert-parallel group spans every GPU / run.tp_size, and a count whose GPUs tp_size does not
// divide is skipped with the reason), the first token count. max_step_ns = 0: no time target.
FitReport fit_cluster(const PlanRequest& request, int max_nodes, TimeNs max_step_ns);

}  // namespace moesim::search
