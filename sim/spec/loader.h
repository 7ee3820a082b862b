// Loading and validating the YAML presets (models/, hardware/).
//
// Every error is an InputError naming file:line:col and the rule: unknown keys (with the allowed
// keys and a "did you mean"), duplicate keys, wrong scalar types, .nan/.inf, missing or unsupported
// schema_version, quantities without a unit or with an unknown unit, zero or negative sizes, and
// nesting deeper than the schema needs.
//
// Each load_* reading a path has a parse_* twin over text already read (from a pipe, a test, the
// fuzz harness of tests/fuzz): `file` names the text in errors, and the paths the text refers to
// (a node's gpu:, a run's model:) are resolved relative to the folder `file` would be in.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/spec/file_kind.h"
#include "sim/spec/hardware_spec.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/run_spec.h"

namespace moesim {

ModelSpec load_model_spec(const std::string& path);
ModelSpec parse_model_spec(const std::string& text, const std::string& file);

// Loads a cluster, node or GPU file (its `kind` key says which). A node is a one-node cluster; a
// GPU alone is a one-GPU node without interconnect. References to other files (a node's `gpu:`, a
// cluster's `node:`) are resolved relative to the referencing file.
ClusterSpec load_hardware_spec(const std::string& path);
ClusterSpec parse_hardware_spec(const std::string& text, const std::string& file);

// A calibration file (kind: calibration), measured by `moesim calibrate` on one GPU of a real node:
// kernel launch gap, streaming HBM bandwidth, pinned PCIe bandwidth and latency per direction, and
// tables of GEMM times per math dtype. It reaches the simulator only through apply_calibration
// (a node file's `calibration:` key, or --calibration on the command line).
struct CalibrationSpec {
  std::string file;
  SourceLocation origin;
  std::string gpu;          // the GPU preset's name (GpuSpec::name) it was measured for
  SourceLocation gpu_where;
  std::string device;       // the device as the runtime named it
  std::optional<TimeNs> kernel_launch_ns;
  std::optional<double> hbm_bandwidth;  // bytes/s, a device-to-device copy's read + write
  std::optional<LinkSpec> pcie_h2d;
  std::optional<LinkSpec> pcie_d2h;
  std::vector<InterferenceCell> interference;  // measured cells; the node keeps its other factors
  std::map<DType, GemmTimeTable> gemm;
  // Since schema_version 2: batched GEMM tables per layout and math dtype and memory-bound kernel
  // figures per storage dtype (GpuCalibration).
  BatchedGemmTables batched_gemm;
  std::map<DType, KernelFigures> kernels;
  DeviceCopyFigures device_copies;  // the single-GPU and loopback collectives (schema_version 2)
  // The node's intra-node network, fitted to a measured all-to-all (`moesim calibrate
  // --alltoall-log`, sim/driver/network_calibration.h): the alpha-beta model's intra_node link and
  // the flow model's topology link types. `all_to_all` keeps what they were fitted to.
  std::optional<LinkSpec> intra_node;
  std::map<std::string, LinkSpec> link_types;
  SourceLocation link_types_where;
  struct AllToAllRecord {
    int ranks = 0;
    int nodes = 1;
    std::string source;
    std::vector<std::int64_t> bytes_per_peer;
    std::vector<double> time_ns;
  };
  std::optional<AllToAllRecord> all_to_all;
  // The inter-node network, fitted to an all-to-all across nodes: the alpha-beta model's per-GPU
  // inter_node link (a cluster of these nodes uses it instead of its own) and the flow model's NIC
  // ports. `inter_node_all_to_all` keeps what they were fitted to.
  std::optional<LinkSpec> inter_node;
  SourceLocation inter_node_where;
  std::optional<LinkSpec> nic_port;
  SourceLocation nic_port_where;
  std::optional<AllToAllRecord> inter_node_all_to_all;

  // NCCL's ring and tree terms fitted to a measured all-reduce (`moesim calibrate
  // --allreduce-log`, sim/driver/all_reduce_calibration.h): hop latencies of the hop the log
  // crossed and the efficiencies, over the node's `nccl:` section; `all_reduce` keeps what they
  // were fitted to (size: nccl-tests' per-rank buffer).
  std::optional<NcclFittedTerms> nccl;
  SourceLocation nccl_where;
  struct AllReduceRecord {
    int ranks = 0;
    int nodes = 1;
    std::string source;
    std::vector<std::int64_t> bytes;
    std::vector<double> time_ns;
  };
  std::optional<AllReduceRecord> all_reduce;

  bool calibrates_all_reduce() const { return nccl || all_reduce; }
  bool calibrates_intra_node() const { return intra_node || !link_types.empty() || all_to_all; }
  bool calibrates_inter_node() const { return inter_node || nic_port || inter_node_all_to_all; }
};
// `taker` names what the file was given as, for the message when it is another kind of file.
CalibrationSpec load_calibration(const std::string& path, const std::string& taker = "--calibration");
CalibrationSpec parse_calibration(const std::string& text, const std::string& file,
                                  const std::string& taker = "--calibration");

// Replaces the node's launch overhead, HBM and PCIe values, the measured interference factors, its
// intra-node link, the calibrated topology link types and NIC ports with the calibration's, keeps
// its inter-node link for the cluster (NodeSpec::calibrated_inter_node), and attaches the GEMM
// tables. Throws InputError when the calibration names another GPU (an A100 file on a V100), has a
// table for a dtype the GPU has no peak for, calibrates a link the node does not have (intra-node
// on one GPU, any network on a loopback node, NIC ports without a topology that has NICs) or a
// link type its topology does not name, or the node is already calibrated.
void apply_calibration(NodeSpec& node, const CalibrationSpec& calibration);
// The same on a cluster, whose inter_node link then is the calibration's where it has one.
void apply_calibration(ClusterSpec& cluster, const CalibrationSpec& calibration);

// load_hardware_spec with a calibration file applied (none when calibration_path is empty): the
// command line's --calibration.
ClusterSpec load_hardware_spec(const std::string& path, const std::string& calibration_path);

// A run file (kind: run): the run options, and optionally the model and hardware files to use
// (paths relative to the run file). Keys: tokens_per_gpu (required), ep_size, num_chunks, order,
// num_moe_layers, seed, model, hardware; defaults as in RunSpec.
struct RunFile {
  RunSpec run;
  std::optional<std::string> model_path;
  std::optional<std::string> hardware_path;
};
RunFile load_run_spec(const std::string& path);
RunFile parse_run_spec(const std::string& text, const std::string& file);

}  // namespace moesim
