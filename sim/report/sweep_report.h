// Outputs of `moesim sweep`: CSV (one row per configuration, grid order), JSON (the same plus the
// derived views) and a self-contained HTML report with inline SVG plots (no scripts, no network):
//   1. step time against n, one line per strategy, for each (model, hardware, GPUs, tokens, tp,
//      routing) group -- a group is one layout of the GPUs at one token count;
//   2. peak memory against step time for every configuration, the Pareto front (no other
//      configuration is both faster and smaller) drawn as a line;
//   3. the best n (fastest fitting configuration) against the token count;
//   4. the capacity view: per model and token count (in the sweep's token unit), the smallest GPU
//      count whose fastest fitting configuration meets the step-time target (any fitting one when
//      there is no target);
//   5. with several tensor-parallel degrees, the layouts of one global batch: per (model, hardware,
//      GPUs, global tokens, routing), each layout's fastest fitting configuration and the fastest
//      of them.
// The sweep-wide options (token unit, gradient all-reduces, ZeRO stage) are top-level JSON keys and
// the HTML preamble; the CSV, whose first line stays its header for existing readers, carries them
// as columns.
// The types are plain data filled by sim/search/sweep.h. Numbers are formatted with fixed
// decimals, so equal tables give byte-identical files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/units.h"
#include "sim/spec/parallel_layout.h"
#include "sim/spec/sweep_spec.h"
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
  std::int64_t peak_bytes = 0;        // the simulated layers' device peak on the fullest rank
  std::int64_t model_peak_bytes = 0;  // the whole model's on the fullest GPU (sim/memory/model_memory.h)
  std::int64_t capacity_bytes = 0;
  bool fits = false;                  // model_peak_bytes <= capacity_bytes
  double expert_imbalance = 1.0;  // the routing's max / mean tokens per expert (before capacity)
  double rank_imbalance = 1.0;    // max / mean rows a rank's experts compute
  double dropped_fraction = 0.0;
  // The layout (DeepSpeed-TED, sim/spec/parallel_layout.h): tp x ep x dp = gpus; a tensor-parallel
  // group's tp ranks hold the same `tokens`, so the cluster's batch is gpus / tp x tokens.
  ParallelLayout layout;
  std::int64_t global_tokens = 0;
  bool drop_duplicate_tokens = false;  // in effect: tp > 1 and not turned off
};

struct SweepTable {
  std::string name;
  std::string tool_version;
  TimeNs step_target_ns = 0;  // 0: none
  TokenUnit token_unit = TokenUnit::kPerGpu;  // what the grid's token axis counted
  bool grad_sync = false;
  int zero_stage = 0;
  ActivationCheckpointing checkpoint = ActivationCheckpointing::kNone;
  std::vector<SweepRecord> records;  // grid order
};

// Derived views, computed from the records alone (so every output shows the same answer).
struct BestChoice {
  std::string model, hardware, routing;
  int gpus = 0;
  int tp_size = 1;
  std::int64_t tokens = 0;         // per GPU
  std::int64_t global_tokens = 0;  // gpus / tp_size x tokens
  int best = -1;      // record index of the fastest fitting configuration; -1 none fits
  int baseline = -1;  // record index of (n = 1, none) in the group; -1 not in the grid
};
std::vector<BestChoice> best_per_group(const SweepTable& table);

// The layouts of one batch: the groups of a (model, hardware, GPUs, global tokens, routing).
struct LayoutChoice {
  std::string model, hardware, routing;
  int gpus = 0;
  std::int64_t global_tokens = 0;
  std::vector<int> groups;  // indices into best_per_group, one per tensor-parallel degree
  int best = -1;            // record index of the fastest fitting configuration of any layout; -1 none
};
std::vector<LayoutChoice> best_layout_per_batch(const SweepTable& table);

struct CapacityAnswer {
  std::string model;
  std::string hardware;
  std::int64_t tokens = 0;  // in the table's token unit
  int gpus = 0;       // smallest GPU count that fits (and meets the target); 0 none in the grid
  int record = -1;    // its fastest fitting configuration (of any layout)
};
std::vector<CapacityAnswer> capacity_view(const SweepTable& table);

// Record indices on the time/memory Pareto front, by increasing step time.
std::vector<int> pareto_front(const SweepTable& table);

std::string sweep_csv(const SweepTable& table);
std::string sweep_json(const SweepTable& table);
std::string sweep_html(const SweepTable& table);

}  // namespace moesim
