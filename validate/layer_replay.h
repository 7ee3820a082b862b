// Replaying published per-layer times (a step dataset's layer_times CSV, validate/step_data.h):
// `moesim validate layers`. Each row states a whole-step configuration (the step table's columns)
// and the measured forward_ms and backward_ms of one transformer layer for one microbatch.
//
// What is measured in the simulation: the whole step of the row is simulated
// (simulate_training_step), and in its trace the tasks of the middle layer (num_layers / 2) of
// microbatch 0 are taken: its forward is the span from the start of the first to the end of the
// last of that layer's forward tasks (kernels and tensor-parallel collectives); its backward the
// same over its backward tasks and the recomputation that runs before them (full: the layer's
// forward again; selective: the attention core). Each pass's time is also split by kind, the sum
// of the durations of its tasks (as they ran, with any interference): GEMMs of the linear layers,
// the attention core (the score and context GEMMs, softmax, attention dropout), the other
// memory-bound kernels (norms, activation, dropout + residual) and the tensor-parallel
// collectives; overlap is that sum less the span (work beside the chain: the weight gradients and,
// with sequence parallelism, the all-gather beside the input gradient).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "sim/core/units.h"
#include "sim/spec/types.h"
#include "validate/step_data.h"

namespace moesim::validate {

// One pass of one layer: span and the busy time per kind, in ns.
struct LayerPassTimes {
  TimeNs span = 0;
  TimeNs gemm = 0, core = 0, memory = 0, comm = 0;
  TimeNs busy() const { return gemm + core + memory + comm; }
};

struct LayerComparison {
  StepRow row;                   // measured: forward ms
  double measured_backward = 0;  // ms
  std::string not_simulated;     // why not; "" = simulated
  int layer = 0, layers = 0;     // the layer measured, of the model's
  LayerPassTimes forward, backward;
};

struct LayerDatasetReport {
  StepDataset dataset;
  std::vector<LayerComparison> rows;
  NetworkModel network = NetworkModel::kAlphaBeta;
};

// Reads the dataset's layer_times CSV (columns of the step table, forward_ms and backward_ms) and
// simulates each row. InputError for bad data, before anything is simulated.
LayerDatasetReport replay_layer_times(const StepDataset& dataset, NetworkModel network);

void print_layer_report(const LayerDatasetReport& report, std::ostream& out);

}  // namespace moesim::validate
