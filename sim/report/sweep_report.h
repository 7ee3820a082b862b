// Outputs of `moesim sweep`: CSV (one row per configuration, grid order), JSON (the same plus the
// derived views) and a self-contained HTML report with inline SVG plots (no scripts, no network):
//   1. step time against n, one line per strategy, for each (model, hardware, GPUs, tokens,
//      routing) group;
//   2. peak memory against step time for every configuration, the Pareto front (no other
//      configuration is both faster and smaller) drawn as a line;
//   3. the best n (fastest fitting configuration) against the token count;
//   4. the capacity view: per model and token count, the smallest GPU count whose fastest fitting
//      configuration meets the step-time target (any fitting one when there is no target).
// The types are plain data filled by sim/search/sweep.h. Numbers are formatted with fixed
// decimals, so equal tables give byte-identical files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/units.h"
#include "sim/spec/types.h"

namespace moesim {

struct SweepRecord {
  std::string model;
  std::string hardware;
  int gpus = 0;
  std::int64_t tokens = 0;
  std::string routing;
  MemoryStrategy strategy = MemoryStrategy::kNone;
  int num_chunks = 1;
  TimeNs step_ns = 0;
  TimeNs forward_ns = 0;
  TimeNs backward_ns = 0;
  std::int64_t peak_bytes = 0;
  std::int64_t capacity_bytes = 0;
  bool fits = false;
  double expert_imbalance = 1.0;  // the routing's max / mean tokens per expert (before capacity)
  double rank_imbalance = 1.0;    // max / mean rows a rank's experts compute
  double dropped_fraction = 0.0;
};

struct SweepTable {
  std::string name;
  std::string tool_version;
  TimeNs step_target_ns = 0;  // 0: none
  std::vector<SweepRecord> records;  // grid order
};

// Derived views, computed from the records alone (so every output shows the same answer).
struct BestChoice {
  std::string model, hardware, routing;
  int gpus = 0;
  std::int64_t tokens = 0;
  int best = -1;      // record index of the fastest fitting configuration; -1 none fits
  int baseline = -1;  // record index of (n = 1, none) in the group; -1 not in the grid
};
std::vector<BestChoice> best_per_group(const SweepTable& table);

struct CapacityAnswer {
  std::string model;
  std::string hardware;
  std::int64_t tokens = 0;
  int gpus = 0;       // smallest GPU count that fits (and meets the target); 0 none in the grid
  int record = -1;    // its fastest fitting configuration
};
std::vector<CapacityAnswer> capacity_view(const SweepTable& table);

// Record indices on the time/memory Pareto front, by increasing step time.
std::vector<int> pareto_front(const SweepTable& table);

std::string sweep_csv(const SweepTable& table);
std::string sweep_json(const SweepTable& table);
std::string sweep_html(const SweepTable& table);

}  // namespace moesim
