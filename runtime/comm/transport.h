// The communication interface of the executor: all-to-all of fixed per-peer blocks (the MoE
// layer's dispatch and combine) and all-to-allv of packed per-peer byte counts, issued for every
// local member of the group at once (one process may drive several ranks: all GPUs of a node with
// ncclCommInitAll, or N virtual ranks on one GPU with the loopback transport).
//
// Implementations: LoopbackTransport (loopback.h, device-to-device copies on the members' comm
// streams, any DeviceOps) and NcclTransport (nccl_transport.h, grouped ncclSend / ncclRecv, one
// communicator per channel so that the dispatch and combine streams never share one).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/comm/a2a_layout.h"
#include "runtime/exec/device.h"

namespace moesim::runtime {

// The two communication channels of the graph's stream classes comm.dispatch and comm.combine:
// collectives on one channel are issued in the same order on every rank (the graph's stream order).
inline constexpr int kNumCommChannels = 2;

struct AllToAllMember {
  int rank = 0;                 // rank in the group, 0..group_size-1
  DeviceOps* device = nullptr;
  int stream = 0;               // the member's stream for this collective
  const void* send = nullptr;
  BlockLayout send_layout;
  void* recv = nullptr;
  BlockLayout recv_layout;
};

struct AllToAllvMember {
  int rank = 0;
  DeviceOps* device = nullptr;
  int stream = 0;
  const void* send = nullptr;
  std::vector<std::int64_t> send_bytes;  // per peer, packed in peer order
  void* recv = nullptr;
  std::vector<std::int64_t> recv_bytes;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string name() const = 0;
  // Ranks in the group (every member, local or not).
  virtual int group_size() const = 0;
  // Issues the collective for every local member (members in ascending rank order). Each
  // member's stream has already waited for the member's producers; the collective completes on
  // each member's stream (later work on it sees the received data, and may overwrite the sent).
  virtual void all_to_all(const std::vector<AllToAllMember>& members, int channel) = 0;
  virtual void all_to_allv(const std::vector<AllToAllvMember>& members, int channel) = 0;
  // Waits until the devices have finished the step's work. NCCL overrides it with a watchdog
  // that aborts the communicators on an asynchronous error or a timeout and throws.
  virtual void wait_for(const std::vector<DeviceOps*>& devices) {
    for (DeviceOps* d : devices) d->synchronize();
  }
};

}  // namespace moesim::runtime
