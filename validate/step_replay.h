// Replaying the published whole-step measurements (validate/step_data.h) with
// simulate_training_step and judging them against issue 23's goals, where steps.yaml states them:
// every row's |error| within row_error_pct, and the speed-up from full to selective recomputation
// within speedup_points of the measured one. Errors are relative to the measurement,
// (simulated - measured) / measured, of the dataset's measure (iteration time or TFLOP/s per GPU).
//
// Rows are prepared (presets loaded, the row checked against them, the StepSpec built) before any
// is simulated, so bad data is an InputError before minutes of simulation; a row whose layout the
// simulator refuses is kept, with its message, as not simulated.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "sim/spec/hardware_spec.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/step_spec.h"
#include "sim/spec/types.h"
#include "validate/step_data.h"

namespace moesim::validate {

struct StepComparison {
  StepRow row;
  std::string preset;         // as steps.yaml names the model's preset
  std::string not_simulated;  // why not; "" = simulated
  double simulated = 0;       // in the dataset's measure
  double simulated_step_s = 0;
  bool fits = true;  // the simulated peak memory fits the GPU (StepReport::fits)
  bool compared() const { return not_simulated.empty() && row.measured.has_value(); }
  double error() const { return (simulated - *row.measured) / *row.measured; }
};

// A row ready to simulate: what it is, the model, cluster and step, or why it cannot run.
struct PreparedStepRow {
  StepComparison comparison;
  ModelSpec model;
  ClusterSpec cluster;
  StepSpec spec;
};

// InputError (naming the CSV's file and line, or steps.yaml) for a row that contradicts its preset.
PreparedStepRow prepare_step_row(const StepDataset& dataset, const StepRow& row);

// Simulates a prepared row (nothing when it is not simulated). `network` chooses the collective model.
StepComparison simulate_step_row(const StepDataset& dataset, const PreparedStepRow& row, NetworkModel network);

// Full against selective recomputation of the same model, layout and batch.
struct SpeedupComparison {
  std::string model;
  int gpus = 0;
  int full_line = 0, selective_line = 0;
  double measured_pct = 0;
  bool measured_published = false;  // the CSV's throughput_increase_pct, else from the measured times
  double simulated_pct = 0;
  std::string not_evaluated;  // why not; "" = evaluated
  double points() const { return simulated_pct - measured_pct; }
};
// The pairs among `rows`: a row with full and one with selective recomputation that agree on the
// model, GPUs, layout, batch, micro-batch and sequence.
std::vector<SpeedupComparison> pair_speedups(const std::vector<StepComparison>& rows);

struct StepDatasetReport {
  StepDataset dataset;
  std::vector<StepComparison> rows;
  std::vector<SpeedupComparison> speedups;
  NetworkModel network = NetworkModel::kAlphaBeta;
};

// One goal's outcome over a dataset: rows (or pairs) judged, within the goal, not judged (no
// simulation or no measurement), and the worst with its sign.
struct GoalOutcome {
  std::size_t judged = 0, within = 0, not_judged = 0;
  double worst = 0;
  bool met() const { return judged > 0 && within == judged; }
};
std::optional<GoalOutcome> row_goal(const StepDatasetReport& report);
std::optional<GoalOutcome> speedup_goal(const StepDatasetReport& report);

// Per-row table, the speed-ups and the goals of one dataset.
void print_step_report(const StepDatasetReport& report, std::ostream& out);
// One line per dataset and goal, after all of them.
void print_step_summary(const std::vector<StepDatasetReport>& reports, std::ostream& out);
// One row per dataset row: dataset, line, model, layout, measure, measured, simulated, error, status.
void write_step_csv(const std::vector<StepDatasetReport>& reports, std::ostream& out);

}  // namespace moesim::validate
