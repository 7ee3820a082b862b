// GEMMs measured beside a communication kernel (`moesim_sm_share_probe --shapes`, `--waves` or
// `--batched` on a GPU: each GEMM's speed beside a kernel holding some SMs, over its speed alone)
// replayed on a node's interference model (sim/engine/interference.h): the node's GEMM-size table
// (interference.gemm_with_communication) at each shape's output elements per SM, and the single
// computation.with_communication cell, next to the measurement. It says, without a GPU, how well
// the table and the cell describe shapes the table was or was not built from. `moesim validate
// interference` prints it (docs/validation.md).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "sim/spec/hardware_spec.h"

namespace moesim::validate {

// One line of a probe's output: a GEMM shape (a batched launch of `batch` GEMMs) and its speed
// beside holds of each CTA count of the file's header, over its speed alone.
struct ProbeShape {
  std::string file;
  int line = 0;
  std::string name;  // as the probe printed it: "4096x2048x2048", "8 x 2048x768x2048"
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  std::vector<int> ctas;        // the header's hold columns
  std::vector<double> factors;  // one per column
};

// Reads a probe output file (a regular file of at most 4 MiB): `#` lines (one names the hold
// columns: `hold1 hold8 hold32`), data lines `<shape> <gemms> <us> <TFLOP/s> <factor>...` (a
// factor may end in `*`: that hold ended first; it is kept), `rc=0` lines. Throws InputError naming
// the file, line and rule for a file that cannot be read, a data line before the header, a
// malformed shape or number, a factor outside (0, 2], a count of factors other than the header's,
// a hold column outside 1 to 1024 CTAs, or an `rc=N` other than 0 (the probe failed).
std::vector<ProbeShape> read_probe_shapes(const std::string& path);

struct InterferencePoint {
  ProbeShape shape;
  double outputs_per_sm = 0;  // batch x m x n / the node's SMs
  double measured = 0;        // median of the shape's factors at 8 to 32 held CTAs
  double measured_min = 0, measured_max = 0;
  double table = 0;  // the node's GEMM-size table at outputs_per_sm
  double cell = 0;   // the node's computation.with_communication
};

struct InterferenceReplay {
  std::string node;
  int sm_count = 0;
  std::vector<InterferencePoint> points;
};

// Every shape of `shapes` on `node`'s interference model. Throws InputError when the node has no
// GEMM-size table or a shape has no factor at 8 to 32 held CTAs (the range the table stands for).
InterferenceReplay replay_interference(const std::vector<ProbeShape>& shapes, const ClusterSpec& node);

// One row per point, then the median and worst |table - measured| and |cell - measured|.
void print_interference_replay(const InterferenceReplay& replay, std::ostream& out);
void write_interference_replay_csv(const InterferenceReplay& replay, std::ostream& out);

}  // namespace moesim::validate
