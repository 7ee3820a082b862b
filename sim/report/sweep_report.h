// Outputs of `moesim sweep`: CSV (one row per configuration, grid order), JSON (the same plus the
// derived views) and a self-contained HTML report (sim/report/sweep_html.cc): inline CSS and SVG,
// every sweep group drawn, and a small inline script that only filters what is already drawn.
// The derived views, computed here from the records alone so that every output gives one answer:
//   1. per group -- one (model, hardware, GPUs, tokens, tp, routing): one layout of the GPUs at one
//      token count -- its fastest fitting configuration and its (n = 1, none) baseline;
//   2. per workload -- one (model, hardware, value of the token axis, routing) -- the time/memory
//      Pareto front: the configurations no other one of the workload beats in both step time and
//      whole-model peak memory (and the front of the whole sweep);
//   3. the capacity curve: per model, hardware, token value and GPU count, the fastest fitting
//      configuration of any layout, with its throughput (global tokens per second) and memory
//      headroom (GPU memory minus the whole model's peak); and the capacity answer: the smallest
//      GPU count whose fastest fitting configuration meets the step-time target (any fitting one
//      when there is no target);
//   4. with several tensor-parallel degrees, the layouts of one global batch: per (model, hardware,
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
  NetworkModel network = NetworkModel::kAuto;  // as requested (auto resolves per hardware)
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

// The record indices of each group, in grid order, the groups in best_per_group's order.
std::vector<std::vector<int>> group_members(const SweepTable& table);

// The value of the token axis as the sweep gave it (tokens per GPU or global tokens per step).
std::int64_t axis_tokens(const SweepTable& table, const SweepRecord& r);

// The layouts of one batch: the groups of a (model, hardware, GPUs, global tokens, routing).
struct LayoutChoice {
  std::string model, hardware, routing;
  int gpus = 0;
  std::int64_t global_tokens = 0;
  std::vector<int> groups;  // indices into best_per_group, one per tensor-parallel degree
  int best = -1;            // record index of the fastest fitting configuration of any layout; -1 none
};
std::vector<LayoutChoice> best_layout_per_batch(const SweepTable& table);

// What a configuration delivers: the cluster's tokens per second (global tokens per step over the
// step time), and the GPU memory the whole model leaves free on its fullest GPU (negative where it
// does not fit).
double tokens_per_second(const SweepRecord& r);
std::int64_t memory_headroom_bytes(const SweepRecord& r);

// One point of the capacity curve.
struct CapacityPoint {
  std::string model;
  std::string hardware;
  std::int64_t tokens = 0;     // in the table's token unit
  int gpus = 0;
  int record = -1;             // the fastest fitting configuration of any layout; -1 none fits
  bool meets_target = false;   // it fits and meets the step-time target (or there is none)
};
// Points by model, hardware and token value (first appearance), then by increasing GPU count; the
// routings of a sweep are not told apart here (the fastest over them), as in capacity_view.
std::vector<CapacityPoint> capacity_curve(const SweepTable& table);

struct CapacityAnswer {
  std::string model;
  std::string hardware;
  std::int64_t tokens = 0;  // in the table's token unit
  int gpus = 0;       // smallest GPU count that fits (and meets the target); 0 none in the grid
  int record = -1;    // its fastest fitting configuration (of any layout)
};
std::vector<CapacityAnswer> capacity_view(const SweepTable& table);

// Record indices on the time/memory Pareto front of the whole sweep, by increasing step time.
std::vector<int> pareto_front(const SweepTable& table);

// A workload and its own Pareto front: what one can trade between step time and memory for one
// model, hardware, token value and routing (GPU count, layout, strategy and n free).
struct WorkloadFront {
  std::string model, hardware, routing;
  std::int64_t tokens = 0;   // in the table's token unit
  std::vector<int> records;  // grid order
  std::vector<int> front;    // by increasing step time
};
std::vector<WorkloadFront> pareto_per_workload(const SweepTable& table);

std::string sweep_csv(const SweepTable& table);
std::string sweep_json(const SweepTable& table);
std::string sweep_html(const SweepTable& table);

}  // namespace moesim
