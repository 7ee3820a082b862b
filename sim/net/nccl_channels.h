// How many of its channels NCCL runs one collective on, and so what share of the bandwidth it
// reaches (docs/network.md "Collectives as NCCL runs them"); sim/net/nccl_model.h applies it to the
// pair it chose.
//
// NCCL runs a collective of S bytes (its size: the whole buffer) on all of its channels only when
// every thread of every channel gets a minimum share: from nc = channels (comm->nChannels, the
// tuning's `channels`) it drops one channel while S < nc x nt x threshold, down to one; nt is the
// protocol's maximum threads per channel and threshold its bytes per thread (src/enqueue.cc, the
// ring/tree channel tuning, the same in NCCL 2.19.3 and 2.20.3). The figures, NCCL 2.19.3 and
// 2.20.3 (v2.19.3-1 and commit b6475625 = v2.20.3-1 of NVIDIA/nccl):
//   bytes per thread (NCCL_LL_THREAD_THRESHOLD, NCCL_LL128_THREAD_THRESHOLD,
//     NCCL_SIMPLE_THREAD_THRESHOLD in src/include/comm.h): LL 8, LL128 8, Simple 64; the ring's
//     LL figure is multiplied by the ranks (threadThresholds in src/graph/tuning.cc).
//   threads per channel (maxThreads in src/graph/tuning.cc; NCCL_LL_MAX_NTHREADS,
//     NCCL_LL128_MAX_NTHREADS, NCCL_SIMPLE_MAX_NTHREADS in src/include/device.h): LL 512, LL128
//     640, Simple 512; the ring's Simple 256 when its ring is no faster than PCI_BW = 12 GB/s
//     (src/graph/topo.h). NCCL compares its ring graph's intra-node bandwidth; moesim the group's
//     intra-node link (the NIC for one GPU per node).
// https://github.com/NVIDIA/nccl/blob/b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2/src/enqueue.cc
// https://github.com/NVIDIA/nccl/blob/b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2/src/graph/tuning.cc
//
// The bandwidth of nc channels is nc / channels of all channels' (NCCL's own scaling of a preset
// channel count: bw / comm->nChannels x nChannels in ncclTopoGetAlgoTime, src/graph/tuning.cc of
// v2.19.3-1): each channel moves an equal share, the link's bandwidth over `channels`. NCCL
// chooses its algorithm and protocol as if every channel ran (its estimate has no channel term),
// so the choice does not change; the time does.
//
// Not modelled: below one channel's share (S < nt x threshold) NCCL also halves the threads of the
// channel (while nt is a multiple of 128); the bandwidth is taken as one full channel's there.
#pragma once

#include <array>

#include "sim/spec/nccl_tuning.h"

namespace moesim {

struct NcclGroup;
struct NcclLinks;

inline constexpr PerNcclProtocol<int> kNcclBytesPerThread{8, 8, 64};  // LL, LL128, Simple
inline constexpr PerNcclProtocol<int> kNcclMaxThreads{512, 640, 512};
inline constexpr int kNcclSlowRingSimpleThreads = 256;
inline constexpr double kNcclPciBytesPerNs = 12.0;  // PCI_BW, 12 GB/s

// The channels NCCL runs (a, q) of `bytes` (NCCL's size S) on over `g` (see above); 1 to
// t.channels.
int nccl_channels_used(const NcclTuning& t, NcclAlgorithm a, NcclProtocol q, double bytes, const NcclGroup& g,
                       const NcclLinks& links);

}  // namespace moesim
