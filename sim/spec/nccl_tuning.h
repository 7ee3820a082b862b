// NcclTuning: the constants of NCCL's own cost model (the `nccl:` section of a node file), which
// sim/net/nccl_model.h uses to run collectives as NCCL runs them.
//
// NCCL estimates each (algorithm, protocol) pair of a collective as
//   time = base latency + steps x per-hop latency + bytes / (bus bandwidth x protocol efficiency)
// and runs the fastest. The defaults below are NCCL 2.19's figures for NVLink-connected Ampere and
// Hopper GPUs, from src/graph/tuning.cc of NVIDIA/nccl (commit b6475625fbca):
// https://github.com/NVIDIA/nccl/blob/b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2/src/graph/tuning.cc
//   baseLat (us):  tree {LL 6.8, LL128 14.0, Simple 0}, ring {LL 6.6, LL128 14.0, Simple 8.4}
//   hwLat (us), per hop:  NVLink  tree {0.6, 1.25, 28},  ring {0.6, 1.9, 3.4}
//                         PCI     tree {1.0, 1.9, 28},   ring {1.0, 2.5, 5.7}
//                         NET     tree {5.0, 8.5, 28},   ring {2.7, 4.0, 14.0}
//   bandwidth: ring LL x 1/4 (8 data bytes travel with 8 flag bytes, and its loads are narrower),
//     ring LL128 x 0.92 (120 of 128 bytes are data), Simple x 1; tree x 0.92, and tree LL
//     x 0.92 / 3.8, tree LL128 x 0.92 x 120/128 (the multi-node figure; one node: 7/9).
// The network's own latency (the hardware file's inter_node.latency) is added to every NET hop, and
// once more for Simple (NCCL's graph latencyInter and its flush), as NCCL does.
#pragma once

#include <array>
#include <optional>

#include "sim/core/units.h"

namespace moesim {

enum class NcclAlgorithm { kRing = 0, kTree = 1 };
enum class NcclProtocol { kLL = 0, kLL128 = 1, kSimple = 2 };
// The kind of hop a step crosses, as NCCL's hwLat rows: within a node over NVLink or PCIe, or
// between nodes over the network.
enum class NcclHop { kNvlink = 0, kPcie = 1, kNet = 2 };
inline constexpr int kNumNcclAlgorithms = 2;
inline constexpr int kNumNcclProtocols = 3;
inline constexpr int kNumNcclHops = 3;

template <typename T>
using PerNcclProtocol = std::array<T, kNumNcclProtocols>;
template <typename T>
using PerNcclAlgorithm = std::array<PerNcclProtocol<T>, kNumNcclAlgorithms>;

struct NcclTuning {
  // [algorithm][protocol] (ring, tree; LL, LL128, Simple), ns.
  PerNcclAlgorithm<TimeNs> base_latency{{{6600, 14000, 8400}, {6800, 14000, 0}}};
  // [hop][algorithm][protocol], ns.
  std::array<PerNcclAlgorithm<TimeNs>, kNumNcclHops> hop_latency{{
      {{{600, 1900, 3400}, {600, 1250, 28000}}},     // NVLink
      {{{1000, 2500, 5700}, {1000, 1900, 28000}}},   // PCIe
      {{{2700, 4000, 14000}, {5000, 8500, 28000}}},  // network
  }};
  // [algorithm][protocol]: fraction of the links' bandwidth a protocol reaches, in (0, 1].
  PerNcclAlgorithm<double> efficiency{{{0.25, 0.92, 1.0}, {0.92 / 3.8, 0.92 * 120.0 / 128.0, 0.92}}};
  // Which hwLat row the steps within a node use.
  NcclHop intra_hop = NcclHop::kNvlink;
  // Protocols and algorithms NCCL may choose from (NCCL_PROTO, NCCL_ALGO); at least one each.
  PerNcclProtocol<bool> protocols{true, true, true};
  std::array<bool, kNumNcclAlgorithms> algorithms{true, true};
  // Channels: NCCL runs a collective as this many rings (or trees) side by side. Across nodes each
  // one leaves a node through a different GPU's NIC, so a group of m GPUs per node uses
  // min(channels, m) NICs per node. Default 32: NCCL's MAXCHANNELS (src/include/device.h).
  int channels = 32;

  TimeNs base(NcclAlgorithm a, NcclProtocol p) const {
    return base_latency[static_cast<std::size_t>(a)][static_cast<std::size_t>(p)];
  }
  TimeNs hop(NcclHop h, NcclAlgorithm a, NcclProtocol p) const {
    return hop_latency[static_cast<std::size_t>(h)][static_cast<std::size_t>(a)][static_cast<std::size_t>(p)];
  }
  double efficiency_of(NcclAlgorithm a, NcclProtocol p) const {
    return efficiency[static_cast<std::size_t>(a)][static_cast<std::size_t>(p)];
  }
  bool enabled(NcclAlgorithm a, NcclProtocol p) const {
    return algorithms[static_cast<std::size_t>(a)] && protocols[static_cast<std::size_t>(p)];
  }
};

// NCCL constants fitted to a measurement (a calibration file's `nccl:` section, written by
// `moesim calibrate --allreduce-log`, sim/driver/all_reduce_calibration.h): whole hop-latency rows
// and a whole efficiency table, each replacing the node's.
struct NcclFittedTerms {
  std::array<std::optional<PerNcclAlgorithm<TimeNs>>, kNumNcclHops> hop_latency;
  std::optional<PerNcclAlgorithm<double>> efficiency;

  void apply_to(NcclTuning& t) const {
    for (std::size_t h = 0; h < hop_latency.size(); ++h)
      if (hop_latency[h]) t.hop_latency[h] = *hop_latency[h];
    if (efficiency) t.efficiency = *efficiency;
  }
};

const char* to_string(NcclAlgorithm a);
const char* to_string(NcclHop h);
const char* to_string(NcclProtocol p);

}  // namespace moesim
