// Replaying the published measurements (validate/published.h) on moesim's models and judging the
// result against the accuracy goals:
//   collectives (nccl-tests' busbw: sim/driver/nccl_tests_replay.h): for sizes >= 1 MiB the median
//     |busbw error| <= 10% and the worst <= 25%; below 1 MiB the median |time error| <= 25%;
//   GEMMs (TFLOP/s of ComputeCostModel::gemm_duration): the median |error| <= 10%.
// Errors are relative to the measurement: (simulated - measured) / measured.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "sim/spec/types.h"
#include "validate/published.h"

namespace moesim::validate {

inline constexpr std::int64_t kLargeMessageBytes = std::int64_t{1} << 20;

struct CollectiveComparison {
  CollectiveOp op = CollectiveOp::kAllReduce;
  int ranks = 0;
  int nodes = 1;
  std::int64_t size_bytes = 0;
  double measured_us = 0, simulated_us = 0;
  double measured_busbw = 0, simulated_busbw = 0;  // GB/s
  int line = 0;
  double time_error() const { return (simulated_us - measured_us) / measured_us; }
  double busbw_error() const { return (simulated_busbw - measured_busbw) / measured_busbw; }
};

struct GemmComparison {
  MeasuredGemm measured;
  double simulated_flop_per_s = 0;
  double error() const { return (simulated_flop_per_s - measured.flop_per_s) / measured.flop_per_s; }
};

// |error| over a set of points: how many, their median, and the largest (with its sign).
struct ErrorStats {
  std::size_t count = 0;
  double median_abs = 0;
  double worst = 0;
};
ErrorStats error_stats(const std::vector<double>& errors);

struct DatasetReport {
  DatasetSource source;
  std::string hardware_name;  // the preset's `name:`
  std::string model;          // the network model (collectives) or the compute model (GEMMs)
  std::vector<std::string> notes;
  std::vector<CollectiveComparison> collectives;
  std::vector<GemmComparison> gemms;
};

// Simulates every point of the dataset. `network` chooses the collective model (auto: flow where
// the hardware has a topology).
DatasetReport replay_dataset(const DatasetSource& source, NetworkModel network);

// Per-point table, summary and verdict of one dataset.
void print_dataset_report(const DatasetReport& report, std::ostream& out);
// One line per dataset and goal, after all of them.
void print_goal_summary(const std::vector<DatasetReport>& reports, std::ostream& out);
// One row per point: dataset, kind, what, size or shape, measured, simulated, error.
void write_csv(const std::vector<DatasetReport>& reports, std::ostream& out);

}  // namespace moesim::validate
