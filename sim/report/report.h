// Outputs of a simulated step: the summary table a user reads, the JSON report (everything,
// machine-readable) and the Chrome/Perfetto trace (one track per rank and stream).
//
// Reports describe themselves (design.md lesson 8): the text starts with a `#` preamble naming the
// configuration, columns are fixed-width with units, and the JSON carries the resolved config.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "sim/graph/trace.h"
#include "sim/build/layer_dims.h"
#include "sim/graph/task_graph.h"
#include "sim/memory/memory_tracker.h"
#include "sim/memory/model_memory.h"
#include "sim/report/metrics.h"
#include "sim/spec/hardware_spec.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/run_spec.h"

namespace moesim {

struct ReportInputs {
  const ModelSpec& model;
  const ClusterSpec& cluster;
  const RunSpec& run;
  const LayerDims& dims;
  const TaskGraph& graph;
  const Trace& trace;
  const StepMetrics& metrics;
  const std::vector<RankMemory>& memory;  // per simulated rank
  std::string tool_version;
  // The collective model that ran, as the driver resolved it (e.g. "flow, pairwise all-to-all");
  // empty when the caller does not say.
  std::string network = {};
  // The routing's imbalance (SimulationResult::routing); null when the caller does not say.
  const RoutingStats* routing = nullptr;
};

// The rank with the highest device peak (the one that decides whether the step fits).
const RankMemory* peak_memory_rank(const std::vector<RankMemory>& memory);

// What the fullest physical GPU must hold: the highest rank peak, or on a loopback node the sum of
// its virtual ranks' peaks (each rank's buffers are planned on their own, as the runtime gives each
// virtual rank its own arena). This is what is compared with the GPU's capacity.
std::int64_t device_peak_bytes(const ClusterSpec& cluster, const std::vector<RankMemory>& memory);

// The same for the whole model (sim/memory/model_memory.h): what decides whether the model fits.
std::int64_t device_peak_bytes(const ClusterSpec& cluster, const std::vector<ModelMemory>& memory);

// The rank whose whole-model peak is the highest; null for an empty list.
const ModelMemory* peak_model_memory_rank(const std::vector<ModelMemory>& memory);

// The whole model's memory for a report: model_memory() over the report's graph, with the model's
// num_layers and the run's simulated layers.
std::vector<ModelMemory> model_memory_of(const ReportInputs& in);

// The human-readable summary (stdout of `moesim simulate`).
void write_summary(std::ostream& out, const ReportInputs& in);

// The JSON report with at least step_time_us, forward_us, backward_us, stages{busy_us, exposed_us},
// config and tasks[{id, rank, stream, start_us, end_us}]. Deterministic: same inputs, same bytes.
std::string report_json(const ReportInputs& in);

// Chrome trace event format (loads in Perfetto and chrome://tracing): process per rank, thread per
// stream class, complete events with ts/dur in microseconds.
// Memory appears as counter tracks ("device memory", "host pinned memory", MiB) per rank.
std::string perfetto_trace_json(const TaskGraph& graph, const Trace& trace,
                                const std::vector<RankMemory>& memory = {});

}  // namespace moesim
