// `moesim run`'s report: a measured run (runtime/exec/measure.h) next to the simulator's
// prediction for the same graph on the same hardware. The runtime measures and links no engine,
// cost model or report; this module, which links both, builds the graphs it runs the way the
// simulator builds them (SimulatorRunGraphs) and puts the two side by side (report_measured_run).
#pragma once

#include <string>

#include "runtime/exec/measure.h"

namespace moesim::validate {

// The simulator's graphs and configuration view for the runtime: every rank's tasks, with the
// build options the simulation of the hardware uses (a pure alpha-beta node has one
// communication stream per rank), so that the measured graph is the one the prediction prices.
class SimulatorRunGraphs final : public runtime::RunGraphSource {
 public:
  // The whole-model memory of the report needs the model to have the layers the run simulates.
  void check_reportable(const ModelSpec& model, const RunSpec& run) const override;
  TaskGraph graph(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run) const override;
  // The report's `config` section without the files the specs came from: the same content under
  // another path is the same configuration.
  std::string configuration(const ModelSpec& model, const ClusterSpec& cluster, const RunSpec& run,
                            const LayerDims& dims) const override;
};

struct MeasuredReport {
  std::string summary;  // the human-readable report
  std::string json;     // the simulator's --json schema with the measured trace, plus "measured"
  std::string trace;    // Chrome / Perfetto trace of the median step
};

// The report of a run that `reports` (rank 0 of a process group, or the only process): the
// configuration and device, the --check verdict, the measured step times (min, median, max) and
// memory next to the simulation of the run's graph on the run's hardware.
MeasuredReport report_measured_run(const runtime::MeasureRequest& request, const runtime::MeasuredRun& run);

}  // namespace moesim::validate
