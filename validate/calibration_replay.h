// The GEMM times a calibration file holds (`moesim calibrate` on a real GPU: single GEMMs per
// math dtype, strided-batched GEMMs per operand layout and math dtype) replayed on the datasheet
// shape model of a node with the same GPU (sim/cost/compute_cost.h: tiles in waves over the SMs,
// memory bound, launch gap). It says how far the uncalibrated simulator is from that GPU over the
// whole measured grid, table by table, by size and point by point: where the datasheet model
// needs a calibration, and what a shape-model change gains, without a GPU. `moesim validate
// calibration` prints it (docs/validation.md).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "sim/spec/hardware_spec.h"
#include "sim/spec/loader.h"

namespace moesim::validate {

struct CalibrationGemmPoint {
  std::string table;  // the calibration file's section: gemm, batched_gemm, batched_gemm_nt, ...
  DType dtype = DType::kFp32;
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  double measured_us = 0;
  double model_us = 0;
  // (model - measured) / measured: negative where the datasheet model is faster than the GPU.
  double error() const { return (model_us - measured_us) / measured_us; }
};

struct CalibrationReplay {
  std::string file;    // the calibration file
  std::string device;  // the device it was measured on, as the runtime named it
  std::string node;    // the datasheet node's name
  std::vector<CalibrationGemmPoint> points;  // tables in file order, then grid order
};

// Every GEMM time of `calibration` next to `datasheet`'s shape model (operands of 2 bytes for
// bf16 and fp16 math, else 4, as `moesim calibrate` stores them). Throws InputError where the
// calibration could not be applied to the node (another GPU, a dtype without a peak, a node
// already calibrated: apply_calibration's rules) or holds no GEMM table.
CalibrationReplay replay_calibration_gemms(const CalibrationSpec& calibration, const ClusterSpec& datasheet);

// Per table and dtype: points, median |error|, median error (the bias), the worst point, and the
// median |error| of the points measured under 20 us, from 20 to 200 us and from 200 us.
void print_calibration_replay(const CalibrationReplay& replay, std::ostream& out);
// One row per point.
void write_calibration_replay_csv(const CalibrationReplay& replay, std::ostream& out);

}  // namespace moesim::validate
