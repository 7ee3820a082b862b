// The validator: two step reports in the schema of `moesim simulate --json` side by side, per
// step, per stage and per task. The first is the reference (normally `moesim run --json`, the
// measured step), the second the prediction (`moesim simulate --all-ranks --json` of the same
// configuration); two simulations compare the same way (e.g. network models against each other).
//
// The reports must describe the same layer: model shape, run (tokens, chunks, strategy, order,
// slots, ranks, routing) and derived sizes are compared key by key, and the first difference is
// an InputError naming both files, the key and both values. Hardware may differ (a prediction for
// another cluster is a legitimate question); the difference is listed as a note. Tasks are matched
// by (id, rank); a prediction that simulated one representative rank is compared on that rank.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace moesim::validate {

struct TimePair {
  double reference_us = 0;
  double predicted_us = 0;
  // (predicted - reference) / reference; 0 when both are 0, +inf when only the reference is 0.
  double relative_error() const;
};

struct StageRow {
  std::string stage;  // "fwd.fc1", ...
  TimePair busy;      // summed task time
  TimePair exposed;   // time on the critical rank not hidden behind other streams
};

struct TaskRow {
  std::string id;
  int rank = 0;
  std::string stage;
  TimePair duration;  // end - start
  TimePair start;     // from the step's origin
};

struct Comparison {
  std::string reference_name, predicted_name;    // file names as given
  std::string reference_kind, predicted_kind;    // "measured (...)" or the network model line
  TimePair step, forward, backward;
  std::vector<StageRow> stages;                  // in the reference's order
  std::vector<TaskRow> tasks;                    // in the reference's order
  std::vector<std::string> notes;                // differences that are allowed
  // Mean of |relative error| of the stages' busy time over stages the reference spends time in.
  double stage_mean_abs_error() const;
  // Median of |relative error| of the tasks' durations over tasks with a reference duration > 0.
  double task_median_abs_error() const;
};

// Throws InputError (naming the file and key) when either is not a moesim step report or when
// they describe different layers.
Comparison compare_reports(const nlohmann::json& reference, const std::string& reference_name,
                           const nlohmann::json& predicted, const std::string& predicted_name);

// A summary: step, forward, backward, every stage, and the `worst_tasks` tasks with the largest
// absolute duration error.
std::string comparison_text(const Comparison& c, int worst_tasks = 10);
// One row per task: id, rank, stage, reference and predicted start and duration, error.
std::string comparison_csv(const Comparison& c);
// The whole comparison as JSON (schema_version 1).
std::string comparison_json(const Comparison& c);

}  // namespace moesim::validate
