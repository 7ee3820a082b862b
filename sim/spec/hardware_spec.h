// HardwareSpec: GPU, node and cluster (hardware/{gpus,nodes,clusters}/*.yaml).
//
// The alpha-beta description here (one bandwidth and latency per link class: intra-node, inter-node,
// PCIe) feeds the alpha-beta collective model and the copy-cost model. Bandwidths are effective
// per-GPU, per-direction values: line rate x efficiency. Interference factors are MPipeMoE (IPDPS'23)
// Fig. 3: the speed of an op while another stream class runs, as a fraction of its isolated speed.
//
// An optional `alpha_beta` section (AlphaBetaCosts) holds the linear constants of the PipeMoE
// (INFOCOM'23) model: an all-to-all of x bytes costs a_a + b_a*x, a GEMM of w FLOP a_g + b_g*w.
// The planner's `pipemoe` method reads them; with `simulate: true` the simulator itself costs every
// task with them and runs dispatch and combine on one communication channel, as that model assumes.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/spec/memory_kernel.h"
#include "sim/spec/nccl_tuning.h"
#include "sim/spec/types.h"

namespace moesim {

// GEMM kernel shape (sim/cost/compute_cost.h): the output is cut into CTA tiles of m x n
// elements, each computed by one SM over the whole K. cuBLAS and CUTLASS tensor-core kernels use
// 128 x 128 (and 128 x 256) tiles on Volta to Hopper, hence the default.
struct GemmTile {
  std::int64_t m = 128;
  std::int64_t n = 128;
};

// Measured GEMM times of one math dtype, from a calibration file (`moesim calibrate`): time_ns at
// index(i, j, l) is one m[i] x n[j] x k[l] GEMM (batch 1) issued back to back on one stream, so it
// includes the gap between kernels. Axes are strictly increasing and non-empty; every point is
// positive. sim/cost/gemm_calibration.h interpolates it.
struct GemmTimeTable {
  std::vector<std::int64_t> m, n, k;
  std::vector<double> time_ns;

  std::size_t index(std::size_t i, std::size_t j, std::size_t l) const { return (i * n.size() + j) * k.size() + l; }
};

// Measured times of strided-batched GEMMs (the expert GEMMs: one per local expert, back to back
// in one launch), as GemmTimeTable with a batch axis in front: time_ns at index(b, i, j, l) is one
// launch of batch[b] GEMMs of m[i] x n[j] x k[l]. Same rules: strictly increasing, non-empty axes,
// every point positive.
struct BatchedGemmTable {
  std::vector<std::int64_t> batch, m, n, k;
  std::vector<double> time_ns;

  std::size_t index(std::size_t b, std::size_t i, std::size_t j, std::size_t l) const {
    return ((b * m.size() + i) * n.size() + j) * k.size() + l;
  }
};

// Batched tables per operand layout (nn for the forward, nt for data and tn for weight gradients),
// then per math dtype. A calibration file holds the nn tables under `batched_gemm` and the others
// under batched_gemm_section(layout): files measured before layouts were hold nn alone.
using BatchedGemmTables = std::map<GemmLayout, std::map<DType, BatchedGemmTable>>;
inline std::string batched_gemm_section(GemmLayout layout) {
  return layout == GemmLayout::kNN ? "batched_gemm" : "batched_gemm_" + std::string(to_string(layout));
}

// The device-copy collectives as `moesim calibrate` measured them (calibration section
// device_copy_collectives): the runtime's loopback all-to-all of p virtual ranks on one GPU, per
// measured p, fitted to launch + bytes / bandwidth where bytes = 2 x the sum of every block (each
// block read and written once), as sim/net/alpha_beta.cc counts a device-copy collective's bytes.
// with_computation: one such all-to-all's speed while a GPU-filling GEMM runs on another stream,
// as a fraction of its speed alone; reported, not used in pricing (docs/calibration.md says why).
struct DeviceCopyFigures {
  std::map<int, KernelFigure> by_ranks;  // p -> {launch, bandwidth}
  struct Probe {
    double factor = 1.0;             // (0, 1]
    int ranks = 1;                   // p of the all-to-all measured beside the GEMM
    std::int64_t bytes_per_peer = 0;
  };
  std::optional<Probe> with_computation;
};

// What a calibration file applied to a GPU, kept for reports and range warnings. Its other
// measurements (launch overhead, HBM and PCIe bandwidths) replace the preset's values directly.
struct GpuCalibration {
  std::string file;    // the calibration file
  std::string device;  // the device it was measured on, as the runtime named it
  std::map<DType, GemmTimeTable> gemm;
  BatchedGemmTables batched_gemm;  // per layout and math dtype, for GEMMs with batch > 1
  // The memory-bound kernels' figures per storage dtype (fp32, bf16, fp16: the element type of
  // the tensors they move), sim/cost/memory_kernels.h.
  std::map<DType, KernelFigures> kernels;
  DeviceCopyFigures device_copies{};  // by_ranks empty: device copies keep the HBM model
};

struct GpuSpec {
  std::string name;
  SourceLocation origin;
  std::map<DType, double> peak_flops;   // FLOP/s per math dtype; a missing dtype is unsupported
  double hbm_bandwidth = 0;             // bytes/s (datasheet)
  double hbm_efficiency = 0.85;         // achievable fraction for streaming kernels
  std::int64_t hbm_capacity_bytes = 0;
  TimeNs kernel_launch_ns = 0;
  int sm_count = 0;                          // streaming multiprocessors; GEMMs need it
  std::map<DType, GemmTile> gemm_tile;       // per math dtype; GemmTile{} where absent
  std::map<DType, double> gemm_efficiency;   // main-loop fraction of peak, per dtype, in (0, 1]
  TimeNs gemm_tile_overhead_ns = 0;          // per tile: pipeline fill and epilogue
  // Per math dtype: main-loop rate of a tile with one side halved, relative to gemm_tile's, in
  // (0, 1]; for a dtype given, the GEMM model may pick such tiles (sim/cost/compute_cost.h);
  // for the others, gemm_tile only.
  std::map<DType, double> gemm_half_tile_efficiency;

  static constexpr double kDefaultGemmEfficiency = 0.8;
  GemmTile gemm_tile_for(DType d) const {
    auto it = gemm_tile.find(d);
    return it == gemm_tile.end() ? GemmTile{} : it->second;
  }
  double gemm_efficiency_for(DType d) const {
    auto it = gemm_efficiency.find(d);
    return it == gemm_efficiency.end() ? kDefaultGemmEfficiency : it->second;
  }
  std::optional<GpuCalibration> calibration;
};

struct LinkSpec {
  double bandwidth = 0;     // bytes/s, line rate per GPU per direction
  double efficiency = 1.0;  // achieved fraction of the line rate
  TimeNs latency_ns = 0;    // per message

  double effective_bandwidth() const { return bandwidth * efficiency; }
};

// Interference classes: what a stream does, for the factor table.
enum class InterferenceClass { kCommunication = 0, kComputation = 1, kMemcpy = 2 };
inline constexpr int kNumInterferenceClasses = 3;

// One factor of the table: the speed of `op` while `column` runs (0..2: that class, 3: all others).
struct InterferenceCell {
  InterferenceClass op = InterferenceClass::kComputation;
  int column = 0;
  double factor = 1.0;
};

// One point of a node's GEMM-size table: a GEMM kernel writing `outputs_per_sm` output elements
// per SM (batch x m x n / sm_count) keeps `factor` of its speed beside communication.
struct GemmInterferencePoint {
  double outputs_per_sm = 0;
  double factor = 1.0;
};

// factors[op][col]: col 0..2 = concurrent with that class alone, col 3 = concurrent with all others.
// gemm_with_communication (optional, sorted by outputs_per_sm): the computation.with_communication
// cell of a GEMM by its size (sim/engine/interference.h); empty: every kernel takes the cell.
struct InterferenceTable {
  std::array<std::array<double, 4>, kNumInterferenceClasses> factors{{
      {1.0, 0.72, 0.78, 0.71},   // communication  (MPipeMoE Fig. 3, A100)
      {0.96, 1.0, 1.0, 0.94},    // computation
      {0.8, 0.98, 1.0, 0.71},    // memory copy (PCIe)
  }};

  std::vector<GemmInterferencePoint> gemm_with_communication;

  void set(const InterferenceCell& c) { factors[static_cast<std::size_t>(c.op)][static_cast<std::size_t>(c.column)] = c.factor; }
};

// Host memory of a node whose file gives none: two sockets of 8 channels DDR4-3200 (2 x 204.8
// GB/s, the DGX A100's AMD EPYC 7742 pair, AMD EPYC 7002 datasheet) at 0.75 of the peak, the share
// of the DDR peak that streaming DMA sustains (an assumption, as STREAM-like benchmarks reach).
inline constexpr int kDefaultCopyEngines = 1;
inline LinkSpec default_host_memory() { return LinkSpec{409.6e9, 0.75, 0}; }

// Node topology (optional `topology:` section of a node file): the devices of one node and the
// links between them, for the flow-level network model (sim/net/topology.h builds the graph).
// Devices are named by kind and index: gpu<i> (i < gpus_per_node), nvswitch<i>, pcie<i> (PCIe
// switches), cpu<i>, nic<i>. A link joins two devices with `count` parallel lanes of a named link
// type; each lane carries the type's bandwidth per direction.
enum class TopoDeviceKind { kGpu, kNvSwitch, kPcieSwitch, kCpu, kNic };
inline constexpr int kNumTopoDeviceKinds = 5;

struct TopoDevice {
  TopoDeviceKind kind = TopoDeviceKind::kGpu;
  int index = 0;
  friend bool operator==(const TopoDevice&, const TopoDevice&) = default;
};

struct TopoLink {
  TopoDevice a;
  TopoDevice b;
  std::string type;   // a key of NodeTopology::link_types
  int count = 1;      // parallel lanes (NVLinks), each with the type's bandwidth
  SourceLocation origin;
};

struct NodeTopology {
  bool present = false;
  SourceLocation origin;
  int num_nvswitches = 0;
  int num_pcie_switches = 0;
  int num_cpus = 0;
  int num_nics = 0;
  std::map<std::string, LinkSpec> link_types;  // per lane, per direction
  std::vector<TopoLink> links;
  std::vector<int> gpu_nic;  // the NIC each GPU sends and receives inter-node traffic through
  LinkSpec nic_port;         // each NIC's port to the fabric (line rate, efficiency, latency)

  int count(TopoDeviceKind kind, int gpus_per_node) const;
};

// Device names as the hardware files write them.
std::string topo_device_name(TopoDevice d);

struct NodeSpec {
  std::string name;
  SourceLocation origin;
  GpuSpec gpu;
  int gpus_per_node = 1;
  LinkSpec intra_node;      // NVLink / NVSwitch / PCIe peer-to-peer, per GPU
  LinkSpec pcie_h2d;        // host to device, per GPU: the rate one GPU's copies reach alone
  LinkSpec pcie_d2h;        // device to host, per GPU
  // Copy engines per direction (`pcie.copy_engines`): copies in one direction beyond this many
  // wait for an engine. 1 by default, CUDA's contract (a device of asyncEngineCount 2 overlaps one
  // copy each way with kernels; copies in one direction run one at a time).
  int copy_engines = kDefaultCopyEngines;
  // The node's DRAM bandwidth that every GPU's host copies share (`host_memory`); with a topology
  // each CPU holds an equal part of it (docs/concepts.md, "Host copies").
  LinkSpec host_memory = default_host_memory();
  InterferenceTable interference;
  NodeTopology topology;    // optional; the flow network model needs it
  NcclTuning nccl;          // NCCL's cost model constants (optional `nccl:` section; NCCL 2.19 defaults)
  // The node's gpus_per_node ranks are virtual ranks sharing ONE physical GPU, as `moesim run
  // --ranks N --loopback` runs them: their kernels share its compute, their PCIe copies its host
  // link, their all-to-alls are device-to-device copies through its memory, and its capacity holds
  // every rank's buffers (docs/concepts.md, "Loopback"). No intra_node link or topology.
  bool loopback = false;
  // The per-GPU inter-node link a calibration of this node measured (`moesim calibrate` on a log
  // across nodes): a cluster of these nodes uses it instead of its own inter_node.
  std::optional<LinkSpec> calibrated_inter_node;
};

// The fabric between nodes (optional `fabric:` section of a cluster file). Every node's NIC k has a
// port on a leaf switch: fat tree, the leaf of its node group (nodes_per_leaf nodes share a leaf);
// rail-optimised, the leaf of rail k for its node group (NIC k of every node is on rail k). Leaves
// reach each other through a non-blocking spine layer; each leaf's uplink capacity is its
// downlink capacity divided by the oversubscription ratio.
enum class FabricKind { kFatTree, kRailOptimized };

struct FabricSpec {
  bool present = false;
  SourceLocation origin;
  FabricKind kind = FabricKind::kFatTree;
  int nodes_per_leaf = 1;
  double oversubscription = 1.0;  // leaf downlink : uplink capacity, >= 1
};

// PipeMoE's linear costs. x for an all-to-all is the bytes one rank sends in it, its own share
// included (nccl-tests' "size": bytes_per_peer * group size); w for a GEMM is its FLOP (2*m*n*k per
// batch entry). With simulate = true: GEMMs cost a_g + b_g*w, every collective a_a + b_a*x,
// elementwise kernels and device copies nothing (the model has no term for them), PCIe copies keep
// the PCIe link's cost; no interference, and all collectives of a rank share one stream.
struct AlphaBetaCosts {
  SourceLocation origin;
  double a2a_alpha_s = 0;
  double a2a_beta_s_per_byte = 0;
  double gemm_alpha_s = 0;
  double gemm_beta_s_per_flop = 0;
  bool simulate = false;
};

struct ClusterSpec {
  std::string name;
  SourceLocation origin;
  NodeSpec node;
  int num_nodes = 1;
  LinkSpec inter_node;      // per GPU (a NIC shared by g GPUs gives each 1/g of it)
  FabricSpec fabric;        // optional; the flow network model needs it for num_nodes > 1
  std::optional<AlphaBetaCosts> alpha_beta;

  // True when the simulator must use the pure alpha-beta costs (alpha_beta.simulate).
  bool pure_alpha_beta() const { return alpha_beta && alpha_beta->simulate; }

  int num_gpus() const { return node.gpus_per_node * num_nodes; }
  int node_of(int rank) const { return rank / node.gpus_per_node; }
  // The physical GPU a rank runs on: its own, or its node's one GPU on a loopback node.
  int device_of(int rank) const { return node.loopback ? node_of(rank) : rank; }
  int ranks_per_device() const { return node.loopback ? node.gpus_per_node : 1; }
};

// Why `preset` cannot be grown or shrunk to `gpus` GPUs of whole nodes, or "" when it can: a count
// that is not a multiple of its GPUs per node, several loopback nodes, or several nodes without an
// inter-node link. The caller names where the count came from.
inline constexpr int kMaxClusterNodes = 1 << 20;
// A cluster's GPUs, bounded so that its topology and the simulator's per-GPU state stay a few
// hundred MB (the topology alone takes about 1.6 KB per GPU): larger than any built so far.
inline constexpr std::int64_t kMaxClusterGpus = std::int64_t{1} << 18;
std::string gpu_count_problem(const ClusterSpec& preset, std::int64_t gpus);
// `preset` with gpus / gpus_per_node nodes; InputError "<what> = <gpus> ..." when it cannot be.
ClusterSpec with_gpus(const ClusterSpec& preset, std::int64_t gpus, const SourceLocation& where, const std::string& what);

// `base`'s GPU (with its calibration), host link and interference as a loopback node of `ranks`
// virtual ranks, one node: what `moesim run --ranks N --loopback` runs on one GPU of `base`.
// Throws InputError for ranks outside [1, 1024] (a node file's gpus_per_node range) or a base
// with pure alpha-beta costs (they model no GPU). The base's PipeMoE constants are dropped: they
// describe its GPUs, not one GPU shared by the ranks.
inline constexpr int kMaxLoopbackRanks = 1024;
ClusterSpec loopback_cluster(const ClusterSpec& base, int ranks);

// The hardware `moesim run` puts `ranks` ranks on: with --loopback, loopback_cluster(file, ranks)
// (from the file's GPU even when the file is a loopback node: --ranks sets the count); without,
// the file itself, which must then not be a loopback node (InputError naming the file).
ClusterSpec run_hardware(const ClusterSpec& file, int ranks, bool loopback);

using HardwareSpec = ClusterSpec;

}  // namespace moesim
